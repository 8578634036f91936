"""``trio-agent run`` leaves ``max_tokens`` to the library unless told: an answer cut by
``max_tokens`` is asked again with more room; ``--max-tokens N`` is kept as given."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import trio_agent._cli._agent as cli_agent
from trio_agent import TextBlock
from trio_agent._cli._main import build_parser
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model


@pytest.mark.parametrize(
    ("flags", "expected"), [([], [8192, 64000]), (["--max-tokens", "500"], [500, 500])]
)
async def test_run_escalates_only_its_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: list[int]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-sentinel")
    scripted = ScriptedModel(
        [
            ScriptedAnswer(blocks=[TextBlock("a long ans")], stop_reason="max_tokens"),
            ScriptedAnswer(blocks=[TextBlock("a long answer, whole")]),
        ]
    )
    async with serve_scripted_model(scripted) as url:
        argv = ["run", "write", "--model", "claude-sonnet-5-5", "--workspace", str(tmp_path)]
        args = build_parser().parse_args([*argv, "--base-url", url, *flags])
        await cli_agent.run_prompt(args, out=io.StringIO(), err=io.StringIO())  # type: ignore[arg-type]
    assert [r.body["max_tokens"] for r in scripted.requests] == expected
