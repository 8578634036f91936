import json
import re
from pathlib import Path

import pytest
import trio

from trio_agent import TextBlock, ToolUseBlock
from trio_agent._cli._demo_script import (
    demo_answers,
    demo_script,
    expected_facts,
    make_demo_workspace,
)
from trio_agent.tools import Workspace, default_tools


def test_the_script_is_four_answers_with_unique_tool_ids() -> None:
    turns = demo_script()
    assert len(turns) == 4
    names = [[b.name for b in t.blocks if isinstance(b, ToolUseBlock)] for t in turns]
    assert names == [
        ["Read", "Read", "Grep", "Glob", "Read", "Read"],
        ["Bash", "Write"],
        ["Edit"],
        [],
    ]
    ids = [b.id for t in turns for b in t.blocks if isinstance(b, ToolUseBlock)]
    assert len(ids) == len(set(ids))
    assert all(isinstance(t.blocks[0], TextBlock) for t in turns)


def test_the_reads_name_files_that_exist(tmp_path: Path) -> None:
    make_demo_workspace(tmp_path)
    reads = [
        b
        for turn in demo_script()
        for b in turn.blocks
        if isinstance(b, ToolUseBlock) and b.name == "Read"
    ]
    assert len(reads) == 4
    for b in reads:
        assert (tmp_path / b.input["file_path"]).is_file()


async def test_the_bash_command_says_what_the_model_claims(tmp_path: Path) -> None:
    make_demo_workspace(tmp_path)
    bash = next(
        b for b in demo_script()[1].blocks if isinstance(b, ToolUseBlock) and b.name == "Bash"
    )
    done = await trio.run_process(
        ["bash", "-c", bash.input["command"]], cwd=tmp_path, capture_stdout=True
    )
    out = done.stdout.decode()
    facts = expected_facts()
    assert f"Ran {facts['tests_run']} tests" in out
    # the suite is genuinely slow: it waited for the REPL's 2 s idle timeout
    assert "test_repl_leaves_when_idle (test_ops.CliTest.test_repl_leaves_when_idle) ... ok" in out
    assert re.search(r"^OK$", out, re.MULTILINE)
    counts = {name: int(n) for n, name in re.findall(r"^\s*(\d+) (\S+)$", out, re.MULTILINE)}
    code = sum(v for k, v in counts.items() if k.startswith("minicalc/"))
    assert code == facts["code_lines"]
    assert counts["tests/test_ops.py"] == facts["test_lines"]
    final = demo_script()[3].blocks[0]
    assert isinstance(final, TextBlock)
    assert f"{code} lines of code" in final.text
    assert f"all {facts['tests_run']} tests pass" in final.text


def test_the_tool_inputs_fit_the_real_tools(tmp_path: Path) -> None:
    tools = {t.name: t for t in default_tools(Workspace(tmp_path))}
    uses = [b for turn in demo_script() for b in turn.blocks if isinstance(b, ToolUseBlock)]
    assert len(uses) == 9
    for b in uses:
        assert tools[b.name].validate(dict(b.input)) is None, b


def test_answers_stream_the_script() -> None:
    answers = demo_answers(speed=2)
    assert [a.message.content for a in answers] == [t.blocks for t in demo_script()]
    assert answers[0].timing.token_delay == 0.0125
    with pytest.raises(ValueError, match="speed"):
        demo_answers(speed=0)


def test_the_report_streams_for_seconds_after_the_tests_start() -> None:
    """At speed 1 the model streams for more than 2.5 s after the Bash block, while
    the tests (at least 2 s of real waiting) run: that overlap is the saving."""
    answer = demo_answers(speed=1)[1]
    timing = answer.timing
    blocks = list(answer.message.content)
    bash = next(i for i, b in enumerate(blocks) if isinstance(b, ToolUseBlock) and b.name == "Bash")
    after = 0.0
    for block in blocks[bash + 1 :]:
        assert isinstance(block, ToolUseBlock)
        chunks = -(-len(json.dumps(dict(block.input))) // timing.json_chunk_size)
        after += timing.block_delay + chunks * timing.token_delay
    assert after > 2.5


def test_the_todos_are_the_ones_in_the_files(tmp_path: Path) -> None:
    make_demo_workspace(tmp_path)
    found = []
    for path in sorted(tmp_path.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "TODO" in line:
                found.append((path.relative_to(tmp_path).as_posix(), n, line.strip()))
    assert found == expected_facts()["todos"]
    assert len(found) == 2
