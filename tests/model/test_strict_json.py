"""strict_loads decodes with jiter and falls back to json: the result is json's.

Differential, over generated JSON texts and their mutations (any text near JSON),
against the json module with NaN / Infinity refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import StreamLimitError
from trio_agent._model import _accumulate_block as block
from trio_agent._model._accumulate_block import strict_loads


def _reject(name: str) -> Any:
    raise ValueError(name)


def reference(text: str) -> tuple[str, Any]:
    try:
        return ("value", json.loads(text, parse_constant=_reject))
    except RecursionError:
        return ("limit", None)
    except ValueError:
        return ("error", None)


def ours(text: str) -> tuple[str, Any]:
    try:
        return ("value", strict_loads(text, "data"))
    except StreamLimitError:
        return ("limit", None)
    except ValueError:
        return ("error", None)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def near_json(draw: st.DrawFn) -> str:
    text = json.dumps(draw(json_values), ensure_ascii=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(
            st.sampled_from(
                [
                    ",",
                    "]",
                    "}",
                    "[",
                    "{",
                    '"',
                    "\\",
                    "\\ud800",
                    "NaN",
                    "Infinity",
                    "-",
                    "0",
                    "1e999",
                    " ",
                    "\t",
                    "\x00",
                    "é",
                    "\udc00",
                    "1" * 5000,
                    "[" * 300,
                    "tru",
                ]
            )
        )
        if kind == "insert":
            text = text[:at] + piece + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + 1 :]
        else:
            text = text[:at] + piece + text[at + len(piece) :]
    return text


def same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    # repr tells -0.0 from 0.0 and 1 from 1.0 (== does not)
    return a[0] == b[0] and repr(a[1]) == repr(b[1])


@settings(max_examples=600, deadline=None)
@given(text=near_json())
def test_the_same_as_json_on_text_near_json(text: str) -> None:
    assert same(ours(text), reference(text)), text[:200]


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=40))
def test_the_same_as_json_on_any_text(text: str) -> None:
    assert same(ours(text), reference(text))


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',  # a lone surrogate escape: jiter refuses, json accepts
        "[" * 300 + "]" * 300,  # deeper than jiter's limit, within json's
        "[" * 100_000 + "]" * 100_000,  # deeper than json's: StreamLimitError
        "1" * 5000,  # past Python's int-string conversion limit: an error
        "NaN",
        '{"a": -Infinity}',
        '{"a": 1, "a": 2}',
    ],
)
def test_edge_cases_are_jsons(text: str) -> None:
    assert same(ours(text), reference(text))


def test_jiter_decodes_and_json_only_decides_what_it_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    real = block.jiter.from_json

    class Counting:
        @staticmethod
        def from_json(data: bytes, **kwargs: Any) -> Any:
            calls.append("jiter")
            return real(data, **kwargs)

    def fallback(data: str) -> Any:
        calls.append("json")
        return json.loads(data)

    monkeypatch.setattr(block, "jiter", Counting)
    monkeypatch.setattr(block._JSON, "decode", fallback)  # pyright: ignore[reportPrivateUsage]
    assert strict_loads('{"type": "ping"}', "data") == {"type": "ping"}
    assert calls == ["jiter"]
    assert strict_loads('"\\ud800"', "data") == "\ud800"
    assert calls == ["jiter", "jiter", "json"]
