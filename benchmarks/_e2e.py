"""End-to-end turns: the scripted model on a real loopback server, real time."""

from __future__ import annotations

from ._cli import Benchmark

BENCHMARKS: list[Benchmark] = []
