"""``run --markdown PATH``: RESULTS.md from a run.

Everything but the analysis is generated: how the run was made (command, machine,
commit), the table, the notes, the verdict on each target, skipped contestants. The
hand-written analysis (profiles, what limits a missed target) lives between
:data:`BEGIN` and :data:`END`; writing over an existing file keeps that section as it
is, so a re-run refreshes the figures and nothing else.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._report import Series, markdown_table
from ._targets import targets_markdown

BEGIN = "<!-- analysis:begin (hand-written; `run --markdown` keeps this section) -->"
END = "<!-- analysis:end -->"

_NO_ANALYSIS = """## Analysis

(Not written yet: profile the missed targets and say here what limits them.)"""

_METHOD = """\
**Reading the ratio column**: `X/this = r` is median(X) / median(this row), paired per
repeat. For times, r < 1 means X (trio_agent) is faster than this contestant.

**Contestants.**
- **trio_agent**: `trio_agent.query(...)` with its streaming executor (default
  `max_tool_concurrency=10`, Claude Code's cap). The timeline (SVG) comes from the
  turn's events (`BlockFinished`, `ToolResult`) fed to `TurnRecorder`, tool start/end
  from `trio_agent._cli._timeline.instrument`.
- **ideal**: `trio_agent.testing.reference_schedule`, the pure reference model of the
  executor's scheduling, with zero overhead, on a `ToolScenario` built from the paired
  trio_agent run: each call arrives when its `BlockFinished` event did and lasts its
  sleep (real-work tools: as long as they ran in that run); the ideal turn is
  max(end of the first stream, end of the last tool) plus the run's later model calls
  as long as they took. It respects the same `max_concurrency` as the run it is paired
  with.
- **"50 safe tools"** is reported twice for trio_agent: with the default cap of 10 (5
  waves of 10) and with `max_tool_concurrency=50`, since every peer there runs all 50
  at once; each has its own ideal row.
- **after-stream sequential / parallel** use trio_agent's own client, so only the
  scheduling differs: wait for the whole message, then run the tools one by one, or
  each run of consecutive safe calls at once (no cap; a non-safe call alone).
- **SDK tool runner**: `client.beta.messages.tool_runner(..., stream=True)`, with and
  without `run_tools_eagerly=True`. **pydantic-ai**: `Agent.run` (non-streaming
  request; the server answers after the time the stream would take). Peers run on
  asyncio, their runtime.
- **scale**: N `trio_agent.Session`s at once, each submitting one prompt (two model
  calls, two 50 ms reads in between), in a fresh child process (peak RSS is its
  `VmHWM`); compared with the after-stream parallel loop on the same client.
- **durable**: the scale turn at scale 0 (no model delay, no tool time: only the
  engine's cost) through `trio_agent.durable` (a worker and a `DurableClient` in one
  fresh child process, on a fresh SQLite file, and on Postgres when
  `TRIO_AGENT_BENCH_POSTGRES_URL` is set) against plain `Session`s in another:
  M turns one after the other (wall and CPU per turn), then N sessions at once.
- The server is trio_agent.testing's loopback h11 server in **its own process**, so it
  competes with no contestant for the GIL."""


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def source_state() -> str:
    """``<branch> @ <commit>`` (plus ``, uncommitted changes``), or ``unknown``."""
    commit = _git("rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown"
    branch = _git("rev-parse", "--abbrev-ref", "HEAD")
    dirty = ", uncommitted changes" if _git("status", "--porcelain", "--untracked-files=no") else ""
    return f"`{branch}` @ `{commit}`{dirty}"


def _analysis(path: Path) -> str:
    if not path.exists():
        return _NO_ANALYSIS
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    if start == -1 or end < start:
        return _NO_ANALYSIS
    return text[start + len(BEGIN) : end].strip("\n") or _NO_ANALYSIS


def render(series: Sequence[Series], meta: dict[str, Any], analysis: str) -> str:
    m = meta["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    notes = [f"- {s.benchmark} / {s.contestant}: {s.note}" for s in series if s.note]
    notes += [f"- {s.benchmark} / {s.contestant}: FAILED {e}" for s in series for e in s.errors]
    skipped = [f"- {s.benchmark} / {s.contestant}: {s.skipped}" for s in series if s.skipped]
    parts = [
        "# Benchmark results",
        "",
        "<!-- Generated by `python -m benchmarks run ... --markdown benchmarks/RESULTS.md`;"
        " a re-run rewrites everything except the analysis section at the end. -->",
        "",
        "## How this was produced",
        "",
        "```",
        (
            f"{meta['command']}   # {meta['total_seconds']:.0f} s"
            if "\n" not in meta["command"]
            else f"{meta['command']}\n# the run took {meta['total_seconds']:.0f} s"
        ),
        "```",
        "",
        f"Run {meta.get('date', 'at an unknown date')} on {m['nproc']} CPUs "
        f'(`os.cpu_count()`), CPU "{m["cpu"]}", {m["platform"]}, Python {m["python"]}; '
        f"{versions}. Source: {meta.get('source', 'unknown')}. "
        f"{meta['repeat']} repeat(s) per contestant"
        + (", quick mode (scaled-down scenarios)" if meta["quick"] else "")
        + (f"; **{meta['failures']} benchmark(s) or sample(s) failed**" if meta["failures"] else "")
        + ".",
        "",
        _METHOD,
        "",
        "## Results",
        "",
        markdown_table(series),
        "",
        *(["Notes:", "", *notes, ""] if notes else []),
        "Timeline of every scenario (trio_agent run; bars: queued / executing / cancelled;"
        " marks: block finished, result delivered, ideal end): `benchmarks/timeline.svg`"
        " when run with `--svg benchmarks/timeline.svg`.",
        "",
        "## Versus the targets (issues 5 and 13)",
        "",
        targets_markdown(series),
        "",
        "## Skipped contestants",
        "",
        *(skipped or ["None: every contestant installed and ran."]),
        "",
        BEGIN,
        analysis,
        END,
        "",
    ]
    return "\n".join(parts)


def write_markdown(path: str, series: Sequence[Series], meta: dict[str, Any]) -> None:
    """Write RESULTS.md to *path*, keeping the analysis section already there."""
    target = Path(path)
    text = render(series, meta, _analysis(target))
    target.write_text(text, encoding="utf-8")


def from_json(json_path: str, path: str) -> None:
    """Rewrite RESULTS.md at *path* from a run's ``--json`` file (no re-run)."""
    data = json.loads(Path(json_path).read_text(encoding="utf-8"))
    fields = ("benchmark", "contestant", "metric", "unit", "samples", "subject", "skipped", "note")
    series = [
        Series(**{k: item[k] for k in fields}, errors=item.get("errors", []))
        for item in data["series"]
    ]
    write_markdown(path, series, data["meta"])
