"""What servers ask of the client, against the real test server (written with the
``mcp`` package) over stdio (a real subprocess) or, for the variants, in process:
elicitation (form and URL mode, the
schema's defaults), sampling through a real ModelClient (the scripted Messages API),
roots and roots/list_changed, server log messages and the SDK's log to the
``trio_agent.mcp`` logger, and clientInfo."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from trio_agent import AnthropicClient, TextBlock, Tool, ToolContext, ToolOutput
from trio_agent.mcp import (
    ElicitationAnswer,
    ElicitationRequest,
    MCPRoots,
    MCPSampling,
    SamplingRequest,
    open_mcp_tools,
)
from trio_agent.testing import ScriptedAnswer, ScriptedModel

# In process the SDK's deprecation of logging and roots (by the 2026-07-28 revision,
# still the current one's way) reaches the test's warning filter.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

#: The test server over stdio, as a .mcp.json entry.
SERVER = {"command": sys.executable, "args": [str(Path(__file__).with_name("mcp_test_server.py"))]}


async def call(tools: list[Tool], name: str, input: dict[str, Any] | None = None) -> ToolOutput:
    (tool,) = [t for t in tools if t.name == f"mcp__test__{name}"]
    out = await tool.run(input or {}, ToolContext("t", tool.name, report=lambda _item: None))
    assert isinstance(out, ToolOutput)
    return out


async def test_an_accepted_form_gets_the_schema_defaults() -> None:
    asked: list[ElicitationRequest] = []

    async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
        await trio.lowlevel.checkpoint()
        asked.append(request)
        return ElicitationAnswer("accept", {"dish": "soup"})

    async with open_mcp_tools({"test": SERVER}, elicit=elicit) as tools:
        out = await call(tools, "order")
    assert out.content == "1 medium soup"
    (request,) = asked
    assert request.server == "test"
    assert request.mode == "form"
    assert request.message == "What would you like?"
    assert request.schema is not None
    assert set(request.schema["properties"]) == {"dish", "size", "count"}


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_refused_form_is_said_so(in_process_server: Any, action: Any) -> None:
    async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
        await trio.lowlevel.checkpoint()
        return ElicitationAnswer(action)

    async with open_mcp_tools({"test": in_process_server}, elicit=elicit) as tools:
        out = await call(tools, "order")
    assert out.content == action


async def test_url_mode_asks_to_visit_the_page(
    in_process_server: Any,
) -> None:
    asked: list[ElicitationRequest] = []

    async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
        await trio.lowlevel.checkpoint()
        asked.append(request)
        return ElicitationAnswer("accept")

    async with open_mcp_tools({"test": in_process_server}, elicit=elicit) as tools:
        out = await call(tools, "visit", {"url": "https://example.com/sign-in"})
    assert out.content == "accept"
    (request,) = asked
    assert (request.mode, request.url, request.elicitation_id) == (
        "url",
        "https://example.com/sign-in",
        "visit-1",
    )


async def test_without_elicit_or_with_a_failing_one_the_call_fails(
    in_process_server: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with open_mcp_tools({"test": in_process_server}) as tools:
        assert (await call(tools, "order")).is_error

    async def broken(request: ElicitationRequest) -> ElicitationAnswer:
        await trio.lowlevel.checkpoint()
        return ElicitationAnswer("accept", {"dish": object()})  # not a JSON value

    async with open_mcp_tools({"test": in_process_server}, elicit=broken) as tools:
        assert (await call(tools, "order")).is_error
    assert "MCP elicitation from 'test' failed" in caplog.text


def test_an_answer_is_accept_decline_or_cancel() -> None:
    with pytest.raises(ValueError, match="accept, decline or cancel"):
        ElicitationAnswer("maybe")  # type: ignore[arg-type]


def scripted_client(text: str) -> tuple[ScriptedModel, AnthropicClient]:
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock(text)])])
    http = httpx.AsyncClient(transport=model.transport())
    return model, AnthropicClient(api_key="k", base_url="http://scripted", http_client=http)


async def test_sampling_is_answered_by_the_chosen_model_once_approved() -> None:
    model, client = scripted_client("short.")
    asked: list[SamplingRequest] = []

    async def approve(request: SamplingRequest) -> bool:
        await trio.lowlevel.checkpoint()
        asked.append(request)
        return True

    sampling = MCPSampling(client, "claude-test", approve=approve)
    async with open_mcp_tools({"test": SERVER}, sampling=sampling) as tools:
        out = await call(tools, "summarize", {"text": "a long story"})
    assert not out.is_error, out.content
    assert str(out.content).endswith(": short.")
    (request,) = asked
    assert request.server == "test"
    assert request.messages == (("user", "a long story"),)
    assert request.system == "Be brief."
    (sent,) = model.requests
    assert sent.body["model"] == "claude-test"
    assert sent.body["max_tokens"] == 100
    assert sent.body["system"] in ("Be brief.", [{"type": "text", "text": "Be brief."}])


async def test_sampling_is_off_by_default_and_a_refusal_reaches_no_model(
    in_process_server: Any,
) -> None:
    async with open_mcp_tools({"test": in_process_server}) as tools:
        assert (await call(tools, "summarize", {"text": "x"})).is_error

    model, client = scripted_client("never")

    async def refuse(request: SamplingRequest) -> bool:
        await trio.lowlevel.checkpoint()
        return False

    sampling = MCPSampling(client, "claude-test", approve=refuse)
    async with open_mcp_tools({"test": in_process_server}, sampling=sampling) as tools:
        out = await call(tools, "summarize", {"text": "x"})
    assert out.is_error
    assert "declined" in str(out.content)
    assert model.requests == []


async def test_the_workspace_is_the_default_root(in_process_server: Any, tmp_path: Path) -> None:
    async with open_mcp_tools({"test": in_process_server}) as tools:
        out = await call(tools, "roots")
    assert out.content == Path.cwd().resolve().as_uri()


async def test_changed_roots_are_announced(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    roots = MCPRoots([first])
    async with open_mcp_tools({"test": SERVER}, roots=roots) as tools:
        assert (await call(tools, "roots")).content == first.as_uri()
        async with trio.open_nursery() as nursery:
            results: list[ToolOutput] = []

            async def after_change() -> None:
                results.append(await call(tools, "roots_after_change"))

            nursery.start_soon(after_change)
            await roots.set([second, first])
    assert results[0].content == f"{second.as_uri()}\n{first.as_uri()}"


async def test_server_logs_reach_the_logger_at_their_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_agent.mcp")
    async with open_mcp_tools({"test": SERVER}) as tools:
        assert (await call(tools, "shout", {"level": "error", "message": "disk full"})).content == (
            "sent"
        )
        await call(tools, "shout", {"level": "debug", "message": "details"})
    found = {
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == "trio_agent.mcp" and "log]" in r.getMessage()
    }
    assert (logging.ERROR, "[test/shouter log] disk full") in found
    assert (logging.DEBUG, "[test/shouter log] details") in found


def test_the_sdks_log_goes_to_our_logger(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="trio_agent.mcp")
    logging.getLogger("mcp.client.streamable_http").info("from the SDK")
    logging.getLogger("mcp.client.streamable_http").debug("too fine")
    said = [(r.name, r.getMessage()) for r in caplog.records]
    assert ("trio_agent.mcp.sdk", "[mcp.client.streamable_http] from the SDK") in said
    assert not any("too fine" in m for _, m in said)


async def test_the_client_says_it_is_trio_agent() -> None:
    import trio_agent

    async with open_mcp_tools({"test": SERVER}) as tools:
        out = await call(tools, "whoami")
    assert out.content == f"trio-agent {trio_agent.__version__}"
