"""Imported first by the package: a core-only install says what to install."""

from .._util import require_extra

require_extra("trio_agent.durable", "durable", "dbos")
