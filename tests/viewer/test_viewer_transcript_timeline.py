"""A transcript's ``timeline`` lines on its session page, as the viewer serves it on
127.0.0.1: the same SVG rows as an event log's Timeline (a stream row per model
call, a row per tool with its state). The session is written in virtual time (a
run of its own, in a thread); the page is fetched in real time."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import trio
import trio.testing

from trio_agent import Session, TextBlock, Tool, ToolContext, ToolUseBlock, Usage
from trio_agent._viewer import read_session
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing

SLOW = Timing(token_delay=0.1, block_delay=0.1, text_chunk_size=4, json_chunk_size=4)


async def write_session(path: Path) -> list[str]:
    """A two-call turn into *path*, its two tools overlapping the stream (one fails)."""
    ran: list[str] = []

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.append(ctx.tool_use_id)
        await trio.sleep(1.0)
        if input.get("fail"):
            raise RuntimeError("broke")
        return "ok"

    tool = Tool("Read", "Read a file.", {"type": "object"}, run, concurrency_safe=True)
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[
                    TextBlock("Reading."),
                    ToolUseBlock("a", "Read", {"path": "a.py"}),
                    ToolUseBlock("b", "Read", {"path": "b.py", "fail": True}),
                ],
                usage=Usage(input_tokens=10, output_tokens=5),
                timing=SLOW,
            ),
            ScriptedAnswer(blocks=[TextBlock("Done.")], timing=SLOW),
        ]
    )
    session = Session(model.client(), [tool], model="m", transcript_path=path)
    async with session, session.submit("read a and b") as events:
        async for _ in events:
            pass
    return ran


async def test_a_session_transcript_page_draws_each_calls_timeline(
    viewer: Any, tmp_path: Path
) -> None:
    path = tmp_path / "t.jsonl"
    virtual = trio.testing.MockClock(autojump_threshold=0)
    ran = await trio.to_thread.run_sync(lambda: trio.run(write_session, path, clock=virtual))
    assert ran == ["a", "b"]
    lines = [json.loads(x) for x in path.read_bytes().splitlines()]
    timelines = [r for r in lines if r["type"] == "timeline"]
    assert len(timelines) == 2

    view = read_session(path)
    assert view.kind == "transcript"
    answers = [i for i in view.items if i.kind == "assistant"]
    assert [a.timeline["index"] if a.timeline else None for a in answers] == [1, 2]
    assert not [i.text for i in view.items if i.kind == "note"]  # no "unknown line type"

    async with viewer([path]) as url, httpx.AsyncClient() as http:
        home = await http.get(url + "/")
        session = home.text.split('href="/s/', 1)[1].split('"', 1)[0]
        served = await http.get(f"{url}/s/{session}")
    assert served.status_code == 200
    page = served.text
    streams = re.findall(r'<g class="tl-row" data-kind="stream">', page)
    tools = re.findall(r'<g class="tl-row" data-kind="tool" data-state="([a-z]+)">', page)
    assert len(streams) == 2
    assert tools == [t["state"] for t in timelines[0]["tools"]] == ["done", "error"]
    for t in timelines:
        assert f"overlap saved {t['saved']:.3f} s" in page
