"""The viewer in a real browser (headless Chromium over WebDriver): the session list and
the pages of a demo session (its event log, and a transcript the library wrote), a
priced cost, a hostile transcript whose markup must not run, "show all", and a page
that follows its transcript as it grows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent
from trio_agent import (
    AssistantMessage,
    PermissionRules,
    Session,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnOptions,
    Usage,
    UserMessage,
    read_transcript,
    subagent,
)
from trio_agent._cli._demo import run_demo
from trio_agent._cli._demo_script import DEMO_MODEL, DEMO_PROMPT, demo_model, make_demo_workspace
from trio_agent._models import cost_usd
from trio_agent.lowlevel import TranscriptWriter
from trio_agent.testing import ScriptedAnswer, ScriptedModel
from trio_agent.tools import Workspace, default_tools

HOSTILE_RESULT = "<script>window.__pwned = 'result'</script><svg onload=\"window.__pwned='svg'\">"
HOSTILE_PROMPT = "<img src=x onerror=\"window.__pwned='prompt'\"> please"
BIG = "line of output\n" * 400  # 6,000 characters: cut, with "show all"


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo's event log (``trio-agent demo --json``), a transcript of the demo's
    session written by the library, a priced transcript and a hostile one."""
    root = tmp_path_factory.mktemp("sessions")
    events = root / "demo.events.jsonl"
    transcript = root / "demo.transcript.jsonl"

    async def make() -> None:
        with events.open("w") as out:
            assert await run_demo(50.0, True, out) in (0, 1)
        with retried.open("w") as out:  # its first answer's stream breaks: a retry
            assert await run_demo(50.0, True, out, "reset") in (0, 1)
        work = root / "work"
        work.mkdir()
        make_demo_workspace(work)
        model = demo_model(speed=50.0)
        session = Session(
            model.client(api_key="demo"),
            default_tools(Workspace(work)),
            model=DEMO_MODEL,
            transcript_path=transcript,
            options=TurnOptions(
                can_use_tool=PermissionRules(
                    allow=["Read", "Glob", "Grep", "Bash", "Write", "Edit"]
                )
            ),
        )
        async with session, session.submit(DEMO_PROMPT) as stream:
            async for _ in stream:
                pass

        def answer(*blocks: Any, inp: int, out: int) -> ScriptedAnswer:
            return ScriptedAnswer(
                blocks=list(blocks), usage=Usage(input_tokens=inp, output_tokens=out)
            )

        nested_model = ScriptedModel(
            [
                answer(ToolUseBlock("p1", "outer", {"prompt": "dig"}), inp=100, out=10),
                answer(ToolUseBlock("o1", "inner", {"prompt": "dig deeper"}), inp=20, out=2),
                answer(TextBlock("bedrock"), inp=3, out=1),
                answer(TextBlock("found bedrock"), inp=30, out=3),
                answer(TextBlock("the parent is done"), inp=200, out=20),
            ]
        )
        inner = subagent("inner", "Digs deeper.", tools=[], system="i")
        outer = subagent("outer", "Digs.", tools=[inner], system="o")
        parent = Session(nested_model.client(), [outer], model="m", transcript_path=nested)
        async with parent, parent.submit("go") as stream:
            async for _ in stream:
                pass
        usage.append(parent.usage)

    usage: list[Usage] = []
    nested = root / "subagents.jsonl"
    retried = root / "retried.events.jsonl"
    trio.run(make)

    priced = root / "priced.jsonl"
    writer = TranscriptWriter.open(priced, model=trio_agent.DEFAULT_MODEL)
    writer.append(UserMessage("how much does this cost?"))
    writer.append(
        AssistantMessage(
            id="msg_p1",
            model=trio_agent.DEFAULT_MODEL,
            content=[TextBlock("Not much.")],
            stop_reason="end_turn",
            usage=Usage(input_tokens=1200, output_tokens=340),
        )
    )
    writer.close()

    hostile = root / "hostile.jsonl"
    writer = TranscriptWriter.open(hostile, model="<b>model</b>")
    writer.append(UserMessage(HOSTILE_PROMPT))
    writer.append(
        AssistantMessage(
            id="msg_h1",
            model="m",
            content=[
                TextBlock("<script>window.__pwned = 'text'</script>"),
                ToolUseBlock(
                    "toolu_h", "Bash", {"command": "</pre><script>window.__pwned=1</script>"}
                ),
                ToolUseBlock("toolu_big", "Read", {"file_path": "big.txt"}),
            ],
            stop_reason="tool_use",
            usage=Usage(input_tokens=5, output_tokens=5),
        )
    )
    writer.append(
        UserMessage([ToolResultBlock("toolu_h", HOSTILE_RESULT), ToolResultBlock("toolu_big", BIG)])
    )
    writer.close()
    assert usage[0].input_tokens == 353  # the children's included
    return {
        "events": events,
        "transcript": transcript,
        "priced": priced,
        "hostile": hostile,
        "subagents": nested,
        "retried": retried,
    }


async def _open_session(browser: Any, url: str, where: Path) -> None:
    await browser.get(url + "/")
    href = await browser.js(
        "for (const row of document.querySelectorAll('tr.session')) {"
        "  if (row.querySelector('.where').textContent === arguments[0])"
        "    return row.querySelector('a').getAttribute('href'); }"
        "return null;",
        str(where.resolve()),
    )
    assert href is not None, f"{where} is not listed"
    await browser.get(url + href)


async def test_the_list_shows_every_session_newest_first(
    browser: Any, viewer: Any, sessions: dict[str, Path]
) -> None:
    async with viewer([sessions["events"].parent]) as url:
        assert url.startswith("http://127.0.0.1:")
        await browser.get(url + "/")
        rows = await browser.js(
            "return [...document.querySelectorAll('tr.session')].map(r => ({"
            " where: r.querySelector('.where').textContent,"
            " model: r.querySelector('.model').textContent,"
            " turns: r.querySelector('.turns').textContent,"
            " tokens: r.querySelector('.tokens').textContent,"
            " cost: r.querySelector('.cost').textContent,"
            " end: r.querySelector('.end').textContent,"
            " updated: r.querySelector('.updated').textContent}));"
        )
    by_file = {Path(r["where"]).name: r for r in rows}
    assert set(by_file) == {p.name for p in sessions.values()}
    assert by_file["demo.events.jsonl"]["model"] == DEMO_MODEL
    assert by_file["demo.events.jsonl"]["end"] == "completed"
    assert by_file["demo.events.jsonl"]["turns"] == "1"
    assert by_file["demo.transcript.jsonl"]["end"] == "stop: end_turn"
    assert by_file["priced.jsonl"]["tokens"] == "1,200 in / 340 out"
    expected = cost_usd(Usage(input_tokens=1200, output_tokens=340), trio_agent.DEFAULT_MODEL)
    assert expected is not None
    assert by_file["priced.jsonl"]["cost"] == f"${expected:.4f}"
    assert [r["updated"] for r in rows] == sorted((r["updated"] for r in rows), reverse=True)


async def test_a_demo_session_page_shows_its_tool_calls_and_timelines(
    browser: Any, viewer: Any, sessions: dict[str, Path]
) -> None:
    records = [json.loads(line) for line in sessions["events"].read_text().splitlines()]
    timeline = next(r for r in records if r["type"] == "Timeline")
    uses = [
        b
        for r in records
        if r["type"] == "AssistantMessage"
        for b in r["message"]["content"]
        if b["type"] == "tool_use"
    ]
    async with viewer([sessions["events"]]) as url:
        await _open_session(browser, url, sessions["events"])
        page = await browser.js(
            "return {"
            " tools: [...document.querySelectorAll('.block.tool')].map(b => ({"
            "   id: b.dataset.toolId, name: b.querySelector('.name').textContent,"
            "   result: !!b.querySelector('.result:not(.pending)')})),"
            " streams: document.querySelectorAll('svg .tl-row[data-kind=stream]').length,"
            " toolRows: [...document.querySelectorAll('svg .tl-row[data-kind=tool]')]"
            "   .map(r => r.dataset.state),"
            " saved: [...document.querySelectorAll('.saved')].map(s => s.textContent),"
            " end: document.querySelector('dd.end').textContent,"
            " cost: document.querySelector('dd.cost').textContent,"
            "};"
        )
    assert [t["id"] for t in page["tools"]] == [u["id"] for u in uses]
    assert [t["name"] for t in page["tools"]] == [u["name"] for u in uses]
    assert all(t["result"] for t in page["tools"])
    assert page["streams"] == len(timeline["calls"])
    assert page["toolRows"] == [t["state"] for c in timeline["calls"] for t in c["tools"]]
    assert page["saved"] == [f"overlap saved {c['saved']:.3f} s" for c in timeline["calls"]]
    assert page["end"] == "completed"
    assert page["cost"] == "—"  # the scripted model has no price


async def test_a_transcript_page_shows_the_conversation(
    browser: Any, viewer: Any, sessions: dict[str, Path]
) -> None:
    history = read_transcript(sessions["transcript"]).messages
    uses = [b for m in history if isinstance(m, AssistantMessage) for b in m.tool_uses]
    async with viewer([sessions["transcript"]]) as url:
        await _open_session(browser, url, sessions["transcript"])
        page = await browser.js(
            "return {"
            " user: document.querySelector('.item.user pre').textContent,"
            " tools: [...document.querySelectorAll('.block.tool .name')].map(n => n.textContent),"
            " answers: document.querySelectorAll('.item.assistant').length,"
            " title: document.querySelector('h1').textContent};"
        )
    assert page["user"] == DEMO_PROMPT
    assert page["title"] == " ".join(DEMO_PROMPT.split())[:100]
    assert page["tools"] == [u.name for u in uses]
    assert page["answers"] == sum(isinstance(m, AssistantMessage) for m in history)


async def test_hostile_text_is_shown_never_run(
    browser: Any, viewer: Any, sessions: dict[str, Path]
) -> None:
    async with viewer([sessions["hostile"]]) as url:
        await browser.get(url + "/")
        listed = await browser.js("return [window.__pwned, document.scripts.length];")
        await _open_session(browser, url, sessions["hostile"])
        page = await browser.js(
            "return {"
            " pwned: window.__pwned === undefined ? null : String(window.__pwned),"
            " scripts: [...document.scripts].map(s => s.getAttribute('src')),"
            " imgs: document.querySelectorAll('main img, main svg[onload]').length,"
            " prompt: document.querySelector('.item.user pre').textContent,"
            " text: document.querySelector('.block.text pre').textContent,"
            " result: document.querySelector('[data-tool-id=toolu_h] .result pre').textContent,"
            " input: document.querySelector('[data-tool-id=toolu_h] pre.input').textContent,"
            " model: document.querySelector('dd.model').textContent};"
        )
        # a big result: cut, and whole behind "show all"
        fold = await browser.js(
            "const d = document.querySelector('[data-tool-id=toolu_big] details.all');"
            "return [d.open, d.querySelector('summary').textContent,"
            " document.querySelector('[data-tool-id=toolu_big] pre.cut').textContent.length];"
        )
        await browser.click("[data-tool-id=toolu_big] details.all summary")
        shown = await browser.js(
            "const d = document.querySelector('[data-tool-id=toolu_big] details.all');"
            "return [d.open, d.querySelector('pre').textContent];"
        )
    assert listed == [None, 1]
    assert page["pwned"] is None
    assert page["scripts"] == ["/static/viewer.js"]
    assert page["imgs"] == 0
    assert page["prompt"] == HOSTILE_PROMPT
    assert page["text"] == "<script>window.__pwned = 'text'</script>"
    assert page["result"] == HOSTILE_RESULT
    assert "</pre><script>window.__pwned=1</script>" in page["input"]
    assert page["model"] == "<b>model</b>"
    head = "".join(BIG.splitlines(keepends=True)[:12])  # the first 12 lines, then "…"
    assert fold == [False, f"show all (400 lines, {len(BIG):,} characters)", len(head) + 1]
    assert shown == [True, BIG]


async def test_a_page_follows_its_transcript_as_it_grows(
    browser: Any, viewer: Any, tmp_path: Path
) -> None:
    path = tmp_path / "growing.jsonl"
    writer = TranscriptWriter.open(path, model="m")
    writer.append(UserMessage("first question"))
    async with viewer([path]) as url:
        await _open_session(browser, url, path)
        assert await browser.js("return document.querySelectorAll('.item.assistant').length") == 0
        writer.append(
            AssistantMessage(
                id="msg_g1",
                model="m",
                content=[TextBlock("an answer written later")],
                stop_reason="end_turn",
                usage=Usage(input_tokens=1, output_tokens=1),
            )
        )
        writer.close()
        seen = await browser.wait_for(
            "document.querySelector('.item.assistant pre') &&"
            " document.querySelector('.item.assistant pre').textContent"
        )
    assert seen == "an answer written later"


async def test_subagent_turns_are_nested_under_their_calls(
    browser: Any, viewer: Any, sessions: dict[str, Path]
) -> None:
    async with viewer([sessions["subagents"]]) as url:
        await _open_session(browser, url, sessions["subagents"])
        page = await browser.js(
            "const outer = document.querySelector('[data-tool-id=p1] > details.subagent');"
            "const inner = outer.querySelector('[data-tool-id=o1] > details.subagent');"
            "return {"
            " outer: outer.querySelector('summary').textContent,"
            " inner: inner.querySelector('summary').textContent,"
            " innerText: [...inner.querySelectorAll(':scope > .nested > .item.assistant > .block.text > pre')]"
            "   .map(p => p.textContent),"
            " outerText: [...outer.querySelectorAll(':scope > .nested > .item.assistant > .block.text > pre')]"
            "   .map(p => p.textContent),"
            " top: [...document.querySelectorAll('main > .conversation > .item.assistant > .block.text > pre')]"
            "   .map(p => p.textContent),"
            " tokens: document.querySelector('dd.tokens').textContent};"
        )
    assert page["outer"] == "subagent outer: completed, 2 model calls"
    assert page["inner"] == "subagent inner: completed, 1 model calls"
    assert page["innerText"] == ["bedrock"]
    assert page["outerText"] == ["found bedrock"]
    assert page["top"] == ["the parent is done"]
    assert page["tokens"] == "353 in / 36 out"  # the subagents' tokens counted


async def test_a_retried_call_shows_its_discarded_attempt_and_timeline(
    browser: Any, viewer: Any, sessions: dict[str, Path]
) -> None:
    records = [json.loads(line) for line in sessions["retried"].read_text().splitlines()]
    timeline = next(r for r in records if r["type"] == "Timeline")
    async with viewer([sessions["retried"]]) as url:
        await _open_session(browser, url, sessions["retried"])
        page = await browser.js(
            "const notes = [...document.querySelectorAll('.item.note.warn')];"
            "return {"
            " notes: notes.map(n => n.firstChild.textContent),"
            " discardedRows: notes[0].querySelectorAll('svg .tl-row').length,"
            " streams: document.querySelectorAll('svg .tl-row[data-kind=stream]').length,"
            " answers: document.querySelectorAll('.item.assistant figure.timeline').length};"
        )
    assert page["notes"][0].startswith("model call 1 discarded after StreamTruncatedError")
    assert page["notes"][0].endswith(": stream_retry")
    assert page["notes"][1] == "model call 1: stream_retry"
    first = timeline["calls"][0]
    assert page["discardedRows"] == 1 + len(first["tools"])  # its stream and its tools
    assert page["streams"] == len(timeline["calls"])
    assert page["answers"] == len(timeline["calls"]) - 1  # each answer but the discarded
