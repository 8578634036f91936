"""No import cycle among the modules of ``trio_agent/`` nor among those of ``benchmarks/``.

Next to the import-linter contracts (``test_import_contracts.py``), on the same graph:
grimp's, the one import-linter builds. Two modules are in a cycle when each reaches
the other through imports; the test computes the strongly connected components of
the graph and fails naming every component with more than one module, as one cycle
through it with the import line of each step.

What counts as an import (the rule, decided here once):

- Every import statement of a module's source counts, wherever it is. A
  function-local import only delays a cycle to the first call, it does not remove it.
  An import under ``if TYPE_CHECKING:`` counts too: the interpreter never runs it, but
  two modules that each need the other to be read (or type-checked) still form one
  unit; the shared type belongs in a lower module, not behind a guard that hides the
  loop from this test.
- A package's ``__init__`` is a module like any other. Its imports of its own
  submodules (the face re-exporting them) are edges from the package to them, and
  ``from . import x`` / ``from pkg import x`` with ``x`` a submodule is an edge to
  that submodule (grimp resolves it so), not to the package.
- A submodule importing a name from a package it is inside (``from .. import
  Session``, ``from . import helper`` where ``helper`` is a re-export) is an edge to
  that package's ``__init__``, and a cycle when that ``__init__`` imports the
  submodule back, directly or not. That is a real cycle, not a false positive: while
  the face runs, the submodule reads a half-built module, and whether the name is
  there yet depends on the order of the face's own imports (which the import sorter
  is free to change). Import the name from the module that defines it instead.
- What is *not* an edge: the packages Python initialises before any submodule
  (importing ``trio_agent.testing._answers`` first runs ``trio_agent/__init__`` and
  ``trio_agent/testing/__init__``). That implicit parent import is no dependency of
  the module's (grimp records only the module a statement names, and nothing is added
  here), and counting it is the usual false positive: it would put every package
  whose ``__init__`` imports one of its submodules in a cycle with that submodule.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The packages whose modules must import one way only.
PACKAGES = ("trio_agent", "benchmarks")


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """The components of more than one module, each sorted, in a stable order
    (Tarjan's algorithm, iterative: the graph's depth is no concern)."""
    imports = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(imports):
        if root in order:
            continue
        work = [(root, 0)]
        while work:
            module, i = work.pop()
            if i == 0:
                order[module] = low[module] = len(order)
                stack.append(module)
                on_stack.add(module)
            targets = imports[module]
            if i < len(targets):
                work.append((module, i + 1))
                target = targets[i]
                if target not in order:
                    work.append((target, 0))
                elif target in on_stack:
                    low[module] = min(low[module], order[target])
                continue
            if work:  # *module* is done: its caller takes its low link
                caller = work[-1][0]
                low[caller] = min(low[caller], low[module])
            if low[module] == order[module]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def describe(graph: grimp.ImportGraph, component: list[str]) -> str:
    """One shortest cycle through *component*, each step with its import line, then
    the component's other imports (each must go, or turn round, to break it)."""
    first = component[0]
    # The shortest way out to another member and back closes a cycle through *first*.
    best: list[str] | None = None
    for other in component[1:]:
        there = graph.find_shortest_chain(importer=first, imported=other)
        back = graph.find_shortest_chain(importer=other, imported=first)
        if there and back:
            cycle = [*there, *back[1:]]
            if best is None or len(cycle) < len(best):
                best = cycle
    assert best is not None, component  # a component's members reach each other
    steps = list(itertools.pairwise(best))
    members = set(component)
    others = [
        (importer, imported)
        for importer in component
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members)
        if (importer, imported) not in steps
    ]
    lines = [f"{len(component)} modules: {', '.join(component)}", "  the cycle:"]
    lines += [_step(graph, *step) for step in steps]
    if others:
        lines.append("  and inside the same component:")
        lines += [_step(graph, *step) for step in others]
    return "\n".join(lines)


def _step(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    details = graph.get_import_details(importer=importer, imported=imported)
    where = ", ".join(f"line {d['line_number']}: {d['line_contents'].strip()}" for d in details[:2])
    return f"    {importer} -> {imported}  ({where or 'an import grimp saw'})"


def find_cycles(package: str) -> list[str]:
    """Every import cycle among the modules of *package*, described."""
    graph = grimp.build_graph(package, include_external_packages=False, cache_dir=None)
    return [describe(graph, c) for c in strongly_connected(graph)]


@pytest.fixture
def importable_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))


@pytest.mark.usefixtures("importable_root")
@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package: str) -> None:
    cycles = find_cycles(package)
    assert not cycles, f"import cycles in {package}/:\n" + "\n".join(cycles)


# -- the finder itself, on a package made for it -------------------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path / "cyclestoy"
    for name in [m for m in sys.modules if m == "cyclestoy" or m.startswith("cyclestoy.")]:
        del sys.modules[name]


def test_the_finder_sees_every_kind_of_cycle(toy: Path) -> None:
    _write(
        toy,
        {
            # (the face binds VERSION first: it works today, until its imports move)
            "__init__.py": "VERSION = 1\nfrom ._face import F\n",
            # a cycle through a function-local import
            "_a.py": "def f():\n    from ._b import B\n    return B\n",
            "_b.py": "from ._a import f\nB = 1\n",
            # a cycle through a TYPE_CHECKING import
            "_c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from ._d import D\nC = 1\n",
            "_d.py": "from ._c import C\nD = C\n",
            # a submodule reading its own package's face, which imports it back
            "_face.py": "from . import VERSION\nF = VERSION\n",
            # three modules, through `from . import x`
            "_x.py": "from . import _y\n",
            "_y.py": "from . import _z\n",
            "_z.py": "from . import _x\n",
        },
    )
    cycles = find_cycles("cyclestoy")
    assert len(cycles) == 4, "\n".join(cycles)
    joined = "\n".join(cycles)
    assert "cyclestoy._a, cyclestoy._b" in joined
    assert "cyclestoy._c, cyclestoy._d" in joined
    assert "cyclestoy, cyclestoy._face" in joined
    assert "cyclestoy._x, cyclestoy._y, cyclestoy._z" in joined
    assert "cyclestoy._a -> cyclestoy._b  (line 2: from ._b import B)" in joined
    assert "cyclestoy._face -> cyclestoy  (line 1: from . import VERSION)" in joined


def test_a_package_initialised_first_is_no_cycle(toy: Path) -> None:
    _write(
        toy,
        {
            # The face imports its submodules; they import each other (one way) by
            # their full names and from the top package's face, which does not import
            # them: no cycle, though Python runs both `__init__`s before any of them.
            "__init__.py": "X = 1\n",
            "sub/__init__.py": "from .one import ONE\nfrom .two import TWO\n",
            "sub/one.py": "import cyclestoy.sub.two\nfrom cyclestoy import X\nONE = X\n",
            "sub/two.py": "from .. import X\nTWO = X\n",
        },
    )
    assert find_cycles("cyclestoy") == []
