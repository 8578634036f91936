"""The viewer's pages as HTML, every piece of session text escaped.

A transcript is untrusted input: every string that came from one goes through
:func:`esc` (``html.escape``, quotes included) before it reaches the page, in text
and in attributes alike, and the SVG timelines are built the same way. The pages load
no script but the viewer's own (``/static/viewer.js``), and the server's
Content-Security-Policy forbids any other, inline ones included.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import Any, Final, cast

from .._util import finite
from ._sources import Item, SessionView

__all__ = ["esc", "list_page", "session_page", "timeline_svg"]

#: Characters and lines of a block shown before its "show all" fold.
CUT: Final = 2000
CUT_LINES: Final = 12


def esc(value: object) -> str:
    """*value* as text that HTML shows as it is (never as markup)."""
    return html.escape(str(value), quote=True)


def _page(title: str, body: str, *, live: str = "") -> str:
    data = f' data-live="{esc(live)}"' if live else ""
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title>"
        '<link rel="stylesheet" href="/static/viewer.css">'
        '<script src="/static/viewer.js" defer></script>'
        f"</head><body{data}>"
        '<header><a class="home" href="/">trio-agent view</a></header>'
        f"<main>{body}</main></body></html>\n"
    )


def _cost(cost: float | None) -> str:
    return "—" if cost is None else f"${cost:.4f}"


def _when(seconds: float) -> str:
    if not seconds:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def list_page(views: Sequence[SessionView], version: str) -> str:
    """The session list, newest first."""
    rows: list[str] = []
    for v in sorted(views, key=lambda v: v.updated, reverse=True):
        try:
            rows.append(_row(v))
        except Exception as exc:  # a session that defeats its row: that row only
            rows.append(
                f'<tr class="session" data-id="{esc(v.id)}"><td class="updated">—</td>'
                f'<td class="title"><a href="/s/{esc(v.id)}">{esc(v.where)}</a></td>'
                f'<td class="kind">error</td><td colspan="5" class="end">cannot show this'
                f" session: {esc(type(exc).__name__)}</td></tr>"
            )
    table = (
        '<table class="sessions"><thead><tr><th>updated</th><th>session</th><th>source</th>'
        "<th>model</th><th>turns</th><th>tokens</th><th>cost</th><th>end</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        if rows
        else '<p class="empty">No sessions found.</p>'
    )
    return _page("trio-agent sessions", f"<h1>Sessions</h1>{table}", live=f"/api/list?v={version}")


def _row(v: SessionView) -> str:
    return (
        f'<tr class="session" data-id="{esc(v.id)}">'
        f'<td class="updated">{esc(_when(v.updated))}</td>'
        f'<td class="title"><a href="/s/{esc(v.id)}">{esc(v.title or "(no prompt)")}</a>'
        f'<div class="where">{esc(v.where)}</div></td>'
        f'<td class="kind">{esc(v.kind)}</td>'
        f'<td class="model">{esc(v.model or "—")}</td>'
        f'<td class="turns num">{v.turns}</td>'
        f'<td class="tokens num">{v.input_tokens:,} in / {v.output_tokens:,} out</td>'
        f'<td class="cost num">{esc(_cost(v.cost))}</td>'
        f'<td class="end">{esc(v.end or "—")}</td></tr>'
    )


def _cut(text: str, cls: str) -> str:
    """*text* in a ``<pre>``, cut at :data:`CUT` characters or :data:`CUT_LINES` lines
    with a "show all" fold holding the whole."""
    lines = text.splitlines(keepends=True)
    if len(text) <= CUT and len(lines) <= CUT_LINES:
        return f'<pre class="{cls}">{esc(text)}</pre>'
    head = "".join(lines[:CUT_LINES])[:CUT]
    return (
        f'<pre class="{cls} cut">{esc(head)}…</pre>'
        f'<details class="all"><summary>show all ({len(lines):,} lines,'
        f" {len(text):,} characters)</summary>"
        f'<pre class="{cls}">{esc(text)}</pre></details>'
    )


def _block(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return f'<div class="block text">{_cut(str(block["text"]), "text")}</div>'
    if kind == "thinking":
        return (
            '<details class="block thinking"><summary>thinking</summary>'
            f"{_cut(str(block['text']), 'thinking')}</details>"
        )
    if kind == "tool_use":
        result = block.get("result")
        if result is None:
            outcome = '<div class="result pending">no result (yet)</div>'
        else:
            state = "error" if result.get("is_error") else "ok"
            outcome = (
                f'<div class="result {state}"><span class="label">'
                f"{'error' if state == 'error' else 'result'}</span>"
                f"{_cut(str(result.get('content', '')), 'output')}</div>"
            )
        return (
            f'<div class="block tool" data-tool-id="{esc(block.get("id", ""))}">'
            f'<div class="call"><span class="name">{esc(block.get("name", ""))}</span>'
            f'<span class="id">{esc(block.get("id", ""))}</span></div>'
            f"{_cut(str(block.get('input', '')), 'input')}{_subagent(block.get('subagent'))}"
            f"{outcome}</div>"
        )
    return f'<div class="block other">{_cut(str(block.get("text", "")), "other")}</div>'


def _subagent(run: Any) -> str:
    """A subagent's turn, nested under its call: its conversation (its own subagents
    under their calls)."""
    if not isinstance(run, dict):
        return ""
    run = cast("dict[str, Any]", run)
    turns = run.get("turns")
    calls = f", {esc(turns)} model calls" if isinstance(turns, int) else ""
    items = "".join(_item(i) for i in run.get("items", []) if isinstance(i, Item))
    return (
        f'<details class="subagent" open><summary>subagent <span class="agent">'
        f"{esc(run.get('agent', ''))}</span>: {esc(run.get('reason', ''))}{calls}</summary>"
        f'<div class="nested">{items}</div></details>'
    )


def _usage(usage: dict[str, Any] | None) -> str:
    if not usage:
        return ""
    shown = ", ".join(
        f"{esc(k.replace('_', ' '))} {esc(v)}"
        for k, v in usage.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    )
    return f'<div class="usage">{shown}</div>'


_STATE_CLASS: Final = {"done": "done", "error": "error", "cancelled": "cancelled"}


def _dicts(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON array (anything else in it, or a non-array: left out)."""
    if not isinstance(value, list):
        return []
    return [cast("dict[str, Any]", v) for v in cast("list[Any]", value) if isinstance(v, dict)]


def timeline_svg(call: dict[str, Any]) -> str:
    """One model call's timeline (``TurnRecorder.summary()``'s shape) as SVG: the
    stream with a mark where each block finished, and a row per tool run."""

    number = finite  # a time that is not a finite float is left out (the page notes it)

    start = number(call.get("started_at")) or 0.0
    stream_end = number(call.get("stream_ended_at"))
    blocks = _dicts(call.get("blocks"))
    tools = _dicts(call.get("tools"))
    ends = [stream_end or start]
    for t in tools:
        for key in ("started_at", "ended_at"):
            value = number(t.get(key))
            if value is not None:
                ends.append(value)
    for b in blocks:
        value = number(b.get("t"))
        if value is not None:
            ends.append(value)
    span = max(max(ends) - start, 1e-3)
    label_w, bar_w, row_h = 230, 480, 22
    width = label_w + bar_w + 70

    def x(t: float) -> float:
        return label_w + (t - start) / span * bar_w

    rows: list[str] = []
    y = 4
    end = stream_end if stream_end is not None else start + span
    marks = "".join(
        f'<line class="mark" x1="{x(number(b.get("t")) or start):.1f}" x2="{x(number(b.get("t")) or start):.1f}"'
        f' y1="{y}" y2="{y + row_h - 6}"><title>{esc(b.get("block", ""))}</title></line>'
        for b in blocks
    )
    rows.append(
        f'<g class="tl-row" data-kind="stream"><text x="4" y="{y + 13}">model call'
        f" {esc(call.get('index', ''))} stream</text>"
        f'<rect class="bar stream" x="{x(start):.1f}" y="{y}" width="{max(x(end) - x(start), 1):.1f}"'
        f' height="{row_h - 6}"><title>stream {end - start:.3f} s</title></rect>{marks}</g>'
    )
    y += row_h
    for t in tools:
        began = number(t.get("started_at"))
        ended = number(t.get("ended_at"))
        state = str(t.get("state", ""))
        cls = _STATE_CLASS.get(state, "other")
        label = str(t.get("call", t.get("tool_use_id", "")))
        shown = label if len(label) <= 34 else label[:33] + "…"
        bar = ""
        if began is not None:
            stop = ended if ended is not None else began
            bar = (
                f'<rect class="bar tool {cls}" x="{x(began):.1f}" y="{y}"'
                f' width="{max(x(stop) - x(began), 1):.1f}" height="{row_h - 6}">'
                f"<title>{esc(label)}: {esc(state)} {stop - began:.3f} s</title></rect>"
            )
        elif ended is not None:
            bar = (
                f'<circle class="dot {cls}" cx="{x(ended):.1f}" cy="{y + 8}" r="4">'
                f"<title>{esc(label)}: {esc(state)} (never started)</title></circle>"
            )
        rows.append(
            f'<g class="tl-row" data-kind="tool" data-state="{esc(state)}">'
            f'<text x="4" y="{y + 13}">{esc(shown)}</text>{bar}'
            f'<text class="state" x="{label_w + bar_w + 6}" y="{y + 13}">{esc(state)}</text></g>'
        )
        y += row_h
    axis = (
        f'<g class="axis"><line x1="{label_w}" x2="{label_w + bar_w}" y1="{y + 2}" y2="{y + 2}"/>'
        f'<text x="{label_w}" y="{y + 16}">0 s</text>'
        f'<text x="{label_w + bar_w}" y="{y + 16}" text-anchor="end">{span:.3f} s</text></g>'
    )
    saved = number(call.get("saved"))
    caption = f'<div class="saved">overlap saved {saved:.3f} s</div>' if saved is not None else ""
    return (
        f'<figure class="timeline"><svg xmlns="http://www.w3.org/2000/svg" width="{width}"'
        f' height="{y + 22}" viewBox="0 0 {width} {y + 22}" role="img">'
        f"{''.join(rows)}{axis}</svg>{caption}</figure>"
    )


def _item(item: Item) -> str:
    if item.kind == "user":
        return f'<section class="item user"><h3>user</h3>{_cut(item.text, "text")}</section>'
    if item.kind == "assistant":
        blocks = "".join(_block(b) for b in item.blocks)
        timeline = timeline_svg(item.timeline) if item.timeline else ""
        model = f'<span class="model">{esc(item.model)}</span>' if item.model else ""
        stop = f'<span class="stop">{esc(item.text)}</span>' if item.text else ""
        return (
            f'<section class="item assistant"><h3>assistant {model}{stop}</h3>'
            f"{timeline}{blocks}{_usage(item.usage)}</section>"
        )
    if item.kind == "end":
        return f'<div class="item end">{esc(item.text)}</div>'
    timeline = timeline_svg(item.timeline) if item.timeline else ""
    return f'<div class="item note {esc(item.level)}">{esc(item.text)}{timeline}</div>'


def session_page(view: SessionView) -> str:
    """One session: its facts, then its conversation."""
    facts = (
        '<dl class="facts">'
        f"<dt>source</dt><dd>{esc(view.kind)}: {esc(view.where)}</dd>"
        f'<dt>model</dt><dd class="model">{esc(view.model or "—")}</dd>'
        f'<dt>turns</dt><dd class="turns">{view.turns}</dd>'
        f'<dt>tokens</dt><dd class="tokens">{view.input_tokens:,} in / {view.output_tokens:,} out</dd>'
        f'<dt>cost</dt><dd class="cost">{esc(_cost(view.cost))}</dd>'
        f'<dt>end</dt><dd class="end">{esc(view.end or "—")}</dd>'
        f"<dt>updated</dt><dd>{esc(_when(view.updated))}</dd></dl>"
    )
    items = "".join(_item(i) for i in view.items)
    return _page(
        view.title or "session",
        f"<h1>{esc(view.title or '(no prompt)')}</h1>{facts}"
        f'<div class="conversation">{items}</div>',
        live=f"/api/session/{view.id}?v={view.version}",
    )
