"""Helpers of the model-data tests: a fresh "once per process" memory per test."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent import _models


@pytest.fixture(autouse=True)
def fresh_model_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    # check_model warns and logs once per model per process: each test starts anew.
    monkeypatch.setattr(_models, "_checked", set[str]())


@pytest.fixture
def anthropic_prices() -> Any:
    """claude-sonnet-5-5's published prices (USD per million tokens), read from
    Anthropic's pricing as genai-prices 0.2.3 records it."""
    return {"input": 2.0, "output": 10.0, "write_5m": 2.5, "write_1h": 4.0, "read": 0.1}
