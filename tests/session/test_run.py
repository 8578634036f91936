"""One call that returns or raises (issue 28): ``trio_agent.run`` and ``Session.run``
return a RunResult and raise the error that ended the turn; an aborted turn or one
awaiting approval is returned. Session is an async context manager; a library
Session refuses a transcript that already holds a conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent
from trio_agent import (
    Allow,
    AnthropicClient,
    APIStatusError,
    AuthenticationError,
    ConflictError,
    Defer,
    InternalServerError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    RateLimitError,
    RequestTooLargeError,
    RetryPolicy,
    Session,
    TextBlock,
    ToolUseBlock,
    TranscriptError,
    TurnEndReason,
    TurnOptions,
    Usage,
    UserMessage,
    read_transcript,
    run,
    tool,
)
from trio_agent.testing import HTTPErrorAnswer, ScriptedAnswer, ScriptedModel, Timing, check_history


def hello(text: str = "Hello.") -> ScriptedAnswer:
    return ScriptedAnswer(
        blocks=[TextBlock(text)],
        usage=Usage(input_tokens=7, output_tokens=3),
        model=trio_agent.DEFAULT_MODEL,
    )


@tool(concurrency_safe=True)
async def echo(text: str) -> str:
    """Say it back."""
    return text


async def test_run_returns_the_turn(autojump_clock: Any) -> None:
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[TextBlock("Let me."), ToolUseBlock("t1", "echo", {"text": "x"})],
                model=trio_agent.DEFAULT_MODEL,
            ),
            hello("Done: x."),
        ]
    )
    result = await run(
        model.client(),
        "say x",
        tools=[echo],
        model=trio_agent.DEFAULT_MODEL,
        messages=[
            UserMessage("before"),
            trio_agent.AssistantMessage("msg_0", "m", [TextBlock("ok")]),
        ],
    )
    assert result.reason is TurnEndReason.COMPLETED
    assert result.text == "Done: x."
    assert result.output is None
    assert [m.role for m in result.new_messages] == ["user", "assistant", "user", "assistant"]
    assert result.new_messages[0] == UserMessage("say x")
    assert result.messages[-4:] == result.new_messages
    assert len(result.messages) == 6
    assert result.usage.output_tokens > 0
    assert result.cost_usd is not None
    assert result.cost_usd > 0
    assert result.cost_usd == result.end.usage.cost_usd
    check_history(result.messages)
    assert len(model.requests) == 2


ERRORS: list[tuple[int, type[APIStatusError]]] = [
    (400, InvalidRequestError),
    (401, AuthenticationError),
    (403, PermissionDeniedError),
    (404, NotFoundError),
    (409, ConflictError),
    (413, RequestTooLargeError),
    (429, RateLimitError),
    (500, InternalServerError),
    (529, OverloadedError),
]


@pytest.mark.parametrize(("status", "kind"), ERRORS)
async def test_run_raises_the_error_that_ended_the_turn(
    autojump_clock: Any, status: int, kind: type[APIStatusError]
) -> None:
    # Overloaded answers are retried by the loop (3 in a row), so script plenty.
    failing = HTTPErrorAnswer(status=status, headers={"x-should-retry": "false"})
    model = ScriptedModel([failing] * 4)
    with pytest.raises(kind) as caught:
        await run(model.client(), "hi", model="m")
    assert type(caught.value) is kind
    assert caught.value.status_code == status
    assert model.requests  # the request was made


@pytest.mark.parametrize(("status", "kind"), ERRORS[:3])
async def test_session_run_raises_and_keeps_a_valid_history(
    autojump_clock: Any, status: int, kind: type[APIStatusError], tmp_path: Path
) -> None:
    model = ScriptedModel([hello("one"), HTTPErrorAnswer(status=status)])
    async with Session(model.client(), model="m", transcript_path=tmp_path / "t.jsonl") as session:
        first = await session.run("first")
        assert first.text == "one"
        with pytest.raises(kind):
            await session.run("second")
        assert not session.running
        check_history(session.messages)
        assert session.messages[-1] == UserMessage("second") or session.messages[-1].role == "user"
    assert len(read_transcript(tmp_path / "t.jsonl").messages) == len(session.messages)


async def test_no_credentials_raise_authentication_error(
    autojump_clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's new user: a minimal program without a key used to print nothing."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    model = ScriptedModel([hello()])
    client = model.client(api_key=None)
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        await run(client, "hi", model="m")
    assert model.requests == []


async def test_an_aborted_turn_is_returned(autojump_clock: Any) -> None:
    slow = ScriptedAnswer(blocks=[TextBlock("a long answer " * 20)], timing=Timing(token_delay=1))
    model = ScriptedModel([slow])
    control = trio_agent.TurnControl()

    async def abort_soon() -> None:
        await trio.sleep(3)
        control.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_soon)
        result = await run(model.client(), "hi", model="m", control=control)
    assert result.reason is TurnEndReason.ABORTED_STREAMING
    assert result.end.error is None
    check_history(result.messages)


async def test_a_turn_awaiting_approval_is_returned(autojump_clock: Any) -> None:
    async def ask(*args: Any) -> Any:
        return Defer()

    model = ScriptedModel(
        [ScriptedAnswer(blocks=[ToolUseBlock("t1", "echo", {"text": "x"})]), hello("after")]
    )
    async with Session(
        model.client(), [echo], model="m", options=TurnOptions(can_use_tool=ask)
    ) as session:
        result = await session.run("go")
        assert result.reason is TurnEndReason.AWAITING_APPROVAL
        assert result.end.pending is not None
        resumed = await session.run(approvals={"t1": Allow()})
    assert resumed.reason is TurnEndReason.COMPLETED
    assert resumed.text == "after"
    assert resumed.new_messages[0].role == "user"  # the approved call's result
    check_history(session.messages)


# -- Session as an async context manager --------------------------------------------------


async def test_the_session_closes_its_transcript_and_its_own_client(
    autojump_clock: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[AnthropicClient] = []
    real = trio_agent._session._session.AnthropicClient  # pyright: ignore[reportPrivateUsage]
    model = ScriptedModel([hello()])

    def build() -> AnthropicClient:
        import httpx

        client = real(
            api_key="k",
            base_url="http://scripted",
            http_client=httpx.AsyncClient(transport=model.transport()),
            retry=RetryPolicy.never(),
        )
        made.append(client)
        return client

    monkeypatch.setattr(trio_agent._session._session, "AnthropicClient", build)  # pyright: ignore[reportPrivateUsage]
    async with Session(model="m", transcript_path=tmp_path / "t.jsonl") as session:
        assert session.client is made[0]
        result = await session.run("hi")
        assert result.text == "Hello."
        assert not made[0].closed
    assert made[0].closed
    assert session._writer is None  # pyright: ignore[reportPrivateUsage]


async def test_a_given_client_is_left_open(autojump_clock: Any) -> None:
    model = ScriptedModel([hello()])
    async with model.client() as client:
        async with Session(client, model="m") as session:
            await session.run("hi")
        assert not client.closed


# -- a transcript that already holds a conversation ---------------------------------------


def _text(message: trio_agent.Message) -> Any:
    return message.text if isinstance(message, trio_agent.AssistantMessage) else message.content


def _write_conversation(path: Path, model: ScriptedModel) -> None:
    async def main() -> None:
        async with Session(model.client(), model="m", transcript_path=path) as session:
            await session.run("first")

    trio.run(main)


def test_an_existing_conversation_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    _write_conversation(path, ScriptedModel([hello("one")]))
    before = path.read_bytes()
    with pytest.raises(TranscriptError, match="already holds a conversation"):
        Session(ScriptedModel([]).client(), model="m", transcript_path=path)
    assert path.read_bytes() == before


def test_a_file_that_is_no_transcript_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(json.dumps({"hello": "world"}) + "\n")
    with pytest.raises(TranscriptError, match="not a trio-agent transcript"):
        Session(ScriptedModel([]).client(), model="m", transcript_path=path)
    assert path.read_text() == json.dumps({"hello": "world"}) + "\n"


def test_an_empty_or_header_only_file_is_used(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    Session(ScriptedModel([]).client(), model="m", transcript_path=empty)
    header = tmp_path / "header.jsonl"
    header.write_text(json.dumps({"type": "header", "version": 1, "model": "m"}) + "\n")
    assert Session(ScriptedModel([]).client(), model="m", transcript_path=header).messages == ()


@pytest.mark.parametrize("how", ["continue", "resume"])
def test_continue_or_resume_goes_on_with_it(tmp_path: Path, how: str) -> None:
    path = tmp_path / "t.jsonl"
    _write_conversation(path, ScriptedModel([hello("one")]))
    model = ScriptedModel([hello("two")])

    async def main() -> Session:
        if how == "continue":
            session = Session(
                model.client(), model="m", transcript_path=path, continue_transcript=True
            )
        else:
            session = Session.resume(path, model.client(), [])
        async with session:
            assert [_text(m) for m in session.messages] == ["first", "one"]
            assert session.usage.input_tokens == 7  # the earlier answer, priced again
            await session.run("second")
        return session

    session = trio.run(main)
    assert [_text(m) for m in read_transcript(path).messages] == ["first", "one", "second", "two"]
    assert len(model.requests[0].body["messages"]) == 3
    assert session.messages == read_transcript(path).messages


def test_continue_needs_a_transcript_and_no_messages(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="transcript_path"):
        Session(ScriptedModel([]).client(), model="m", continue_transcript=True)
    path = tmp_path / "t.jsonl"
    _write_conversation(path, ScriptedModel([hello("one")]))
    with pytest.raises(TypeError, match="messages"):
        Session(
            ScriptedModel([]).client(),
            model="m",
            transcript_path=path,
            continue_transcript=True,
            messages=[UserMessage("x")],
        )
