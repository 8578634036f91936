"""What a durable turn journals of a tool's return, and what it commits of a turn
that compacted (the audit's findings 1 and 2).

- A tool's return is journaled as the executor delivers it: a lone surrogate
  becomes U+FFFD, bytes or a dict are the same error result a plain Session gives,
  and a block the model request cannot encode is an error result recorded as such.
  No return value reaches the journal's writer as an exception: the turn completes,
  its history is a plain Session's, and re-run (after a crash) it answers the
  tool from the record: the tool runs once.
- A write that fails with anything (not only a database error) fails that turn
  with a DurableError; the worker and its other turns go on.
- A turn that compacted commits the session's whole new history (in the commit's
  transaction), not a slice of it appended to the old one.
"""

from __future__ import annotations

import datetime
import itertools
import math
import pathlib
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trio_agent import (
    AnthropicClient,
    AssistantMessage,
    Message,
    OpaqueBlock,
    RetryPolicy,
    Session,
    TextBlock,
    Tool,
    ToolContext,
    ToolOutput,
    ToolResultBlock,
    ToolUseBlock,
    TurnEnd,
    TurnOptions,
    Usage,
    UserMessage,
    summarizing_compactor,
)
from trio_agent.durable import Agent, DurableClient, DurableError, SqlSessionStore, open_worker
from trio_agent.durable._journal import TurnJournal
from trio_agent.durable._writer import RecordWriter
from trio_agent.testing import (
    HTTPErrorAnswer,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    check_history,
    serve_scripted_model,
)

FAST = Timing(first_event_delay=0.0, token_delay=0.0)
SCHEMA: dict[str, Any] = {"type": "object"}
#: What the durable turn's error result says of a return the model request cannot carry.
UNSENDABLE = "Error: t returned a result that cannot be sent to the model"

# -- finding 1: a tool's return, journaled as the executor delivers it -------------------

_ODD = st.sampled_from(["\ud800", "\udfff", "\udc80", "\x00", "\ufffd", "\U0001f600", "é"])
texts = st.text(
    st.one_of(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), _ODD),
    max_size=40,
)
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
not_json = st.one_of(
    st.datetimes(),
    st.frozensets(st.integers(), max_size=2),
    st.just(math.nan),
    st.just(math.inf),
    st.binary(max_size=4),
)
values = st.recursive(
    st.one_of(json_leaves, not_json),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=6,
)
opaque = st.builds(
    lambda kind, extra: OpaqueBlock({**extra, "type": kind}),
    st.sampled_from(["image", "document", "search_result", "not_a_result_block"]),
    st.dictionaries(texts, values, max_size=3),
)
blocks = st.lists(
    st.one_of(st.builds(TextBlock, texts), opaque, st.builds(ToolUseBlock, texts, texts)),
    max_size=3,
)
huge = st.sampled_from(["x" * 250, "\ud800" * 300 + "y", "z" * 200_000])
returns = st.one_of(
    texts,
    huge,
    st.binary(max_size=8),
    st.dictionaries(texts, json_leaves, max_size=2),
    blocks,
    blocks.map(tuple),
    st.builds(ToolOutput, st.one_of(texts, blocks), is_error=st.booleans()),
    st.integers(),
    st.none(),
)


def _client(model: ScriptedModel) -> AnthropicClient:
    return AnthropicClient(
        api_key="k",
        base_url="http://scripted",
        http_client=httpx.AsyncClient(transport=model.transport()),
        retry=RetryPolicy(max_retries=0),
    )


def _model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_1", "t", {})], timing=FAST),
            ScriptedAnswer(blocks=[TextBlock("done")], timing=FAST),
        ]
    )


def _tool(make: Callable[[], Any], calls: list[int]) -> Tool:
    async def run(input: Mapping[str, Any], ctx: ToolContext) -> Any:
        calls.append(1)
        return make()

    # A small cap, so that long text is cut as well as kept whole.
    return Tool("t", "t", SCHEMA, run, max_result_chars=1000)


async def _submit(session: Session) -> TurnEnd:
    end = None
    async with session.submit("go") as events:
        async for event in events:
            if isinstance(event, TurnEnd):
                end = event
    assert end is not None
    return end


async def _durable(
    store: SqlSessionStore, turn_id: str, model: ScriptedModel, tool: Tool
) -> list[Message]:
    """One run of the durable turn *turn_id* as the worker runs it: the journal's client
    and tools, its records written behind the turn by a writer in a nursery."""
    journal = await TurnJournal.open(store, turn_id)
    async with trio.open_nursery() as nursery:
        writer = journal.writer = RecordWriter(store, turn_id)
        nursery.start_soon(writer.run)
        journal.bind()
        session = Session(journal.client(_client(model)), journal.tools([tool]), model="m")
        await _submit(session)
        await writer.flush()  # as a crash after the turn, before its commit, leaves it
        await writer.close()
    return list(session.messages)


def _model_clean(value: Any, clean: Callable[[Any], Any]) -> Any:
    """The test's own model of the cleaning: every lone surrogate in an OpaqueBlock's
    data (keys and values, at any depth) as U+FFFD, by *clean* (the suite's
    ``surrogates_replaced``)."""

    def block(b: Any) -> Any:
        return OpaqueBlock(clean(dict(b.data))) if isinstance(b, OpaqueBlock) else b

    if isinstance(value, ToolOutput):
        content = value.content
        if not isinstance(content, str):
            content = type(content)(block(b) for b in content)
        return ToolOutput(content, is_error=value.is_error)
    if isinstance(value, list | tuple):
        return type(value)(block(b) for b in value)  # pyright: ignore[reportUnknownVariableType]
    return value


def _result(history: Sequence[Message]) -> ToolResultBlock:
    (result,) = history[2].tool_results
    return result


_turns = itertools.count()
_STORE: list[SqlSessionStore] = []


def _store() -> SqlSessionStore:
    """One SQLite store for every example (each turn has its own id)."""
    if not _STORE:
        directory = tempfile.mkdtemp(prefix="trio-agent-audit-")
        _STORE.append(SqlSessionStore.connect(f"sqlite:///{directory}/db.sqlite"))
    return _STORE[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=returns)
@example(value="bad \ud800 output")
@example(value=b"raw bytes")
@example(value={"a": 1})
@example(value="a\x00b")
@example(value=[TextBlock("t \udc80")])
@example(
    value=[
        OpaqueBlock(
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": datetime.datetime(2020, 1, 1),
                },
            }
        )
    ]
)
@example(value=[OpaqueBlock({"type": "image", "source": {"data": "\ud800"}})])
@example(value=[OpaqueBlock({"type": "image", "n": math.nan})])
def test_a_tools_return_is_journaled_as_a_plain_session_delivers_it(
    value: Any, surrogates_replaced: Callable[[Any], Any]
) -> None:
    store = _store()
    turn_id = f"turn-{next(_turns)}"

    async def main() -> None:
        # The reference: a plain Session given the same value (it cleans lone
        # surrogates and answers an unsendable return with an error result itself).
        with_plain: list[int] = []
        plain = Session(_client(_model()), [_tool(lambda: value, with_plain)], model="m")
        await _submit(plain)
        reference = list(plain.messages)
        assert with_plain == [1]
        # What the executor delivers is the value as the test's own model cleans it.
        cleaned = Session(
            _client(_model()),
            [_tool(lambda: _model_clean(value, surrogates_replaced), [])],
            model="m",
        )
        await _submit(cleaned)
        assert list(cleaned.messages) == reference

        calls: list[int] = []
        tool = _tool(lambda: value, calls)
        first = await _durable(store, turn_id, _model(), tool)
        check_history(first, strict=True)
        assert first == reference

        # What the journal holds is what the history holds (before the cap).
        (record,) = [v for k, v in store.journal(turn_id).items() if k.startswith("tool/")]
        delivered = _result(first)
        assert record["is_error"] == delivered.is_error
        if isinstance(delivered.content, str):
            if "[Output truncated" not in delivered.content:
                assert record["content"] == delivered.content
        elif not any(
            isinstance(b, TextBlock) and "[Output truncated" in b.text for b in delivered.content
        ):
            assert record["content"] == [b.to_api() for b in delivered.content]

        # Re-run after a crash before the commit: everything answers from the record.
        again = ScriptedModel([])
        second = await _durable(store, turn_id, again, tool)
        assert second == first
        assert again.requests == []
        assert calls == [1]  # the tool ran once

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_a_write_that_fails_with_any_error_fails_only_its_turn(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the store's write raises (here a driver's bare UnicodeEncodeError) is
    the turn's DurableError, raised at its next flush: never out of the writer's
    task, which runs in the worker's nursery, beside every other turn."""
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")

    def refuse(self: SqlSessionStore, turn_id: str, records: Any) -> None:
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    try:
        bystander = trio.Event()
        async with trio.open_nursery() as nursery:

            async def other_turn() -> None:
                await trio.sleep(0.5)
                bystander.set()

            nursery.start_soon(other_turn)
            writer = RecordWriter(store, "t")
            nursery.start_soon(writer.run)
            monkeypatch.setattr(SqlSessionStore, "record_many", refuse)
            writer.add("a", 1)
            with pytest.raises(DurableError, match=r"turn t: UnicodeEncodeError"):
                await writer.flush()
            await writer.close()
        assert bystander.is_set()  # the nursery was not cancelled
    finally:
        store.close()


def test_the_store_keeps_what_utf8_cannot_carry_losslessly(tmp_path: pathlib.Path) -> None:
    """A lone surrogate anywhere in a record or a message (an opaque block read from
    the API's JSON may hold one) is stored escaped, and read back the same."""
    store = SqlSessionStore.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        value = {"content": [{"type": "image", "x": "a\ud800b"}], "is_error": False}
        store.record_many("t", [("k", value)])
        assert store.journal("t") == {"k": value}
        with pytest.raises(DurableError, match="cannot record"):
            store.record_many("t", [("bad", {"when": datetime.datetime(2020, 1, 1)})])
        message = UserMessage([TextBlock("hi"), OpaqueBlock({"type": "image", "x": "\udc80"})])
        store.append("s", [message])
        assert store.load("s") == (message,)
    finally:
        store.close()


# -- finding 1, end to end: a worker stopped mid-turn and started again ------------------


def _backend_url(request: pytest.FixtureRequest, backend: str, tmp_path: pathlib.Path) -> str:
    if backend == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'db.sqlite'}"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_worker_survives_bad_tool_returns_and_never_reruns_them(
    tmp_path: pathlib.Path, request: pytest.FixtureRequest, backend: str, wait_for: Any
) -> None:
    url = _backend_url(request, backend, tmp_path)
    bad: dict[str, Any] = {
        "surrogate": "bad \ud800 output",
        "datetime": [
            OpaqueBlock({"type": "image", "source": {"data": datetime.datetime(2020, 1, 1)}})
        ],
        "bytes": b"raw bytes",
        "dict": {"a": 1},
    }
    ran: list[str] = []
    held = trio.Event()
    hold_forever = True

    def returning(name: str) -> Tool:
        async def run(input: Mapping[str, Any], ctx: ToolContext) -> Any:
            ran.append(name)
            return bad[name]

        return Tool(name, name, SCHEMA, run)

    async def hold(input: Mapping[str, Any], ctx: ToolContext) -> str:
        ran.append("hold")
        held.set()
        if hold_forever:
            await trio.sleep_forever()
        return "released"

    tools = [returning(name) for name in bad] + [Tool("hold", "hold", SCHEMA, hold)]
    uses = [ToolUseBlock(f"toolu_{name}", name, {}) for name in bad]
    model = ScriptedModel(
        [
            ScriptedAnswer(blocks=uses),
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_hold", "hold", {})]),
            ScriptedAnswer(blocks=[TextBlock("done")]),  # after the restart
            ScriptedAnswer(blocks=[TextBlock("other done")]),
        ]
    )
    session_id = f"bad-{uuid.uuid4().hex[:8]}"
    executor = f"audit-{uuid.uuid4().hex[:8]}"
    async with serve_scripted_model(model) as base_url:
        model_client = AnthropicClient(api_key="k", base_url=base_url)

        def build(sid: str) -> Session:
            return Session(model_client, tools, model="claude-scripted", max_tokens=64)

        agent = Agent("w", build)
        client = await trio.to_thread.run_sync(lambda: DurableClient.connect(url, agent="w"))
        try:
            with trio.fail_after(90):
                async with open_worker(agent, database_url=url, executor_id=executor, lease=3):
                    handle = await trio.to_thread.run_sync(client.submit, session_id, "go")
                    await held.wait()
                    # Every result and both answers are in the journal: stop the worker.
                    await wait_for(
                        lambda: len(client.store.journal(handle.turn_id)) == len(bad) + 2,
                        "the records",
                    )
                assert client.store.workflow_status(handle.turn_id) == "PENDING"
                hold_forever = False
                async with open_worker(agent, database_url=url, executor_id=executor, lease=3):
                    summary = await handle.wait(no_worker_timeout=30)
                    other = await trio.to_thread.run_sync(client.submit, session_id, "again")
                    assert (await other.wait(no_worker_timeout=30)).text == "other done"
            history = client.history(session_id)
        finally:
            await trio.to_thread.run_sync(client.close)
    assert (summary.reason, summary.text, summary.replayed_tools) == ("completed", "done", 4)
    assert sorted(ran) == sorted([*bad, "hold", "hold"])  # each bad one once; hold was cut
    check_history(history, strict=True)
    results = {r.tool_use_id: r for r in history[2].tool_results}
    assert results["toolu_surrogate"].content == "bad \ufffd output"
    assert not results["toolu_surrogate"].is_error
    assert str(results["toolu_datetime"].content).startswith(
        "Error: datetime returned a result that cannot be sent to the model"
    )
    for name in ("bytes", "dict"):
        assert results[f"toolu_{name}"].is_error
        assert results[f"toolu_{name}"].content == (
            f"Error: {name} returned {name}, expected a str, a list of text / image / "
            "document / search_result blocks, or a ToolOutput"
        )


# -- finding 2: a turn that compacted commits the new history -----------------------------

TOO_LONG = HTTPErrorAnswer(
    status=400,
    body={
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 9 > 8"},
    },
)


def _compacting_answers(kind: str) -> list[ScriptedAnswer | HTTPErrorAnswer]:
    summary = ScriptedAnswer(blocks=[TextBlock(f"SUMMARY of earlier ({kind})")])
    if kind == "reactive":
        return [
            ScriptedAnswer(blocks=[TextBlock("one")]),  # turn 1
            ScriptedAnswer(blocks=[ToolUseBlock("toolu_r", "Read", {})]),  # turn 2
            TOO_LONG,
            summary,  # the compactor
            ScriptedAnswer(blocks=[TextBlock("done two")]),
        ]
    heavy = Usage(input_tokens=150_000, output_tokens=10, cache_read_input_tokens=20_000)
    return [
        ScriptedAnswer(blocks=[TextBlock("one")]),
        ScriptedAnswer(blocks=[ToolUseBlock("toolu_r", "Read", {})], usage=heavy),
        summary,  # past auto_compact: compacted before the next call
        ScriptedAnswer(blocks=[TextBlock("done two")]),
    ]


def _compacting_session(client: AnthropicClient, kind: str, calls: list[int]) -> Session:
    async def read(input: Mapping[str, Any], ctx: ToolContext) -> str:
        calls.append(1)
        return "THE-TOOL-RESULT"

    compactor = summarizing_compactor(client, model="claude-scripted", keep_last=2)
    options = TurnOptions(compactor=compactor, context_window=200_000)
    if kind == "auto":
        options = TurnOptions(compactor=compactor, context_window=200_000, auto_compact=0.8)
    return Session(
        client,
        [Tool("Read", "r", SCHEMA, read)],
        model="claude-scripted",
        max_tokens=64,
        options=options,
    )


PROMPTS = ("first", "second", "third")


async def _plain_history(kind: str) -> list[Message]:
    answers = [*_compacting_answers(kind), ScriptedAnswer(blocks=[TextBlock("three")])]
    async with serve_scripted_model(ScriptedModel(answers)) as base_url:
        session = _compacting_session(AnthropicClient(api_key="k", base_url=base_url), kind, [])
        for prompt in PROMPTS:
            async with session.submit(prompt) as events:
                async for _ in events:
                    pass
        return list(session.messages)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_turn_that_compacted_commits_the_new_history(
    tmp_path: pathlib.Path, request: pytest.FixtureRequest, backend: str
) -> None:
    url = _backend_url(request, backend, tmp_path)
    kinds = ("reactive", "auto")
    answers: list[Any] = []
    for kind in kinds:  # the sessions run one after the other, in this order
        answers += [*_compacting_answers(kind), ScriptedAnswer(blocks=[TextBlock("three")])]
    calls: dict[str, list[int]] = {kind: [] for kind in kinds}
    tag = uuid.uuid4().hex[:8]
    stored: dict[str, tuple[Message, ...]] = {}
    async with serve_scripted_model(ScriptedModel(answers)) as base_url:
        model_client = AnthropicClient(api_key="k", base_url=base_url)
        agents = [
            Agent(kind, lambda sid, kind=kind: _compacting_session(model_client, kind, calls[kind]))
            for kind in kinds
        ]
        clients = {
            kind: await trio.to_thread.run_sync(
                lambda kind=kind: DurableClient.connect(url, agent=kind)
            )
            for kind in kinds
        }
        try:
            with trio.fail_after(90):
                async with open_worker(agents, database_url=url, executor_id=f"c-{tag}", lease=3):
                    for kind in kinds:
                        for prompt in PROMPTS:
                            handle = await trio.to_thread.run_sync(
                                clients[kind].submit, f"{kind}-{tag}", prompt
                            )
                            summary = await handle.wait(no_worker_timeout=30)
                            assert summary.reason == "completed", summary
                        stored[kind] = clients[kind].history(f"{kind}-{tag}")
        finally:
            for c in clients.values():
                await trio.to_thread.run_sync(c.close)
    for kind in kinds:
        history = stored[kind]
        check_history(history, strict=True)
        assert list(history) == await _plain_history(kind), kind
        assert "SUMMARY of earlier" in str(history[0].content)
        assert any("THE-TOOL-RESULT" in str(m.content) for m in history)
        assert UserMessage("third") in history
        assert isinstance(history[-1], AssistantMessage)
        assert history[-1].text == "three"
        assert calls[kind] == [1]


def test_a_block_that_cannot_be_read_back_is_an_error_record() -> None:
    """An opaque block of a known type that its own class cannot read (a "text"
    block without its text) would fail the re-run's decoding: recorded as an error."""
    from trio_agent.durable._journal import _encode  # pyright: ignore[reportPrivateUsage]

    record, modifier = _encode("t", [OpaqueBlock({"type": "text"})])
    assert record["is_error"]
    assert record["content"].startswith(UNSENDABLE)
    assert modifier is None
