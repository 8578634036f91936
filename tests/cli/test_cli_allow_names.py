"""``--allow bash`` (wrong case) or an unknown tool name is warned about, not
silently kept as a rule that matches nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trio_agent import TextBlock
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model


async def test_allow_with_the_wrong_case_or_an_unknown_name_warns(tmp_path: Path, cli: Any) -> None:
    scripted = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("Hi.")])])
    async with serve_scripted_model(scripted) as url:
        argv = ["run", "hi", "--base-url", url, "--workspace", str(tmp_path)]
        argv += ["--allow", "bash,Read,Bash(git *)", "--deny", "Nope"]
        async with cli.open(argv) as run:
            await run.close_stdin()
            assert await run.wait() == 0
    assert "--allow bash: no tool is named bash (did you mean Bash?)" in run.stderr
    assert "--deny Nope: no tool is named Nope\n" in run.stderr
    assert "Read" not in run.stderr
    assert "git" not in run.stderr
