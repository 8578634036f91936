import re
from pathlib import Path

import pytest
import trio

from trio_agent import TextBlock, ToolUseBlock
from trio_agent._cli._demo import demo_answers, demo_script, expected_facts, make_demo_workspace
from trio_agent.tools import Workspace, default_tools


def test_the_script_is_three_answers_with_unique_tool_ids() -> None:
    turns = demo_script()
    assert len(turns) == 3
    names = [[b.name for b in t.blocks if isinstance(b, ToolUseBlock)] for t in turns]
    assert names == [["Read", "Read", "Grep", "Glob", "Read"], ["Bash", "Write"], []]
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
    assert len(reads) == 3
    for b in reads:
        assert (tmp_path / b.input["path"]).is_file()


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
    assert re.search(r"^OK$", out, re.MULTILINE)
    counts = {name: int(n) for n, name in re.findall(r"^\s*(\d+) (\S+)$", out, re.MULTILINE)}
    code = sum(v for k, v in counts.items() if k.startswith("minicalc/"))
    assert code == facts["code_lines"]
    assert counts["tests/test_ops.py"] == facts["test_lines"]
    final = demo_script()[2].blocks[0]
    assert isinstance(final, TextBlock)
    assert f"{code} lines of code" in final.text


def test_the_tool_inputs_fit_the_real_tools(tmp_path: Path) -> None:
    tools = {t.name: t for t in default_tools(Workspace(tmp_path))}
    uses = [b for turn in demo_script() for b in turn.blocks if isinstance(b, ToolUseBlock)]
    assert len(uses) == 7
    for b in uses:
        assert tools[b.name].validate(dict(b.input)) is None, b


def test_answers_stream_the_script() -> None:
    answers = demo_answers(speed=2)
    assert [a.message.content for a in answers] == [t.blocks for t in demo_script()]
    assert answers[0].timing.token_delay == 0.0125
    with pytest.raises(ValueError, match="speed"):
        demo_answers(speed=0)


def test_the_todos_are_the_ones_in_the_files(tmp_path: Path) -> None:
    make_demo_workspace(tmp_path)
    found = []
    for path in sorted(tmp_path.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "TODO" in line:
                found.append((path.relative_to(tmp_path).as_posix(), n, line.strip()))
    assert found == expected_facts()["todos"]
    assert len(found) == 2
