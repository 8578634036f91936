"""The pytest plugin of trio_agent (entry point ``pytest11``): two fixtures and ``--record``.

- ``scripted_model``: a fresh :class:`~trio_agent.testing.ScriptedModel` (append its
  answers); the test fails at teardown if a response body was left open.
- ``cassette``: a :class:`CassetteFixture` for this test, its file at
  ``<test dir>/cassettes/<module>/<test>.json``. Without ``--record`` it replays the
  file and fails at teardown if a request differed or the recording was not used
  up; with ``pytest --record`` the test talks to the real API through
  :func:`~trio_agent.testing.record` and the file is written anew.
- ``cassette_clock``: take it too, and a replay runs in Trio's virtual time (a
  ``MockClock``) while a recording runs in real time.

Example::

    @pytest.mark.cassette(tools="replay")
    async def test_fix_bug(cassette, cassette_clock):
        async with cassette.client(lambda: AnthropicClient()) as client:
            session = Session(client, cassette.tools(my_tools), model="claude-sonnet-5-5")
            async with session.submit("fix the bug") as events:
                async for _ in events:
                    pass
        assert "fixed" in session.messages[-1].text

The marker's keywords: ``tools="run"`` (default: the tools really run) or
``"replay"`` (they answer with the recorded outputs), and ``path=`` (another file).
The scripted model and the cassettes are imported when a fixture is first used.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncGenerator, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import pytest

if TYPE_CHECKING:
    import trio.testing

    from .. import Tool
    from ._cassette import ToolMode
    from ._scripted import ScriptedModel

__all__ = ["CassetteFixture"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trio_agent")
    group.addoption(
        "--record",
        action="store_true",
        default=False,
        help="trio_agent: run the tests that use the `cassette` fixture against the real"
        " model API and write their cassettes anew",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        'cassette(tools="run", path=None): the `cassette` fixture\'s settings'
        ' (tools="replay": the tools answer with their recorded outputs)',
    )


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "call":
        item.stash[_CALL_FAILED] = bool(report.failed)
    return report


@final
class CassetteFixture:
    """One test's cassette: recorded with ``--record``, else replayed.

    Attributes:
        path: the cassette file.
        recording: whether this run records (``--record``).
        tool_mode: ``"run"`` or ``"replay"`` (the ``cassette`` marker's ``tools``).
        model: the replaying model, once :meth:`client` was entered (None when
            recording).
    """

    def __init__(self, path: Path, *, recording: bool, tool_mode: ToolMode) -> None:
        from ._cassette import Recorder

        self.path = path
        self.recording = recording
        self.tool_mode: ToolMode = tool_mode
        self.model: ScriptedModel | None = None
        self._recorder = Recorder()

    def __repr__(self) -> str:
        mode = "recording" if self.recording else "replaying"
        return f"<CassetteFixture {mode} {str(self.path)!r}>"

    @contextlib.asynccontextmanager
    async def client(self, real: Any) -> AsyncGenerator[Any]:
        """The model client for the test: *real* (an AnthropicClient or OpenAIClient,
        or a function making one) recorded with ``--record``, else a client of the
        same kind talking to the replaying model in process.

        Raises:
            FileNotFoundError: replaying and the cassette does not exist yet.
        """
        import httpx

        from ._cassette import clone_client, recording
        from ._scripted import ScriptedModel

        client = real() if callable(real) else real
        if self.recording:
            async with recording(client, self.path, recorder=self._recorder) as (clone, _):
                yield clone
            return
        if not self.path.exists():
            raise FileNotFoundError(
                f"no cassette at {str(self.path)!r}: record it with `pytest --record`"
            )
        self.model = ScriptedModel.from_cassette(self.path, tools=self.tool_mode)
        async with httpx.AsyncClient(transport=self.model.transport()) as http:
            yield clone_client(client, http)

    def tools(self, tools: Sequence[Tool]) -> list[Tool]:
        """The tools for the test: recording, *tools* timed (each call's run time goes
        into the cassette); replaying, *tools*, or with ``tools="replay"`` tools
        answering each call with its recorded output, taking as long as it did."""
        if self.recording:
            return self._recorder.timed(tools)
        if self.model is None:
            if self.tool_mode == "replay":
                raise RuntimeError("enter cassette.client(...) before asking for its tools")
            return list(tools)
        return self.model.tools(tools)

    def check(self) -> None:
        """Fail unless the replay matched the recording and used all of it."""
        model = self.model
        if self.recording or model is None:
            return
        if model.mismatches:
            raise model.mismatches[0]
        if model.remaining:
            pytest.fail(
                f"the test made {len(model.requests)} requests; {self.path} recorded"
                f" {len(model.requests) + len(model.remaining)} (re-record with --record)"
            )


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _default_path(request: pytest.FixtureRequest) -> Path:
    node = request.node
    name = _UNSAFE.sub("_", node.name).strip("_") or "test"
    return Path(node.path).parent / "cassettes" / Path(node.path).stem / f"{name}.json"


@pytest.fixture
def scripted_model() -> Generator[ScriptedModel]:
    """A fresh :class:`~trio_agent.testing.ScriptedModel` with an empty script; the
    test fails if it left a response body open."""
    from ._scripted import ScriptedModel

    model = ScriptedModel()
    yield model
    if model.open_streams:
        pytest.fail(f"{model.open_streams} scripted response bodies were left open")


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> Generator[CassetteFixture]:
    """This test's cassette (see :class:`CassetteFixture` and ``--record``)."""
    marker = request.node.get_closest_marker("cassette")
    settings: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    tool_mode = settings.pop("tools", "run")
    if tool_mode not in ("run", "replay"):
        raise pytest.UsageError(f"cassette(tools=...) is 'run' or 'replay', not {tool_mode!r}")
    path = settings.pop("path", None)
    if settings:
        raise pytest.UsageError(f"unknown cassette() settings: {sorted(settings)}")
    if path is None:
        resolved = _default_path(request)
    else:
        resolved = Path(path)
        if not resolved.is_absolute():
            resolved = Path(request.node.path).parent / resolved
    fixture = CassetteFixture(
        resolved, recording=bool(request.config.getoption("--record")), tool_mode=tool_mode
    )
    yield fixture
    if not request.node.stash.get(_CALL_FAILED, False):  # a failed test says it already
        fixture.check()


@pytest.fixture
def cassette_clock(request: pytest.FixtureRequest) -> trio.testing.MockClock | None:
    """A ``MockClock`` (autojump) when replaying, so a cassette replays in virtual time;
    None with ``--record``, so the real API is met in real time (pytest-trio runs a
    test under any clock fixture it takes)."""
    if request.config.getoption("--record"):
        return None
    import trio.testing

    return trio.testing.MockClock(autojump_threshold=0)
