"""What every benchmark is given (:class:`Config`) and what one is (:class:`Benchmark`).

The bottom of the package with :mod:`._report`: each benchmark module reads these,
the registry (:mod:`._registry`) lists the benchmarks, the CLI runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs

from ._report import Series, Timeline


@attrs.define
class Config:
    """What every benchmark is given, and what the run shares between benchmarks.

    Attributes:
        quick: smaller N, fewer repeats, scenarios scaled down in time.
        repeat: repeats per contestant (the samples of each row).
        timelines: runs to draw in the SVG; benchmarks append to it.
        closers: what to run when the run ends, however it ends (the CLI runs them,
            newest first): stopping the server process, removing the corpus.
        server: the base URL of the benchmark server process, once started
            (:func:`~benchmarks._resources.server_url`).
        corpus: the directory of files the scenario tools read, once made
            (:func:`~benchmarks._resources.corpus`).
    """

    quick: bool
    repeat: int
    timelines: list[Timeline] = attrs.field(factory=list[Timeline])
    closers: list[Callable[[], object]] = attrs.field(factory=list[Callable[[], object]])
    server: str | None = None
    corpus: Path | None = None


@attrs.frozen
class Benchmark:
    """One entry of the registry.

    Attributes:
        name: what ``python -m benchmarks run NAME`` and the rows' ``benchmark`` say.
        description: the line ``python -m benchmarks list`` prints.
        run: measures, and returns the rows.
    """

    name: str
    description: str
    run: Callable[[Config], list[Series]]
