"""The command pointed at the wrong server, on the real command: an HTTP error says
its status once, and an OpenAI server's stream is "not a Messages API stream"
(said at once, not retried as a truncated stream)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trio_agent import TextBlock
from trio_agent.testing import HTTPErrorAnswer, ScriptedAnswer, ScriptedModel, serve_scripted_model


@pytest.mark.parametrize(
    "answer",
    [
        HTTPErrorAnswer(status=404),
        HTTPErrorAnswer(status=404, body=b"404 page not found"),
    ],
    ids=["messages-api-error", "plain-body"],
)
async def test_an_http_error_says_its_status_once(
    cli: Any, tmp_path: Path, answer: HTTPErrorAnswer
) -> None:
    model = ScriptedModel([answer])
    async with serve_scripted_model(model) as url:
        args = ["run", "hi", "--base-url", url, "--workspace", str(tmp_path)]
        async with cli.open(args) as run:
            assert await run.wait() == 1
    cli.clean(run.stderr)
    (line,) = run.stderr.splitlines()
    assert line.startswith("trio-agent: error: the API answered HTTP 404 NotFoundError: ")
    assert line.count("404") == 1 + ("404 page" in line), line


@pytest.mark.parametrize("protocol", ["openai-responses", "openai-chat"])
async def test_an_openai_stream_is_not_a_messages_api_stream(
    cli: Any, tmp_path: Path, protocol: str
) -> None:
    answer = ScriptedAnswer(blocks=[TextBlock("hi")])
    model = ScriptedModel([answer, answer, answer], protocol=protocol)
    async with serve_scripted_model(model) as url:
        args = ["run", "hi", "--base-url", url, "--workspace", str(tmp_path)]
        async with cli.open(args) as run:
            assert await run.wait() == 1
    cli.clean(run.stderr)
    (line,) = run.stderr.splitlines()  # no retries
    assert line.startswith("trio-agent: error: StreamProtocolError: not a Messages API stream")
    assert "StreamTruncatedError" not in run.stderr
    assert len(model.requests) == 1
