"""Cassettes: a conversation recorded from a real loopback server replays, in virtual
time, to the same history, events and timeline; a changed prompt fails naming the
field; tool outputs replay instead of running; secrets never reach the file."""

from __future__ import annotations

import contextlib
import copy
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_agent import (
    AnthropicClient,
    OpenAIClient,
    RetryPolicy,
    Session,
    TextBlock,
    ToolUseBlock,
    tool,
)
from trio_agent._cli._timeline import TurnRecorder, instrument
from trio_agent.testing import (
    Cassette,
    CassetteError,
    CassetteMismatch,
    DroppedConnection,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    clone_client,
    record,
    serve_scripted_model,
)

SECRET = "sk-ant-very-secret-key-123"
PROMPT = "what is the weather in Paris?"

#: Gaps of 0.2 s and more between the moments compared, so their order does not
#: depend on the recording machine's load.
SLOW = Timing(first_event_delay=0.05, block_delay=0.0, token_delay=0.1)


def _answers() -> list[ScriptedAnswer]:
    return [
        ScriptedAnswer(
            blocks=[
                ToolUseBlock("toolu_1", "weather", {"city": "Paris"}),
                TextBlock("Looking it up while I write this sentence, word by word."),
            ],
            stop_reason="tool_use",
            timing=SLOW,
        ),
        ScriptedAnswer(blocks=[TextBlock("It is sunny in Paris.")], timing=SLOW),
    ]


def _weather_tool(calls: list[str]) -> Any:
    @tool
    async def weather(city: str) -> str:
        "The weather in a city."
        calls.append(city)
        await trio.sleep(0.2)
        return f"sunny in {city}"

    return weather


async def _run(client: Any, tools: list[Any], prompt: str = PROMPT) -> tuple[Any, ...]:
    recorder = TurnRecorder(trio.current_time)
    events: list[Any] = []
    session = Session(client, instrument(tools, recorder), model="claude-test")
    async with session.submit(prompt) as stream:
        async for event in stream:
            recorder.feed(event)
            events.append(event)
    return session.messages, events, recorder


def _shape(recorder: TurnRecorder) -> list[list[str]]:
    """Each model call's moments in time order (labels only)."""
    return [[what for _, what in recorder.timeline(c)] for c in recorder.calls]


_TOOL_SIDE = frozenset({"ToolResult", "ToolFinished", "ToolProgress"})


def _by_side(events: list[Any]) -> tuple[list[str], list[str]]:
    names = [type(e).__name__ for e in events]
    return [n for n in names if n not in _TOOL_SIDE], [n for n in names if n in _TOOL_SIDE]


def _messages_of(events: list[Any]) -> list[Any]:
    return [e for e in events if hasattr(e, "to_api") and type(e).__name__.endswith("Message")]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One conversation recorded, in real time, from the scripted model on 127.0.0.1."""
    path = tmp_path_factory.mktemp("cassettes") / "weather.json"
    calls: list[str] = []

    async def main() -> tuple[Any, ...]:
        server_model = ScriptedModel(_answers())
        async with serve_scripted_model(server_model) as url:
            real = AnthropicClient(api_key=SECRET, base_url=url, retry=RetryPolicy.never())
            async with record(real, path) as client:
                assert client is not real
                result = await _run(client, [_weather_tool(calls)])
        assert len(server_model.requests) == 2  # the real server answered both
        return result

    history, events, recorder = trio.run(main)
    assert calls == ["Paris"]
    return {"path": path, "history": history, "events": events, "recorder": recorder}


def test_cassette_file_holds_requests_timed_chunks_and_tool_outputs(
    recorded: dict[str, Any],
) -> None:
    text = recorded["path"].read_text()
    assert SECRET not in text
    data = json.loads(text)
    assert data["version"] == 1
    assert data["protocol"] == "anthropic"
    first, second = data["interactions"]
    assert first["request"]["headers"]["x-api-key"] == "<redacted>"
    assert first["request"]["path"] == "/v1/messages"
    assert first["request"]["body"]["messages"][0]["content"] == PROMPT
    assert first["response"]["status"] == 200
    body = "".join(c[1] for c in first["response"]["chunks"])
    assert body.startswith("event: message_start")
    assert body.rstrip().endswith('"type":"message_stop"}') or "message_stop" in body
    # the body came over the network in timed chunks: about 1.5 s of tokens
    assert sum(c[0] for c in first["response"]["chunks"]) > 1.0
    assert data["tool_outputs"] == {"toolu_1": {"content": "sunny in Paris"}}
    assert second["request"]["body"]["messages"][-1]["content"][0]["type"] == "tool_result"


def _contains(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether *exc* is, holds (in a group) or was caused by a *kind* error."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        if isinstance(seen, BaseExceptionGroup) and seen.subgroup(kind) is not None:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _replay_client(model: ScriptedModel) -> AnthropicClient:
    return model.client(api_key="sk-other", base_url="http://scripted")


async def test_replay_gives_the_same_history_events_and_timeline(
    recorded: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    model = ScriptedModel.from_cassette(recorded["path"])
    calls: list[str] = []
    start = trio.current_time()
    history, events, recorder = await _run(_replay_client(model), [_weather_tool(calls)])
    assert calls == ["Paris"]  # tools="run": the tool really ran
    assert len(model.requests) == 2
    assert model.remaining == ()
    assert model.mismatches == []
    assert history == recorded["history"]
    # The same events: the stream's in the same order, the tools' in the same order
    # (how the two interleave is timing, which real time on a loaded machine blurs).
    assert _by_side(events) == _by_side(recorded["events"])
    assert _messages_of(events) == _messages_of(recorded["events"])
    assert _shape(recorder) == _shape(recorded["recorder"])
    assert recorder.summary()["calls"][0]["saved"] > 0
    # Virtual time: the first stream ends exactly when the recording says it did.
    cassette = Cassette.load(recorded["path"])
    first = cassette.interactions[0].response
    assert not isinstance(first, type(None))
    stream_end = recorder.calls[0].stream_ended_at
    assert stream_end is not None
    recorded_end = first.delay + sum(dt for dt, _ in first.chunks)  # pyright: ignore
    assert stream_end == pytest.approx(recorded_end, abs=1e-6)
    assert trio.current_time() - start >= recorded_end


async def test_replay_is_byte_for_byte(
    recorded: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    cassette = Cassette.load(recorded["path"])
    model = ScriptedModel.from_cassette(cassette)
    async with httpx.AsyncClient(transport=model.transport()) as http:
        request = cassette.interactions[0].request
        async with http.stream("POST", "http://scripted/v1/messages", json=request.body) as r:
            received = [chunk async for chunk in r.aiter_raw()]
    recorded_chunks = cassette.interactions[0].response.chunks  # pyright: ignore
    assert b"".join(received) == b"".join(d for _, d in recorded_chunks)


async def test_a_changed_prompt_fails_naming_the_field(
    recorded: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    model = ScriptedModel.from_cassette(recorded["path"])
    with pytest.raises(BaseException) as caught:
        await _run(_replay_client(model), [_weather_tool([])], prompt="what about Rome?")
    assert len(model.mismatches) == 1
    mismatch = model.mismatches[0]
    assert isinstance(mismatch, CassetteMismatch)
    assert mismatch.field == "body.messages[0].content"
    assert mismatch.recorded == PROMPT
    assert mismatch.received == "what about Rome?"
    assert "body.messages[0].content" in str(mismatch)
    assert (
        caught.group_contains(CassetteMismatch)
        if isinstance(caught.value, BaseExceptionGroup)
        else isinstance(caught.value, CassetteMismatch)
    )


async def test_tools_replay_answers_with_the_recorded_outputs(
    recorded: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    model = ScriptedModel.from_cassette(recorded["path"], tools="replay")

    @tool
    async def weather(city: str) -> str:
        "The weather in a city."
        raise AssertionError("a replayed tool must not run")

    history, _, _ = await _run(_replay_client(model), model.tools([weather]))
    assert history == recorded["history"]
    assert model.mismatches == []


async def test_a_request_past_the_cassette_is_a_mismatch(
    recorded: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    cassette = Cassette.load(recorded["path"])
    short = Cassette(cassette.protocol, cassette.interactions[:1], cassette.tool_outputs)
    model = ScriptedModel.from_cassette(short)
    with pytest.raises(BaseException) as caught:
        await _run(_replay_client(model), [_weather_tool([])])
    assert _contains(caught.value, CassetteMismatch)
    assert [m.field for m in model.mismatches] == ["request"]
    assert "has no recording" in str(model.mismatches[0])


async def test_a_transport_error_is_recorded_and_replayed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Recording through a transport that drops once: the retry's story replays."""
    upstream = ScriptedModel(
        [DroppedConnection(delay=0.5, error=httpx.ConnectError), *_answers()[1:]]
    )
    path = tmp_path / "retry.json"
    real = AnthropicClient(api_key=SECRET, base_url="http://upstream", retry=RetryPolicy())
    async with record(real, path, transport=upstream.transport()) as client:
        history, _, _ = await _run(client, [])
    data = json.loads(path.read_text())
    assert data["interactions"][0]["response"] == {"error": "ConnectError", "delay": 0.5}
    model = ScriptedModel.from_cassette(path)
    replay = clone_client(
        AnthropicClient(api_key="x", base_url="http://upstream", retry=RetryPolicy()),
        httpx.AsyncClient(transport=model.transport()),
    )
    replayed, _, _ = await _run(replay, [])
    assert replayed == history
    assert len(model.requests) == 2
    first, second = (r.time for r in model.requests)
    assert first is not None
    assert second is not None
    assert second - first >= 0.5  # the recorded drop came after 0.5 s, then the retry


@pytest.mark.parametrize(
    ("api", "protocol", "path"),
    [
        ("responses", "openai-responses", "/v1/responses"),
        ("chat", "openai-chat", "/v1/chat/completions"),
    ],
)
async def test_openai_cassettes_record_and_replay_tool_outputs(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, api: Any, protocol: Any, path: str
) -> None:
    upstream = ScriptedModel(_answers(), protocol=protocol)
    file = tmp_path / "openai.json"
    real = OpenAIClient(
        api_key=SECRET, base_url="http://upstream/v1", api=api, retry=RetryPolicy.never()
    )
    calls: list[str] = []
    async with record(real, file, transport=upstream.transport()) as client:
        history, _, _ = await _run(client, [_weather_tool(calls)])
    assert calls == ["Paris"]
    text = file.read_text()
    assert SECRET not in text
    data = json.loads(text)
    assert data["protocol"] == protocol
    assert data["tool_outputs"] == {"toolu_1": {"content": "sunny in Paris"}}
    model = ScriptedModel.from_cassette(file, tools="replay")

    @tool
    async def weather(city: str) -> str:
        "The weather in a city."
        raise AssertionError("a replayed tool must not run")

    replay = clone_client(real, httpx.AsyncClient(transport=model.transport()))
    replayed, _, _ = await _run(replay, model.tools([weather]))
    assert replayed == history
    assert model.mismatches == []
    assert [r.path for r in model.requests] == [path, path]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "is not JSON"),
        ('{"version": 2}', "not a version 1 cassette"),
        ('{"version": 1, "protocol": "x", "interactions": []}', "unknown protocol"),
        (
            '{"version": 1, "protocol": "anthropic", "interactions": [{"request": 1}]}',
            "expected an object",
        ),
        (
            '{"version": 1, "protocol": "anthropic", "interactions": [{"request": {"method":'
            ' "POST", "path": "/"}, "response": {"status": 200, "chunks": [[-1, "x"]]}}]}',
            "seconds >= 0",
        ),
    ],
)
def test_a_bad_cassette_is_a_typed_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CassetteError, match=message):
        ScriptedModel.from_cassette(path)


def test_record_refuses_another_client() -> None:
    with pytest.raises(TypeError, match="AnthropicClient or an OpenAIClient"):
        clone_client(object(), httpx.AsyncClient())


# -- properties -----------------------------------------------------------------------

_TEXT = st.lists(st.characters(), max_size=8).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=25,
)


def _at(value: Any, path: str) -> Any:
    """The value at a first_difference path ('body.a[0]["b c"]'); _MISSING_AT when absent."""
    rest = path[len("body") :]
    token = re.compile(r'\.([A-Za-z0-9_-]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')
    while rest:
        match = token.match(rest)
        assert match is not None, rest
        rest = rest[match.end() :]
        name, index, quoted = match.groups()
        if index is not None:
            if not isinstance(value, list) or int(index) >= len(value):
                return _MISSING_AT
            value = value[int(index)]
        else:
            key = name if name is not None else json.loads(quoted)
            if not isinstance(value, dict) or key not in value:
                return _MISSING_AT
            value = value[key]
    return value


_MISSING_AT = object()


@settings(max_examples=100, deadline=None)
@given(a=_JSON, b=_JSON)
def test_first_difference_names_a_place_where_the_values_differ(a: Any, b: Any) -> None:
    from trio_agent.testing._cassette import first_difference

    found = first_difference(a, b, "body")
    if found is None:
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
        return
    where = found[0]
    left, right = _at(a, where), _at(b, where)
    assert left is not _MISSING_AT or right is not _MISSING_AT
    if left is not _MISSING_AT and right is not _MISSING_AT:
        assert type(left) is not type(right) or left != right


@settings(max_examples=100, deadline=None)
@given(base=_JSON, change=_TEXT)
def test_a_changed_leaf_is_found(base: Any, change: str) -> None:
    from trio_agent.testing._cassette import first_difference

    recorded = {"messages": [{"role": "user", "content": "a"}], "extra": base}
    received = copy.deepcopy(recorded)
    received["messages"][0]["content"] = "a" + change + "!"
    assert first_difference(recorded, received, "body") == (
        "body.messages[0].content",
        "a",
        "a" + change + "!",
    )


@settings(max_examples=100, deadline=None)
@given(
    chunks=st.lists(st.tuples(st.floats(0, 5), st.binary(max_size=40)), max_size=6),
    body=_JSON,
    status=st.integers(100, 599),
    error=st.booleans(),
    outputs=st.dictionaries(_TEXT, _TEXT, max_size=3),
)
# A lone surrogate in a tool's output (or a request) has no UTF-8: the file escapes it.
@example(chunks=[], body={"s": "\udc80"}, status=200, error=False, outputs={"": "\ud800"})
def test_a_cassette_survives_its_file(
    tmp_path_factory: pytest.TempPathFactory,
    chunks: list[tuple[float, bytes]],
    body: Any,
    status: int,
    error: bool,
    outputs: dict[str, str],
) -> None:
    from trio_agent.testing import (
        Interaction,
        RecordedExchangeError,
        RecordedRequest,
        RecordedResponse,
        ToolReplay,
    )

    response: Any = (
        RecordedExchangeError("ConnectError", 0.5)
        if error
        else RecordedResponse(status, (("content-type", "text/event-stream"),), 0.1, tuple(chunks))
    )
    cassette = Cassette(
        "anthropic",
        (Interaction(RecordedRequest("POST", "/v1/messages", {"a": "b"}, body), response),),
        {k: ToolReplay(v) for k, v in outputs.items()},
    )
    path = tmp_path_factory.mktemp("c") / "c.json"
    cassette.save(path)
    assert Cassette.load(path) == cassette


@settings(max_examples=100, deadline=None)
@given(data=_JSON)
def test_any_json_is_a_cassette_or_a_cassette_error(data: Any) -> None:
    with contextlib.suppress(CassetteError):
        Cassette.from_json(data)


@settings(max_examples=50, deadline=None)
@given(
    secret=st.lists(
        st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=40
    ).map("".join)
)
def test_no_secret_reaches_the_file(tmp_path_factory: pytest.TempPathFactory, secret: str) -> None:
    path = tmp_path_factory.mktemp("s") / "s.json"
    upstream = ScriptedModel(_answers()[1:])
    real = AnthropicClient(
        api_key=secret, auth_token=secret, base_url="http://upstream", retry=RetryPolicy.never()
    )

    async def main() -> None:
        async with record(real, path, transport=upstream.transport()) as client:
            await _run(client, [])

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert upstream.requests[0].headers["x-api-key"] == secret  # it was sent...
    assert secret not in path.read_text()  # ...and never written
    assert json.dumps(secret)[1:-1] not in path.read_text()


async def test_a_consumer_that_leaves_early_keeps_what_it_read(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A turn aborted mid-stream: the cassette holds the body as far as it was read,
    and replays it (the same abort at the same point gives the same history)."""
    path = tmp_path / "aborted.json"
    upstream = ScriptedModel(_answers()[1:])

    async def run_aborted(client: Any) -> tuple[Any, ...]:
        session = Session(client, [], model="claude-test")
        async with session.submit(PROMPT) as stream:
            async for event in stream:
                if type(event).__name__ == "TextDelta":
                    session.abort()
        return session.messages

    real = AnthropicClient(api_key=SECRET, base_url="http://upstream", retry=RetryPolicy.never())
    async with record(real, path, transport=upstream.transport()) as client:
        history = await run_aborted(client)
    cassette = Cassette.load(path)
    (interaction,) = cassette.interactions
    read = b"".join(d for _, d in interaction.response.chunks)  # pyright: ignore
    assert b"message_start" in read
    assert b"message_stop" not in read  # the rest was never read, so never recorded
    model = ScriptedModel.from_cassette(path)
    replayed = await run_aborted(_replay_client(model))
    assert replayed == history
    assert model.mismatches == []


async def test_recording_times_the_tools_it_is_given(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    from trio_agent.testing import Recorder, recording

    path = tmp_path / "timed.json"
    upstream = ScriptedModel(_answers())
    real = AnthropicClient(api_key=SECRET, base_url="http://upstream", retry=RetryPolicy.never())
    async with recording(real, path, transport=upstream.transport()) as (client, recorder):
        assert isinstance(recorder, Recorder)
        history, _, recorded = await _run(client, recorder.timed([_weather_tool([])]))
    data = json.loads(path.read_text())
    assert data["tool_outputs"]["toolu_1"] == {"content": "sunny in Paris", "duration": 0.2}
    model = ScriptedModel.from_cassette(path, tools="replay")

    @tool
    async def weather(city: str) -> str:
        "The weather in a city."
        raise AssertionError("a replayed tool must not run")

    replayed, _, timeline = await _run(_replay_client(model), model.tools([weather]))
    assert replayed == history
    row = timeline.tools["toolu_1"]
    assert row.ended_at - row.started_at == pytest.approx(0.2)
    assert _shape(timeline) == _shape(recorded)
