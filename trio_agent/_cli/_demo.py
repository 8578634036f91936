"""The ``trio-agent demo`` script: a small project and a scripted agent task on it.

The scripted model plays an agent asked for a status report on a tiny Python
project. Its three answers use the real built-in tools on real files:

1. reads the README and the TODO list, greps the code for TODO comments and globs
   the Python files — four concurrency-safe tools, each starting as soon as its
   block has streamed, while the rest of the answer is still streaming;
2. runs the test suite and counts lines with Bash, and writes ``STATUS.md``;
3. the final summary.

The tool inputs and the model's claims are computed from the files this module
creates, so what the model says matches what the tools return.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from .._messages import ContentBlock, TextBlock, ToolUseBlock

if TYPE_CHECKING:
    from ..testing import ScriptedAnswer

__all__ = [
    "DEMO_MODEL",
    "DEMO_PROMPT",
    "DemoTurn",
    "demo_answers",
    "demo_script",
    "make_demo_workspace",
]

DEMO_MODEL: Final = "claude-demo-scripted"
DEMO_PROMPT: Final = (
    "Give me a status report on this project: what it does, its open TODOs (in the "
    "code and in TODO.md), whether the tests pass and how big it is. Save the report "
    "to STATUS.md."
)

_FILES: Mapping[str, str] = {
    "README.md": """\
# minicalc

A tiny calculator: `minicalc.ops` has the arithmetic, `minicalc.cli` a command line
(`python -m minicalc.cli 2 + 3`).

Run the tests with `python -m unittest discover -s tests`.
""",
    "TODO.md": """\
# TODO

- [ ] divide(): raise a clear error on division by zero
- [ ] cli: add a --precision flag
- [x] tests for add and sub
""",
    "minicalc/__init__.py": """\
\"\"\"minicalc: a tiny calculator.\"\"\"

from .ops import add, divide, mul, sub

__all__ = ["add", "divide", "mul", "sub"]
""",
    "minicalc/ops.py": """\
\"\"\"The four operations.\"\"\"


def add(a: float, b: float) -> float:
    return a + b


def sub(a: float, b: float) -> float:
    return a - b


def mul(a: float, b: float) -> float:
    return a * b


def divide(a: float, b: float) -> float:
    # TODO: raise a clear error on division by zero
    return a / b
""",
    "minicalc/cli.py": """\
\"\"\"python -m minicalc.cli A OP B\"\"\"

import sys

from . import ops

OPS = {"+": ops.add, "-": ops.sub, "*": ops.mul, "/": ops.divide}


def main(argv: list[str]) -> None:
    # TODO: add a --precision flag
    a, op, b = argv
    print(OPS[op](float(a), float(b)))


if __name__ == "__main__":
    main(sys.argv[1:])
""",
    "tests/test_ops.py": """\
import subprocess
import sys
import unittest

from minicalc import ops


class OpsTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(ops.add(2, 3), 5)

    def test_sub(self):
        self.assertEqual(ops.sub(2, 3), -1)

    def test_mul(self):
        self.assertEqual(ops.mul(2, 3), 6)

    def test_cli(self):
        # end to end, in a fresh interpreter: the slow test of the suite
        for a, op, b, want in [("6", "*", "7", "42.0"), ("1", "+", "2", "3.0")] * 4:
            run = subprocess.run(
                [sys.executable, "-m", "minicalc.cli", a, op, b],
                capture_output=True, text=True, check=True,
            )
            self.assertEqual(run.stdout.strip(), want)
""",
}

_TESTS_RUN: Final = 4
_CODE_GLOB: Final = ("minicalc/__init__.py", "minicalc/cli.py", "minicalc/ops.py")


def make_demo_workspace(root: Path) -> None:
    """Create the demo project (a README, a TODO list, a package, its tests) in *root*."""
    for name, text in _FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@attrs.frozen
class DemoTurn:
    """One scripted answer: its blocks, in streaming order."""

    blocks: tuple[ContentBlock, ...] = attrs.field(converter=tuple)


def _python() -> str:
    # The command the "model" types: python3 where there is one on PATH, else the
    # interpreter running the demo (a bare venv without python3 on PATH).
    return "python3" if shutil.which("python3") else shlex.quote(sys.executable)


def _line_count(name: str) -> int:
    return _FILES[name].count("\n")


def _todos() -> list[tuple[str, int, str]]:
    found: list[tuple[str, int, str]] = []
    for name in sorted(_FILES):
        if not name.endswith(".py"):
            continue
        for n, line in enumerate(_FILES[name].splitlines(), 1):
            if "TODO" in line:
                found.append((name, n, line.strip()))
    return found


def _status_report() -> str:
    todos = "\n".join(f"- `{name}:{n}`: {line.lstrip('# ')}" for name, n, line in _todos())
    return f"""\
# minicalc: status

## What it is
A tiny calculator package: `minicalc.ops` (add, sub, mul, divide) and a command
line in `minicalc.cli`.

## Open TODOs
{todos}

Both match the open items of TODO.md; "tests for add and sub" is done.

## Size
{len(_CODE_GLOB)} modules in `minicalc/`, one test module in `tests/`.

## Next steps
1. Make `divide()` raise `ZeroDivisionError` with a clear message, and test it.
2. Add `--precision` to the CLI.
3. Test `divide()` at all: it has no test yet.
"""


def demo_script() -> Sequence[DemoTurn]:
    """The scripted model's three answers (the workspace comes from
    :func:`make_demo_workspace`; paths are relative to its root)."""
    code_lines = sum(_line_count(n) for n in _CODE_GLOB)
    test_lines = _line_count("tests/test_ops.py")
    python = _python()
    first = DemoTurn(
        [
            TextBlock(
                "I'll start with the project's own description and TODO list, and search "
                "the code for TODO comments at the same time."
            ),
            ToolUseBlock("toolu_demo_01", "Read", {"path": "README.md"}),
            ToolUseBlock("toolu_demo_02", "Read", {"path": "TODO.md"}),
            ToolUseBlock("toolu_demo_03", "Grep", {"pattern": "TODO", "glob": "*.py"}),
            ToolUseBlock("toolu_demo_04", "Glob", {"pattern": "**/*.py"}),
            ToolUseBlock("toolu_demo_05", "Read", {"path": "minicalc/ops.py"}),
        ]
    )
    second = DemoTurn(
        [
            TextBlock(
                f"minicalc is a small calculator with {len(_todos())} TODO comments in the "
                "code, matching the open items of TODO.md. `divide()` has no test. Let me "
                "run the tests and count lines while I write the report."
            ),
            ToolUseBlock(
                "toolu_demo_06",
                "Bash",
                {
                    "command": f"{python} -m unittest discover -s tests 2>&1 | tail -n 3 "
                    "&& wc -l minicalc/*.py tests/*.py"
                },
            ),
            ToolUseBlock(
                "toolu_demo_07", "Write", {"path": "STATUS.md", "content": _status_report()}
            ),
        ]
    )
    third = DemoTurn(
        [
            TextBlock(
                f"Done. The {_TESTS_RUN} tests pass; the package is {code_lines} lines of code "
                f"plus {test_lines} lines of tests. The report is in STATUS.md. Two TODOs are "
                "open: division by zero in `divide()` (which also has no test) and a "
                "`--precision` flag for the CLI."
            )
        ]
    )
    return (first, second, third)


def demo_answers(*, speed: float = 1.0, fault: str | None = None) -> list[ScriptedAnswer]:
    """The script as scripted-model answers; *speed* > 1 streams faster.

    At speed 1 the three answers stream in about 3.5 s: text at ~4 characters per
    25 ms, tool input JSON at 24 characters per 25 ms. With ``fault="reset"`` the
    first answer's connection is reset after its first tool call (whose tool has
    started): the loop discards that attempt and streams the call again.
    """
    from ..testing import Faults, ScriptedAnswer, Timing, encode_event

    if fault not in (None, "reset"):
        raise ValueError(f"unknown fault {fault!r} (known: reset)")
    if not speed > 0:
        raise ValueError(f"speed must be positive, not {speed!r}")
    timing = Timing(
        first_event_delay=0.3 / speed,
        token_delay=0.025 / speed,
        block_delay=0.05 / speed,
        text_chunk_size=4,
        json_chunk_size=24,
    )
    answers = [
        ScriptedAnswer(blocks=turn.blocks, model=DEMO_MODEL, timing=timing)
        for turn in demo_script()
    ]
    if fault == "reset":
        first = answers[0]
        events = first.events()
        stops = [i for i, e in enumerate(events) if e["type"] == "content_block_stop"]
        cut = len(b"".join(encode_event(e) for e in events[: stops[1] + 1]))
        broken = ScriptedAnswer(
            blocks=first.blocks,
            model=DEMO_MODEL,
            timing=timing,
            faults=Faults(disconnect_after_byte=cut),
        )
        answers.insert(0, broken)
    return answers


def expected_facts() -> Mapping[str, object]:
    """What the script claims, for tests: line counts and the tests run."""
    return {
        "code_lines": sum(_line_count(n) for n in _CODE_GLOB),
        "test_lines": _line_count("tests/test_ops.py"),
        "tests_run": _TESTS_RUN,
        "todos": _todos(),
    }
