"""The live view at 80 columns: fixed columns, Bash's latest output line while it runs."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from trio_agent import ToolProgress
from trio_agent._cli._live import LiveView
from trio_agent._cli._timeline import TurnRecorder

STATES = ("streaming", "queued", "executing", "done", "error", "cancelled")
# No lowercase letters: a state word found in a rendered row is the state column.
# Wide (CJK) characters, controls and ANSI escapes are in.
TEXT = st.lists(
    st.characters(categories=["Lu", "Nd", "Lo", "Po", "Zs", "Cc"])
    | st.sampled_from(["\x1b[31m", "[", "]", "[/]", "[bold]"]),
    max_size=60,
).map("".join)


def render(recorder: TurnRecorder, width: int = 80) -> list[str]:
    console = Console(width=width, file=io.StringIO(), force_terminal=False, color_system=None)
    console.print(LiveView(recorder).render())
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return out.splitlines()


def columns(header: str) -> dict[str, int]:
    """Where each column begins (in cells) in the table's header line."""
    return {name: cell_len(header[: header.index(name)]) for name in ("tool", "state", "time")}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(TEXT, st.sampled_from(STATES), TEXT, st.floats(0, 5000)),
        min_size=1,
        max_size=6,
    ),
    TEXT,
)
def test_columns_stay_put_at_80_columns(rows: list[tuple[str, str, str, float]], text: str) -> None:
    now = [0.0]
    recorder = TurnRecorder(lambda: now[0])
    recorder.text.append(text)
    layouts = []
    for i, (command, state, output, seconds) in enumerate(rows):
        recorder.tool_started(f"t{i}", "Bash", {"command": command})
        now[0] += seconds
        recorder.feed(ToolProgress(f"t{i}", output))
        recorder.tools[f"t{i}"].state = state  # type: ignore[assignment]
        lines = render(recorder)
        assert all(cell_len(line) <= 80 for line in lines), lines
        assert not any("\x1b" in line or "\t" in line for line in lines[-i - 1 :])
        header = next(line for line in lines if "latest output" in line)
        at = columns(header)
        layouts.append(at)
        body = lines[lines.index(header) + 2 :]
        assert len(body) == i + 1  # one line per row: nothing wraps
        for line, (_, row_state, _, _) in zip(body, rows, strict=False):
            assert cell_len(line[: line.index(row_state)]) == at["state"], line
    assert all(layout == layouts[0] for layout in layouts)  # the same as rows come


def test_bash_latest_output_line_is_visible_while_it_runs() -> None:
    now = [0.0]
    recorder = TurnRecorder(lambda: now[0])
    recorder.tool_started("b", "Bash", {"command": "python3 -m unittest discover -v -s tests"})
    lines_seen: list[str] = []
    for line in ("test_add (test_ops.OpsTest.test_add) ... ok", "test_cli_mul ... ok", "OK"):
        now[0] += 0.5
        recorder.feed(ToolProgress("b", line))
        row = next(r for r in render(recorder) if "Bash(" in r)
        assert "executing" in row
        lines_seen.append(row)
    assert "test_add (test_ops.OpsTest.…" in lines_seen[0]
    assert "test_cli_mul ... ok" in lines_seen[1]
    assert lines_seen[2].rstrip().endswith("OK")
    assert "1.50s" in lines_seen[2]


def test_wider_terminals_give_the_output_the_room() -> None:
    recorder = TurnRecorder(lambda: 0.0)
    recorder.tool_started("b", "Bash", {"command": "make"})
    long_line: Any = "x" * 70
    recorder.feed(ToolProgress("b", long_line))
    narrow = next(r for r in render(recorder, 80) if "Bash(" in r)
    wide = next(r for r in render(recorder, 140) if "Bash(" in r)
    assert long_line not in narrow
    assert long_line in wide
