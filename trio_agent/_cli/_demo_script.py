"""The script of ``trio-agent demo``: a small project and a scripted agent task on it.

The scripted model plays an agent asked for a status report on a tiny Python
project. Its four answers use the real built-in tools on real files:

1. reads the README, the TODO list and the code, greps for TODO comments and
   globs the Python files: concurrency-safe tools, each starting as soon as its
   block has streamed, while the rest of the answer is still streaming;
2. starts the test suite with Bash, then writes ``STATUS.md``. The suite is
   genuinely slow (it runs the CLI end to end in fresh interpreters and checks
   that its REPL leaves after 2 s idle), and the report is a long tool input:
   the tests run while the report streams, the point of the library;
3. adds the test result to the report with Edit;
4. the final summary.

Nothing is faked: the tools really run, for as long as they take. The tool inputs
and the model's claims are computed from the files this module creates, so what
the model says matches what the tools return.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from .._messages import ContentBlock, TextBlock, ToolUseBlock
from ..testing import Faults, ScriptedAnswer, ScriptedModel, Timing, encode_event

__all__ = [
    "DEMO_MODEL",
    "DEMO_PROMPT",
    "DemoTurn",
    "demo_answers",
    "demo_model",
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
\"\"\"python -m minicalc.cli A OP B, or --repl [--idle-timeout SECONDS]\"\"\"

import select
import sys

from . import ops

OPS = {"+": ops.add, "-": ops.sub, "*": ops.mul, "/": ops.divide}


def calc(a: str, op: str, b: str) -> float:
    return OPS[op](float(a), float(b))


def repl(idle_timeout: float) -> None:
    # One "A OP B" per line; leave after idle_timeout seconds without input.
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], idle_timeout)
        if not ready:
            print(f"idle for {idle_timeout:g} s, bye", flush=True)
            return
        line = sys.stdin.readline()
        if not line:
            return
        print(calc(*line.split()), flush=True)


def main(argv: list[str]) -> None:
    # TODO: add a --precision flag
    if argv[:1] == ["--repl"]:
        repl(float(argv[2]) if argv[1:2] == ["--idle-timeout"] else 60.0)
    else:
        print(calc(*argv))


if __name__ == "__main__":
    main(sys.argv[1:])
""",
    "tests/test_ops.py": """\
import subprocess
import sys
import time
import unittest

from minicalc import ops

CLI = [sys.executable, "-m", "minicalc.cli"]


def cli(*args):
    run = subprocess.run([*CLI, *args], capture_output=True, text=True, check=True)
    return run.stdout.strip()


class OpsTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(ops.add(2, 3), 5)

    def test_sub(self):
        self.assertEqual(ops.sub(2, 3), -1)

    def test_mul(self):
        self.assertEqual(ops.mul(2, 3), 6)


class CliTest(unittest.TestCase):
    # End to end, each case in a fresh interpreter: the slow part of the suite.

    def test_cli_add(self):
        for a, b in [("1", "2"), ("0.5", "0.25"), ("-1", "1")]:
            self.assertEqual(cli(a, "+", b), str(float(a) + float(b)))

    def test_cli_mul(self):
        for a, b in [("6", "7"), ("0.5", "4"), ("-1", "3")]:
            self.assertEqual(cli(a, "*", b), str(float(a) * float(b)))

    def test_repl_leaves_when_idle(self):
        args = [*CLI, "--repl", "--idle-timeout", "2"]
        with subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        ) as repl:
            repl.stdin.write("6 * 7\\n")
            repl.stdin.flush()
            self.assertEqual(repl.stdout.readline().strip(), "42.0")
            start = time.monotonic()
            self.assertEqual(repl.stdout.readline().strip(), "idle for 2 s, bye")
            self.assertGreaterEqual(time.monotonic() - start, 1.9)
            self.assertEqual(repl.wait(timeout=30), 0)
""",
}

_TESTS_RUN: Final = 6
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


_TESTS_PENDING: Final = "_Running while this report is written; the result follows._"
_TESTS_PASSED: Final = f"All {_TESTS_RUN} pass; `divide()` has none."


def _status_report() -> str:
    todos = "\n".join(f"- `{name}:{n}`: {line.lstrip('# ')}" for name, n, line in _todos())
    code_lines = sum(_line_count(n) for n in _CODE_GLOB)
    return f"""\
# minicalc: status

## What it is
A tiny calculator package. `minicalc.ops` has the four operations (add, sub, mul,
divide) on floats; `minicalc.cli` is a command line, `python -m minicalc.cli 2 + 3`,
with a `--repl` mode that reads one `A OP B` per line and leaves after an idle
timeout.

## Open TODOs
{todos}

Both match the open items of TODO.md; "tests for add and sub" is done.

## Size
{len(_CODE_GLOB)} modules in `minicalc/` ({code_lines} lines), one test module in `tests/`.

## Tests
{_TESTS_PENDING}

## Next steps
1. Make `divide()` raise `ZeroDivisionError` with a clear message, and test it.
2. Add `--precision` to the CLI, and a test for it.
3. Test `divide()` at all, and the CLI's `/` operator end to end.
"""


def demo_script() -> Sequence[DemoTurn]:
    """The scripted model's four answers (the workspace comes from
    :func:`make_demo_workspace`; paths are relative to its root)."""
    code_lines = sum(_line_count(n) for n in _CODE_GLOB)
    test_lines = _line_count("tests/test_ops.py")
    python = _python()
    first = DemoTurn(
        [
            TextBlock("I'll read the project's description, TODO list and code first."),
            ToolUseBlock("toolu_demo_01", "Read", {"file_path": "README.md"}),
            ToolUseBlock("toolu_demo_02", "Read", {"file_path": "TODO.md"}),
            ToolUseBlock("toolu_demo_03", "Grep", {"pattern": "TODO", "glob": "*.py"}),
            ToolUseBlock("toolu_demo_04", "Glob", {"pattern": "**/*.py"}),
            ToolUseBlock("toolu_demo_05", "Read", {"file_path": "minicalc/ops.py"}),
            ToolUseBlock("toolu_demo_06", "Read", {"file_path": "minicalc/cli.py"}),
        ]
    )
    second = DemoTurn(
        [
            TextBlock("The tests are slow; I'll start them and write the report meanwhile."),
            ToolUseBlock(
                "toolu_demo_07",
                "Bash",
                {
                    "command": f"{python} -m unittest discover -v -s tests 2>&1 "
                    "&& wc -l minicalc/*.py tests/*.py"
                },
            ),
            ToolUseBlock(
                "toolu_demo_08", "Write", {"file_path": "STATUS.md", "content": _status_report()}
            ),
        ]
    )
    third = DemoTurn(
        [
            TextBlock(f"The {_TESTS_RUN} tests pass. Adding that to the report."),
            ToolUseBlock(
                "toolu_demo_09",
                "Edit",
                {
                    "file_path": "STATUS.md",
                    "old_string": _TESTS_PENDING,
                    "new_string": _TESTS_PASSED,
                },
            ),
        ]
    )
    fourth = DemoTurn(
        [
            TextBlock(
                f"Done, the report is in STATUS.md: {code_lines} lines of code, "
                f"{test_lines} of tests, all {_TESTS_RUN} tests pass. Open: division by zero "
                "in `divide()` (untested) and a `--precision` flag."
            )
        ]
    )
    return (first, second, third, fourth)


def demo_answers(*, speed: float = 1.0, fault: str | None = None) -> list[ScriptedAnswer]:
    """The script as scripted-model answers; *speed* > 1 streams faster.

    At speed 1 the answers stream at about the pace of a real model: text and tool
    input JSON at 8 characters per 25 ms (~80 tokens/s), so the report (a long
    ``Write``) takes about 3 s to stream, while the tests run. With ``fault="reset"``
    the first answer's connection is reset after its first tool call (whose tool has
    started): the loop discards that attempt and streams the call again.
    """
    if fault not in (None, "reset"):
        raise ValueError(f"unknown fault {fault!r} (known: reset)")
    if not speed > 0:
        raise ValueError(f"speed must be positive, not {speed!r}")
    timing = Timing(
        first_event_delay=0.2 / speed,
        token_delay=0.025 / speed,
        block_delay=0.05 / speed,
        text_chunk_size=8,
        json_chunk_size=8,
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


def demo_model(*, speed: float = 1.0, fault: str | None = None) -> ScriptedModel:
    """The scripted model that plays the demo (:func:`demo_answers`)."""
    return ScriptedModel(demo_answers(speed=speed, fault=fault))


def expected_facts() -> Mapping[str, object]:
    """What the script claims, for tests: line counts and the tests run."""
    return {
        "code_lines": sum(_line_count(n) for n in _CODE_GLOB),
        "test_lines": _line_count("tests/test_ops.py"),
        "tests_run": _TESTS_RUN,
        "todos": _todos(),
    }
