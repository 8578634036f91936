"""What ``run`` and ``chat`` print is written in batches (issue 32): pieces written
together go out in one write, at most one write per ``FLUSH_INTERVAL``, none waits
longer than that, nothing is lost or reordered (in virtual time). The benchmark
``cli_cpu`` measures what it saves."""

from __future__ import annotations

import io
import itertools

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent._cli._ask import FLUSH_INTERVAL, HeldOutput
from trio_agent.testing import run_virtual

PIECES = st.lists(
    st.tuples(
        st.lists(st.characters(codec="utf-8"), max_size=8).map("".join),
        st.sampled_from([0.0, 0.0, 0.0, 0.001, 0.01, 0.05]),
    ),
    max_size=60,
)


class Target(io.StringIO):
    """A text stream that notes the time of each write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        self.writes.append((trio.current_time(), text))
        return super().write(text)


@settings(max_examples=80, deadline=None)
@given(PIECES)
def test_written_pieces_go_out_in_batches_in_time_and_in_order(
    pieces: list[tuple[str, float]],
) -> None:
    async def main() -> tuple[Target, list[float]]:
        target = Target()
        out = HeldOutput(target)
        written_at: list[float] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(out.flusher)
            for text, pause in pieces:
                await trio.sleep(pause)
                out.write(text)
                written_at.append(trio.current_time())
                out.flush_soon()
            await trio.sleep(FLUSH_INTERVAL * 2)
            nursery.cancel_scope.cancel()
        return target, written_at

    target, written_at = run_virtual(main)
    assert target.getvalue() == "".join(text for text, _ in pieces)
    # each piece was out within FLUSH_INTERVAL of being written
    sent = 0
    for (text, _), at in zip(pieces, written_at, strict=True):
        sent += len(text)
        if not text:
            continue
        done = next(t for t, total in accumulate(target.writes) if total >= sent)
        assert done - at <= FLUSH_INTERVAL + 1e-9
    # at most one write per interval (and the first at once)
    times = [t for t, text in target.writes if text]
    assert all(b - a >= FLUSH_INTERVAL - 1e-9 for a, b in itertools.pairwise(times))


def accumulate(writes: list[tuple[float, str]]) -> list[tuple[float, int]]:
    total = 0
    out: list[tuple[float, int]] = []
    for t, text in writes:
        total += len(text)
        out.append((t, total))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.characters(codec="utf-8") | st.characters(categories=["Cs"])).map("".join),
    st.integers(0, 10**6),
    st.floats(0, 1e7, allow_nan=False, allow_infinity=False),
)
def test_a_text_delta_line_is_what_json_dumps_writes(text: str, index: int, t: float) -> None:
    """``--json``'s direct formatting of a text delta (the line most of a turn is)
    is exactly the general path's ``json.dumps`` of its record."""
    import json

    from trio_agent import TextDelta
    from trio_agent._cli._render import event_line, event_record

    delta = TextDelta(text, index)
    line = event_line(delta, t)
    assert line == json.dumps(event_record(delta, t)) + "\n"
    record = json.loads(line)  # (a lone surrogate pair comes back joined: json's way)
    assert (record["type"], record["t"], record["index"]) == ("TextDelta", round(t, 3), index)
