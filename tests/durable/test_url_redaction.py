"""A database URL's password never shows in an error, parsable URL or not."""

from __future__ import annotations

import pathlib

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from trio_agent._cli import main
from trio_agent.durable import DurableError
from trio_agent.durable._store import engine_url, redact_url

HERE = pathlib.Path(__file__).resolve().parent

NAMES = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=12)
# "PW" marks the password: no other part of a URL or message here holds capitals.
PASSWORDS = st.builds(lambda tail: "PW" + tail, st.text(max_size=40))
SCHEMES = st.sampled_from(["postgresql://", "postgres://", "sqlite://", "postgresql+psycopg://"])


@st.composite
def unparsable_urls(draw: st.DrawFn) -> tuple[str, str]:
    """(url, password): URLs SQLAlchemy refuses, each with a ``user:password@`` part."""
    user, password, host = draw(NAMES), draw(PASSWORDS), draw(NAMES)
    shape = draw(st.sampled_from(["bad port", "no scheme", "one slash", "space"]))
    if shape == "bad port":
        return f"{draw(SCHEMES)}{user}:{password}@{host}:port{draw(NAMES)}/db", password
    if shape == "no scheme":
        return f"{user}:{password}@{host}/db", password
    if shape == "one slash":
        return f"postgresql:/{user}:{password}@{host}/db", password
    return f"post gres://{user}:{password}@{host}/db", password


@given(unparsable_urls())
def test_an_unparsable_url_is_echoed_without_its_password(case: tuple[str, str]) -> None:
    url, password = case
    assert password not in redact_url(url)
    assert "***" in redact_url(url)
    with pytest.raises(DurableError, match="not a database URL") as info:
        engine_url(url)
    assert password not in str(info.value)
    assert info.value.__cause__ is None  # the parser's own message may quote the URL
    assert info.value.__suppress_context__


@given(SCHEMES, NAMES, st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1), NAMES)
def test_redaction_agrees_with_sqlalchemy_on_plain_urls(
    scheme: str, user: str, password: str, host: str
) -> None:
    url = f"{scheme}{user}:{password}@{host}:5432/db"
    assert redact_url(url) == sa.make_url(url).render_as_string(hide_password=True)


@given(st.text().filter(lambda t: "@" not in t))
def test_text_without_userinfo_is_left_alone(text: str) -> None:
    assert redact_url(text) == text


@pytest.mark.parametrize("value", [None, 5, b"sqlite://"])
def test_a_database_url_is_a_string(value: object) -> None:
    with pytest.raises(DurableError, match="is a string"):
        engine_url(value)  # type: ignore[arg-type]


def test_worker_with_a_malformed_url_hides_its_password(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    url = "postgresql://alice:Sup3rSecret@db.example:fivefourthreetwo/agents"
    code = main(["worker", "--app", "durable_app:agent", "--database-url", url])
    err = capsys.readouterr().err
    assert code == 1
    assert "not a database URL" in err
    assert "alice:***@db.example" in err
    assert "Sup3rSecret" not in err
