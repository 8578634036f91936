"""SSEParser tells the data field from the other fields that begin with a ``d`` (it
looks at a line's first character before slicing it): only ``data``, with or without
a colon, carries data; ``dat``, ``datum``, ``d`` and ``Data`` are unknown fields,
ignored, as httpx-sse's own decoder ignores them."""

from __future__ import annotations

import pytest
from httpx_sse._decoders import SSEDecoder

from trio_agent._model._sse import SSEParser


def httpx_sse(lines: list[str]) -> list[str]:
    """What httpx-sse's event decoder dispatches for *lines* (empty data dropped)."""
    decoder = SSEDecoder()
    out: list[str] = []
    for line in lines:
        event = decoder.decode(line)
        if event is not None and event.data:
            out.append(event.data)
    return out


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["data: x", ""], ["x"]),
        (["data:x", ""], ["x"]),
        (["data:  x", ""], [" x"]),
        (["data: a", "data", "data: b", ""], ["a\n\nb"]),
        (["data:", "data: y", ""], ["\ny"]),
        (["dat: x", ""], []),
        (["datum: x", ""], []),
        (["d", ""], []),
        (["d: x", ""], []),
        (["Data: x", ""], []),
        (["data : x", ""], []),
        (["dat: x", "data: kept", "datax: y", ""], ["kept"]),
    ],
)
@pytest.mark.parametrize("split", [False, True])
def test_only_the_data_field_carries_data(
    lines: list[str], expected: list[str], split: bool
) -> None:
    raw = "".join(line + "\n" for line in lines).encode()
    parser = SSEParser(1 << 20)
    # After a first chunk (a comment), whole lines each ended by LF take the parser's
    # fast path; a chunk cut inside a line takes the incremental decoders: both agree.
    chunks = [b": hi\n", raw[:3], raw[3:]] if split else [b": hi\n", raw]
    out = [event for chunk in chunks for event in parser.feed(chunk)]
    out += parser.flush()
    assert out == expected == httpx_sse(lines)
