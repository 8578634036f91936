"""The end-to-end scenarios: what the scripted model says and what each tool call costs.

A scenario is pure data, rebuilt identically in the server process and in the
benchmark process. Every tool call carries its cost in its input (``ms``: a sleep;
``real``: reading or grepping real files), so every contestant's tools do the same work.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

# The four tools every contestant gets; the same definitions are sent to the model.
TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "Read": {
        "description": "Read a file.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "ms": {"type": "number"},
                "real": {"type": "boolean"},
            },
            "required": ["path"],
        },
    },
    "Grep": {
        "description": "Search files for a regular expression.",
        "input_schema": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "ms": {"type": "number"},
                "real": {"type": "boolean"},
            },
            "required": ["pattern"],
        },
    },
    "Write": {
        "description": "Write a file.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"},
                "ms": {"type": "number"},
                "real": {"type": "boolean"},
            },
            "required": ["path"],
        },
    },
    "Bash": {
        "description": "Run a shell command.",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "ms": {"type": "number"},
                "fail": {"type": "boolean"},
                "readonly": {"type": "boolean"},
            },
            "required": ["command"],
        },
    },
}


def is_safe(name: str, tool_input: Mapping[str, Any]) -> bool:
    """Read and Grep are concurrency-safe; Bash when read-only; Write never."""
    if name in ("Read", "Grep"):
        return True
    if name == "Bash":
        return bool(tool_input.get("readonly"))
    return False


@attrs.frozen
class Call:
    """One tool_use of a scenario."""

    name: str
    input: Mapping[str, Any]


@attrs.frozen
class Scenario:
    name: str
    description: str
    # Strings are text blocks, Calls are tool_use blocks, in stream order.
    blocks: tuple[str | Call, ...]
    token_delay: float = 0.02
    block_delay: float = 0.0
    json_chunk_size: int = 8
    text_chunk_size: int = 4
    real: bool = False
    # Also run trio_agent with max_tool_concurrency set to this (the peers have no cap).
    wide_concurrency: int | None = None


def _read(path: str, ms: float) -> Call:
    return Call("Read", {"path": path, "ms": ms})


def _bash(command: str, ms: float) -> Call:
    """A Bash call, read-only exactly when trio_agent's Bash tool would run it in parallel."""
    from trio_agent.tools._readonly import is_read_only

    return Call("Bash", {"command": command, "ms": ms, "readonly": is_read_only(command)})


_SENTENCE = "Let me look at the next file now. "  # 34 chars: 9 deltas of 4


def _scenarios() -> list[Scenario]:
    # Time is in ms in tool inputs; the stream speed is token_delay per delta.
    t = _SENTENCE
    return [
        Scenario(
            "seed1",
            "seed timeline [Read_1, Read_2, Bash_1, Read_3, Read_4]",
            (
                t,
                _read("a.py", 300),
                t,
                _read("b.py", 300),
                t,
                Call("Bash", {"command": "mkdir build", "ms": 200}),
                t,
                _read("c.py", 300),
                t,
                _read("d.py", 300),
            ),
        ),
        Scenario(
            "seed2",
            "seed timeline [Read, Read, Write, Read]",
            (
                t,
                _read("a.py", 400),
                _read("b.py", 400),
                t,
                Call("Write", {"path": "out.txt", "content": "hello", "ms": 150}),
                t,
                _read("c.py", 400),
            ),
        ),
        Scenario(
            "seed3",
            "seed timeline [Read(a), Read(b), Grep, Write(c)]",
            (
                t,
                _read("a.py", 250),
                t,
                _read("b.py", 250),
                t,
                Call("Grep", {"pattern": "def ", "ms": 350}),
                t,
                Call("Write", {"path": "c.py", "content": "x = 1", "ms": 100}),
            ),
        ),
        Scenario(
            "reads_greps_write",
            "5 reads + 2 greps + 1 write streamed over ~2 s",
            (
                t * 2,
                _read("a.py", 400),
                t,
                _read("b.py", 500),
                t * 2,
                Call("Grep", {"pattern": "import", "ms": 600}),
                t,
                _read("c.py", 300),
                t * 2,
                _read("d.py", 400),
                t,
                Call("Grep", {"pattern": "class ", "ms": 500}),
                t * 2,
                _read("e.py", 300),
                t,
                Call("Write", {"path": "summary.md", "content": "done", "ms": 200}),
            ),
        ),
        Scenario(
            "bash_cascade",
            "bash error cascade: a failing Bash cancels its running siblings",
            (
                t,
                Call("Bash", {"command": "sleep 1; ls", "ms": 900, "readonly": True}),
                Call("Bash", {"command": "false", "ms": 100, "fail": True, "readonly": True}),
                _read("a.py", 600),
                _read("b.py", 600),
                t,
            ),
        ),
        Scenario(
            "fanout_readonly_bash",
            "fan-out: Grep, Reads and two read-only Bash calls (classified by the Bash tool)",
            (
                t,
                Call("Grep", {"pattern": "import", "ms": 400}),
                _bash("ls -la src", 300),
                _read("a.py", 300),
                _bash("git status --short", 350),
                _read("b.py", 400),
                t,
            ),
        ),
        Scenario(
            "fifty_safe",
            "50 safe tools in one answer",
            tuple([t] + [_read(f"f{i:02}.py", 200) for i in range(50)]),
            token_delay=0.004,
            wide_concurrency=50,
        ),
        Scenario(
            "long_text",
            "long text with tools interleaved",
            (
                t * 12,
                _read("a.py", 300),
                t * 12,
                Call("Grep", {"pattern": "TODO", "ms": 300}),
                t * 12,
                _read("b.py", 300),
                t * 6,
            ),
            token_delay=0.01,
        ),
        Scenario(
            "real_files",
            "reads and greps of real files (durations from real work)",
            (
                t,
                Call("Read", {"path": "big_00.txt", "real": True}),
                t,
                Call("Grep", {"pattern": "needle[0-9]+", "real": True}),
                Call("Read", {"path": "big_01.txt", "real": True}),
                t,
                Call("Grep", {"pattern": "^line 1[0-9]{3} ", "real": True}),
                Call("Read", {"path": "big_02.txt", "real": True}),
                t,
            ),
            real=True,
        ),
    ]


SCENARIOS: dict[str, Scenario] = {s.name: s for s in _scenarios()}

# The scale benchmark: a two-iteration turn, two short safe tools then an answer.
SCALE = Scenario(
    "scale",
    "two reads then a final answer",
    (_read("a.py", 50), _read("b.py", 50)),
    token_delay=0.0,
)


def scaled_input(call: Call, scale: float) -> dict[str, Any]:
    data = dict(call.input)
    if "ms" in data:
        data["ms"] = round(data["ms"] * scale, 3)
    return data


def answers(scenario: Scenario, scale: float) -> list[Any]:
    """The scripted answers: the scenario's answer, then a short final text answer."""
    from trio_agent import TextBlock, ToolUseBlock
    from trio_agent.testing import ScriptedAnswer, Timing

    blocks: list[Any] = []
    n = 0
    for item in scenario.blocks:
        if isinstance(item, str):
            blocks.append(TextBlock(item))
        else:
            n += 1
            blocks.append(
                ToolUseBlock(f"toolu_{scenario.name}_{n:03}", item.name, scaled_input(item, scale))
            )
    timing = Timing(
        token_delay=scenario.token_delay * scale,
        block_delay=scenario.block_delay * scale,
        json_chunk_size=scenario.json_chunk_size,
        text_chunk_size=scenario.text_chunk_size,
    )
    final = ScriptedAnswer(blocks=[TextBlock("All done.")], timing=Timing(token_delay=0.0))
    return [ScriptedAnswer(blocks=blocks, timing=timing), final]


# --- the work the tools do ---------------------------------------------------------

CORPUS_ENV = "TRIO_AGENT_BENCH_CORPUS"


def make_corpus(root: Path, files: int = 24, lines: int = 20_000) -> Path:
    """Real files for the real-work tools: ``big_NN.txt``, ~1 MB each."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        path = root / f"big_{i:02}.txt"
        if path.exists():
            continue
        with path.open("w", encoding="utf-8") as f:
            for j in range(lines):
                extra = f" needle{j}" if j % 997 == 0 else ""
                f.write(
                    f"line {j} of file {i}: the quick brown fox jumps over the lazy dog{extra}\n"
                )
    return root


def real_work(name: str, tool_input: Mapping[str, Any], root: Path) -> str:
    """The synchronous real work of a tool (run in a worker thread by every contestant)."""
    if name == "Read":
        text = (root / str(tool_input["path"])).read_text(encoding="utf-8")
        return f"{len(text)} characters, {text.count(chr(10))} lines"
    if name == "Grep":
        pattern = re.compile(str(tool_input["pattern"]), re.MULTILINE)
        hits = 0
        for path in sorted(root.glob("big_*.txt")):
            hits += len(pattern.findall(path.read_text(encoding="utf-8")))
        return f"{hits} matches"
    if name == "Write":
        out = root / "scratch"
        out.mkdir(exist_ok=True)
        (out / os.path.basename(str(tool_input["path"]))).write_text(
            str(tool_input.get("content", "")), encoding="utf-8"
        )
        return "written"
    raise ValueError(f"no real work for {name}")


def result_text(name: str, tool_input: Mapping[str, Any]) -> tuple[str, bool]:
    """The result of a sleep tool once its sleep is over: (text, is_error)."""
    if tool_input.get("fail"):
        return f"{name} failed: exit status 1", True
    return f"{name} ok", False
