"""Benchmarks for trio_agent, run as ``python -m benchmarks``.

Every figure is a ratio against a contestant measured in the same process and run, on
the same input; absolute times are reported too, never asserted. See ``RESULTS.md``.
"""
