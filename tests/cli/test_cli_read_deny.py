"""A Read deny rule on the command line also keeps Glob and Grep out of what it
covers: the real ``trio-agent run`` against a scripted server, real files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trio_agent import TextBlock, ToolUseBlock
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model


async def test_grep_and_glob_do_not_show_what_read_may_not(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key.txt").write_text("TOKEN=hunter2\n")
    (tmp_path / "notes.txt").write_text("TOKEN=public\n")
    answer = ScriptedAnswer(
        blocks=[
            ToolUseBlock(
                "toolu_g", "Grep", {"pattern": "TOKEN", "path": ".", "output_mode": "content"}
            ),
            ToolUseBlock("toolu_l", "Glob", {"pattern": "**/*"}),
        ]
    )
    model = ScriptedModel([answer, ScriptedAnswer(blocks=[TextBlock("Done.")])])
    async with serve_scripted_model(model) as url:
        args = ["run", "x", "--json", "--base-url", url, "--workspace", str(tmp_path)]
        async with cli.open([*args, "--allow", "Grep,Glob", "--deny", "Read(./secret/**)"]) as run:
            await run.close_stdin()
            assert await run.wait() == 0
    records = [json.loads(line) for line in run.stdout.splitlines()]
    results = {r["tool_use_id"]: r["content"] for r in records if r["type"] == "ToolResult"}
    assert "TOKEN=public" in results["toolu_g"]  # the search ran
    assert "notes.txt" in results["toolu_l"]
    for content in results.values():
        assert "hunter2" not in content
        assert "key.txt" not in content
    assert "hunter2" not in model.requests[1].content.decode()  # nor did the model read it
