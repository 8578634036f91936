"""The stall detector: gaps without content events, counted and timed.

The idle watchdog is not here: on a network response it is httpcore's per-read timeout
(``idle_timeout`` passed as the request's read timeout), otherwise a cancel scope
around the reads of one ``receive()`` (see ``_Attempt.next_items`` in
``_http_stream.py``); either way time spent by the consumer never counts.
"""

from __future__ import annotations

__all__ = ["StallMeter"]


class StallMeter:
    """Counts gaps longer than *threshold* seconds between content events.

    Pure bookkeeping: call :meth:`activity` with the time of each non-ping event.
    """

    def __init__(self, threshold: float, start: float) -> None:
        self.threshold = threshold
        self.last = start
        self.stalls = 0
        self.stall_time = 0.0

    def activity(self, now: float) -> None:
        gap = now - self.last
        if gap > self.threshold:
            self.stalls += 1
            self.stall_time += gap
        self.last = now
