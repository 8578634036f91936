"""Imported first by the package: a core-only install says what to install."""

try:
    import dbos as _dbos  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError(
        f"No module named {exc.name!r}: trio_agent.durable needs pip install 'trio-agent[durable]'",
        name=exc.name,
    ) from exc
