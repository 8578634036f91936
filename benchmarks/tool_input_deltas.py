"""ToolInputDelta's coalescing, measured: ``python -m benchmarks.tool_input_deltas``.

Feeds one tool call's input JSON (a file of 10 KB to 1 MB, in 16-byte
``input_json_delta`` pieces, as the API streams them) to the loop's
``PartialInputs`` and reports the partial parses made, the bytes they parsed
(relative to the input) and the CPU time; beside it, a parse on every delta (what
the official SDK does), skipped past 100 KB because it is quadratic.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from trio_agent._loop._tool_input import GROWTH, MIN_STEP, PartialInputs
from trio_agent._model import StreamEvent


def _events(text: str, chunk: int) -> Iterator[StreamEvent]:
    block = {"type": "tool_use", "id": "t", "name": "Write", "input": {}}
    yield StreamEvent(
        "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    )
    for i in range(0, len(text), chunk):
        delta = {"type": "input_json_delta", "partial_json": text[i : i + chunk]}
        yield StreamEvent(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )


def main() -> None:
    policies = {
        f"coalesced ({MIN_STEP} B, +{GROWTH:.0%})": (MIN_STEP, GROWTH),
        "every delta": (0, 0.0),
    }
    for size in (10_000, 100_000, 1_000_000):
        text = json.dumps({"path": "f.py", "content": "print('hello world')\n" * (size // 21)})
        events = list(_events(text, 16))
        for label, (step, growth) in policies.items():
            if growth == 0.0 and size > 100_000:
                print(f"{len(text):>9} B  {label:22} skipped (quadratic)")
                continue
            inputs = PartialInputs(step, growth)
            start = time.process_time()
            for event in events:
                inputs.feed(event)
            cpu = time.process_time() - start
            print(
                f"{len(text):>9} B  {label:22} {len(events) - 1:>6} deltas"
                f" {inputs.parses:>6} parses"
                f" {inputs.parsed_bytes / len(text):8.2f}x bytes parsed"
                f" {cpu * 1000:8.1f} ms CPU"
            )


if __name__ == "__main__":
    main()
