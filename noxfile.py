"""Developer sessions: `nox -s tests lint typecheck demo bench`."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.default_venv_backend = "venv"


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, with branch coverage."""
    session.install("-e", ".[test]")
    session.run("pytest", "--cov=trio_agent", "--cov-report=term-missing", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, with the ASYNC rules; the layers' import contracts (import-linter)."""
    session.install("-e", ".", "ruff", "import-linter")
    session.run("ruff", "check", "trio_agent", "tests", "benchmarks")
    session.run("ruff", "format", "--check", "trio_agent", "tests", "benchmarks")
    session.run("lint-imports", "--no-cache")


@nox.session
def typecheck(session: nox.Session) -> None:
    """pyright in strict mode."""
    session.install("-e", ".[dev]")
    session.run("pyright", "trio_agent")


@nox.session
def demo(session: nox.Session) -> None:
    """The embedded demo: scripted model, no key, no network."""
    session.install("-e", ".[cli]")
    session.run("trio-agent", "demo", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmark CLI (`--quick` for a smoke run)."""
    session.install("-e", ".[bench]")
    session.run("python", "-m", "benchmarks", "run", *session.posargs)
