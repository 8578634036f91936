"""What a benchmark measures (:class:`Series`) and how it is shown: table, JSON, SVG."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

import attrs


@attrs.define
class Series:
    """The samples of one contestant on one benchmark and metric.

    Attributes:
        benchmark: the benchmark's name.
        contestant: who was measured (``trio_agent``, ``sdk accumulate_event``...).
        metric: what was measured (``turn wall time``, ``us/tool``...).
        unit: the unit of the samples.
        samples: one value per repeat (or per event, for latency distributions).
        subject: the contestant this row is compared with: the ratio column is
            ``median(subject) / median(this row)``, paired per repeat when both have
            as many samples. ``None``: no ratio (the subject's own row, or a fact).
        skipped: why this contestant was not measured, or ``None``.
        note: a short remark shown after the table.
        errors: why each failed sample failed (a hang past the sample timeout, an
            exception); a failed sample adds no value to ``samples``.
    """

    benchmark: str
    contestant: str
    metric: str
    unit: str
    samples: list[float] = attrs.field(factory=list[float])
    subject: str | None = None
    skipped: str | None = None
    note: str = ""
    errors: list[str] = attrs.field(factory=list[str])

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")


@attrs.define
class Span:
    """One bar of the timeline: a row label, what kind of interval, start and end (s)."""

    row: str
    kind: str
    start: float
    end: float


@attrs.define
class Timeline:
    """A run drawn in the SVG: the model stream on top, one row per tool."""

    title: str
    spans: list[Span] = attrs.field(factory=list[Span])
    marks: list[tuple[str, str, float]] = attrs.field(factory=list[tuple[str, str, float]])

    def span(self, row: str, kind: str, start: float, end: float) -> None:
        self.spans.append(Span(row, kind, start, max(start, end)))

    def mark(self, row: str, kind: str, at: float) -> None:
        self.marks.append((row, kind, at))


def ratio(series: Series, by_name: dict[tuple[str, str, str], Series]) -> float | None:
    """``subject / series`` on the same benchmark and metric (paired medians)."""
    if series.subject is None or series.skipped or not series.samples:
        return None
    subject = by_name.get((series.benchmark, series.metric, series.subject))
    if subject is None or subject.skipped or not subject.samples:
        return None
    if len(subject.samples) == len(series.samples):
        pairs = [a / b for a, b in zip(subject.samples, series.samples, strict=True) if b > 0]
        if pairs:
            return statistics.median(pairs)
        return None
    return subject.median / series.median if series.median > 0 else None


def _fmt(value: float) -> str:
    if value != value:  # nan
        return "-"
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.3f}"
    return f"{value:.4g}"


def index(series: Sequence[Series]) -> dict[tuple[str, str, str], Series]:
    return {(s.benchmark, s.metric, s.contestant): s for s in series}


def table_rows(series: Sequence[Series]) -> list[list[str]]:
    by_name = index(series)
    rows: list[list[str]] = []
    for s in series:
        r = ratio(s, by_name)
        if s.skipped:
            rows.append(
                [s.benchmark, s.metric, s.contestant, "skipped: " + s.skipped, "", "", "", ""]
            )
            continue
        ratio_text = "" if r is None else f"{s.subject}/this = {r:.3f}"
        rows.append(
            [
                s.benchmark,
                s.metric,
                s.contestant,
                _fmt(s.median),
                _fmt(min(s.samples)) if s.samples else "-",
                _fmt(max(s.samples)) if s.samples else "-",
                s.unit,
                ratio_text,
            ]
        )
    return rows


HEADER = ["benchmark", "metric", "contestant", "median", "min", "max", "unit", "ratio"]


def text_table(series: Sequence[Series]) -> str:
    rows = [HEADER, *table_rows(series)]
    widths = [max(len(row[i]) for row in rows if len(row) > i) for i in range(len(HEADER))]
    lines: list[str] = []
    for n, row in enumerate(rows):
        if row[3].startswith("skipped"):
            head = "  ".join(row[i].ljust(widths[i]) for i in range(3))
            lines.append(f"{head}  {row[3]}")
        else:
            lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    notes = [f"* {s.benchmark} / {s.contestant}: {s.note}" for s in series if s.note]
    notes += [f"* {s.benchmark} / {s.contestant}: FAILED {e}" for s in series for e in s.errors]
    return "\n".join(lines + (["", *notes] if notes else []))


def markdown_table(series: Sequence[Series]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in table_rows(series):
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
    return "\n".join(lines)


def to_json(series: Sequence[Series], meta: dict[str, Any]) -> str:
    by_name = index(series)
    data = {
        "meta": meta,
        "series": [
            {
                **attrs.asdict(s),
                "median": None if not s.samples else s.median,
                "min": None if not s.samples else min(s.samples),
                "max": None if not s.samples else max(s.samples),
                "ratio": ratio(s, by_name),
            }
            for s in series
        ],
    }
    return json.dumps(data, indent=2)


_COLORS = {
    "stream": "#9ecae1",
    "block": "#3182bd",
    "queued": "#fdd0a2",
    "executing": "#31a354",
    "cancelled": "#de2d26",
    "ideal": "#756bb1",
    "delivered": "#000000",
}


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_svg(timelines: Sequence[Timeline]) -> str:
    """Hand-written SVG: one panel per timeline, the stream row on top, one row per tool.

    Bars: ``queued`` (block finished streaming until the tool starts), ``executing``;
    marks: ``block`` (the tool_use block finished streaming), ``delivered`` (its result
    reached the consumer), ``ideal`` (the ideal schedule's end of the tool).
    """
    row_h, label_w, plot_w, pad = 18, 150, 760, 10
    parts: list[str] = []
    y = pad
    for tl in timelines:
        rows: list[str] = []
        for sp in tl.spans:
            if sp.row not in rows:
                rows.append(sp.row)
        for row, _, _ in tl.marks:
            if row not in rows:
                rows.append(row)
        end = max([sp.end for sp in tl.spans] + [at for _, _, at in tl.marks] + [1e-3])
        scale = plot_w / end
        parts.append(
            f'<text x="{pad}" y="{y + 12}" font-size="13" font-weight="bold">{_esc(tl.title)}'
            f" (0 .. {end:.3f} s)</text>"
        )
        y += row_h + 2
        for i, row in enumerate(rows):
            ry = y + i * row_h
            fill = "#f7f7f7" if i % 2 else "#ffffff"
            parts.append(
                f'<rect x="{pad}" y="{ry}" width="{label_w + plot_w}" height="{row_h}" fill="{fill}"/>'
            )
            parts.append(f'<text x="{pad + 2}" y="{ry + 13}" font-size="11">{_esc(row)}</text>')
            for sp in (s for s in tl.spans if s.row == row):
                x = label_w + pad + sp.start * scale
                w = max(1.0, (sp.end - sp.start) * scale)
                color = _COLORS.get(sp.kind, "#999999")
                parts.append(
                    f'<rect x="{x:.1f}" y="{ry + 3}" width="{w:.1f}" height="{row_h - 6}"'
                    f' fill="{color}"><title>{_esc(sp.kind)} {sp.start:.4f}-{sp.end:.4f} s</title></rect>'
                )
            for mrow, kind, at in tl.marks:
                if mrow != row:
                    continue
                x = label_w + pad + at * scale
                color = _COLORS.get(kind, "#999999")
                parts.append(
                    f'<line x1="{x:.1f}" y1="{ry + 1}" x2="{x:.1f}" y2="{ry + row_h - 1}"'
                    f' stroke="{color}" stroke-width="2"><title>{_esc(kind)} {at:.4f} s</title></line>'
                )
        y += len(rows) * row_h + 2 * pad
    legend_y = y
    lx = pad
    for kind, color in _COLORS.items():
        parts.append(f'<rect x="{lx}" y="{legend_y}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{lx + 16}" y="{legend_y + 11}" font-size="11">{kind}</text>')
        lx += 100
    height = legend_y + 30
    width = label_w + plot_w + 2 * pad
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' font-family="sans-serif">\n' + "\n".join(parts) + "\n</svg>\n"
    )
