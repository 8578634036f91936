"""Security: the permission gate, workspace confinement, Bash, and secrets.

Already covered elsewhere (referenced in docs/RELIABILITY.md): workspace escapes in
tests/tools/test_builtin_workspace.py and test_builtin_files.py (``..``, absolute paths,
symlinks out, NUL bytes, no side effect); Bash verbatim command, timeout, output cap,
group kill in tests/tools/test_builtin_bash.py; rule precedence in tests/loop/test_rules.py.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AnthropicClient,
    Deny,
    PermissionRules,
    TextBlock,
    Tool,
    ToolResult,
    ToolUseBlock,
    TurnEnd,
    TurnOptions,
    UserMessage,
    query,
)
from trio_agent._session._session import Session
from trio_agent.testing import (
    DroppedConnection,
    HTTPErrorAnswer,
    LeakCheck,
    ScriptedAnswer,
    ScriptedModel,
    check_history,
    no_leaks,
    run_virtual,
)
from trio_agent.tools import Bash, Workspace

SENTINEL_KEY = "sk-ant-api03-SENTINEL-9f8e7d6c5b4a-DO-NOT-LEAK"

# -- permission gate: before any side effect; deny wins; unknown tools never run -----


def _recording(name: str, log: list[str]) -> Tool:
    async def run(input: Any, ctx: Any) -> str:
        log.append(f"{name}:{ctx.tool_use_id}")
        return "did it"

    return Tool(name, "", {"type": "object"}, run)


async def _turn(model: ScriptedModel, tools: list[Tool], **kw: Any) -> tuple[list[Any], TurnEnd]:
    events: list[Any] = []
    async with query(
        model.client(api_key=SENTINEL_KEY),
        [UserMessage("go")],
        tools=tools,
        model="m",
        max_tokens=10,
        **kw,
    ) as stream:
        async for event in stream:
            events.append(event)
    check_history(events[-1].messages)
    return events, events[-1]


@settings(max_examples=60, deadline=None)
@given(
    names=st.lists(st.sampled_from(["Write", "Bash", "Nope", "Read"]), min_size=1, max_size=5),
    allow=st.lists(st.sampled_from(["Write", "Bash", "Read", "Nope"]), max_size=4),
    deny=st.lists(st.sampled_from(["Write", "Bash", "Read", "Nope"]), max_size=4),
)
def test_only_allowed_known_tools_ever_run(
    names: list[str], allow: list[str], deny: list[str]
) -> None:
    blocks = [ToolUseBlock(f"t{i}", n, {}) for i, n in enumerate(names)]
    model = ScriptedModel([ScriptedAnswer(blocks=blocks), ScriptedAnswer(blocks=[TextBlock("ok")])])
    log: list[str] = []
    tools = [_recording(n, log) for n in ("Write", "Bash", "Read")]
    rules = PermissionRules(allow=allow, deny=deny)

    async def main() -> list[Any]:
        events, _ = await _turn(model, tools, options=TurnOptions(can_use_tool=rules))
        return events

    events = run_virtual(main, check=LeakCheck(models=[model], processes=False))
    ran = {entry.split(":")[1] for entry in log}
    for i, name in enumerate(names):
        allowed = name in allow and name not in deny and name != "Nope"
        assert (f"t{i}" in ran) == allowed, (name, allow, deny)
    results = [e for e in events if isinstance(e, ToolResult)]
    assert {r.tool_use_id for r in results} == {b.id for b in blocks}


async def test_permission_is_asked_before_the_tool_runs(autojump_clock: Any) -> None:
    order: list[str] = []

    async def ask(tool: Tool, input: Any, ctx: Any) -> Deny:
        order.append("asked")
        await trio.sleep(1)
        return Deny("no")

    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("a", "Write", {})]),
            ScriptedAnswer(blocks=[TextBlock("k")]),
        ]
    )
    await _turn(model, [_recording("Write", order)], options=TurnOptions(can_use_tool=ask))
    assert order == ["asked"]


# -- workspace confinement: the gaps (each file tool, hypothesis over hostile paths) ---


HOSTILE = st.one_of(
    st.sampled_from(
        ["../x", "../../etc/passwd", "/etc/passwd", "a/../../x", "a\x00b", "link/x", "link"]
    ),
    st.builds(lambda n: "../" * n + "escape.txt", st.integers(1, 5)),
)


# -- Bash: no interpolation by the runtime; timeout, cap and group kill (see module doc)


async def test_bash_command_reaches_bash_verbatim(tmp_path: Path) -> None:
    from trio_agent import ToolContext

    bash = Bash(Workspace(tmp_path), timeout=10)
    tricky = "printf '%s\\n' \"$HOME_NOT_SET\" '$(touch pwned)' '`touch pwned2`' ; echo {a,b}"
    out = await bash.run({"command": tricky}, ToolContext("t", "Bash", None))
    text = out if isinstance(out, str) else str(out.content)
    assert "$(touch pwned)" in text
    assert "`touch pwned2`" in text
    assert "a b" in text
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "pwned2").exists()


async def test_bash_timeout_leaves_no_process(tmp_path: Path) -> None:
    from trio_agent import ToolContext

    bash = Bash(Workspace(tmp_path), timeout=0.3)
    with no_leaks(adopt_orphans=True, grace=3.0):
        out = await bash.run(
            {"command": "sleep 30 & sleep 30 & wait"}, ToolContext("t", "Bash", None)
        )
    assert getattr(out, "is_error", False)


# -- secrets: the sentinel key never appears anywhere ----------------------------------


async def test_sentinel_key_never_appears_anywhere(
    autojump_clock: Any,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)
    model = ScriptedModel(
        [
            HTTPErrorAnswer(status=529),
            DroppedConnection(),
            ScriptedAnswer(blocks=[TextBlock("hi"), ToolUseBlock("a", "Write", {})]),
            HTTPErrorAnswer(status=401),
        ]
    )
    from trio_agent import RetryPolicy

    client = model.client(api_key=SENTINEL_KEY, retry=RetryPolicy(max_retries=2, jitter=(1, 1)))
    session = Session(
        client, [_recording("Write", [])], model="m", transcript_path=tmp_path / "t.jsonl"
    )
    seen: list[str] = [repr(client), str(client.__dict__.keys())]
    async with session.submit("hello") as events:
        async for event in events:
            seen.append(repr(event))
            if isinstance(event, TurnEnd) and event.error is not None:
                seen += [repr(event.error), str(event.error), repr(event.error.__dict__)]
                cause = event.error.__cause__
                seen.append(repr(cause))
    session.close()
    seen += [repr(r) for r in model.requests]
    seen.append((tmp_path / "t.jsonl").read_text())
    seen += [r.getMessage() + repr(r.args) for r in caplog.records]
    captured = capsys.readouterr()
    seen += [captured.out, captured.err]
    everything = "\n".join(seen)
    assert model.requests[0].headers["x-api-key"] == SENTINEL_KEY  # it was really sent
    assert SENTINEL_KEY not in everything
    assert SENTINEL_KEY[10:30] not in everything


def test_sentinel_key_not_in_cli_output(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from trio_agent._cli._main import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens
    with no_leaks(processes=False):
        assert main(["stream", "--json", "hello"]) == 1  # connection refused, typed
    out = capsys.readouterr()
    assert "cannot reach http://127.0.0.1:9" in out.err
    assert SENTINEL_KEY not in out.out + out.err
    assert "<redacted>" in repr(AnthropicClient(api_key=SENTINEL_KEY))
    assert os.environ["ANTHROPIC_API_KEY"] == SENTINEL_KEY
