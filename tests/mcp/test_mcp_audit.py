"""The MCP client against the hostile servers of an audit (real processes, real
loopback HTTP): each misbehaviour costs one call or one tool, never the
connection, the loop, or unbounded work."""

from __future__ import annotations

import gc
import json
import re
import resource
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import mcp
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import ToolContext, ToolOutput
from trio_agent.mcp import _open, open_mcp_tools
from trio_agent.mcp._convert import mcp_tool_name
from trio_agent.mcp._wire import MAX_NOTIFICATIONS, Reader
from trio_agent.testing import no_leaks

#: Generous: only a hang reaches it.
BOUND = 60
FLOOD_SCRIPT = Path(__file__).with_name("flood_server.py")
HTTP_SCRIPT = Path(__file__).with_name("hostile_http_server.py")

Raw = Callable[[dict[str, Any]], dict[str, Any]]

pytestmark = [
    # The SDK's HTTP client leaves httpx2's SSE generators to the collector (see
    # test_mcp_http.py); nothing leaks.
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]


@pytest.fixture
async def collect_generators() -> AsyncIterator[None]:
    yield
    gc.collect()
    await trio.sleep(0)
    gc.collect()


async def call_tools(
    entry: dict[str, Any], inputs: list[dict[str, Any]], **kwargs: Any
) -> tuple[list[str], list[ToolOutput], list[Any]]:
    """Start the server; the tools' names; call ``t`` with each input in turn."""
    progress: list[Any] = []
    outs: list[ToolOutput] = []
    with trio.fail_after(BOUND):
        async with open_mcp_tools({"s": entry}, **kwargs) as tools:
            names = [t.name for t in tools]
            (tool,) = [t for t in tools if t.name == "mcp__s__t"]
            for input in inputs:
                out = await tool.run(input, ToolContext("id", tool.name, report=progress.append))
                assert isinstance(out, ToolOutput)
                outs.append(out)
    return names, outs, progress


def text_of(out: ToolOutput) -> str:
    assert isinstance(out.content, str)
    return out.content


def flood_entry(mode: str, count: int) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FLOOD_SCRIPT), mode, str(count)]}


@pytest.fixture
def hostile_http(
    collect_generators: None,
) -> Iterator[Callable[..., tuple[str, subprocess.Popen[str]]]]:
    """``hostile_http(mode, count)``: the URL of a hostile HTTP server, and its process."""
    procs: list[subprocess.Popen[str]] = []

    def start(mode: str, count: int = 0) -> tuple[str, subprocess.Popen[str]]:
        proc = subprocess.Popen(
            [sys.executable, str(HTTP_SCRIPT), mode, str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        procs.append(proc)
        assert proc.stdout is not None
        return f"http://127.0.0.1:{int(proc.stdout.readline())}/mcp", proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


# 1. A name (or any string) that is not valid Unicode: that tool alone is left out,
# and an input that cannot be serialized fails that call alone.

SURROGATE_TOOLS = [
    {"name": "t", "inputSchema": {"type": "object"}},
    {"name": "u\ud800" + "v" * 80, "inputSchema": {"type": "object"}},
    {"name": "u\ud800", "inputSchema": {"type": "object"}},
    {"name": "d", "description": "bad \udfff text", "inputSchema": {"type": "object"}},
]


async def test_tools_named_with_a_lone_surrogate_are_left_out(raw_server: Raw) -> None:
    entry = raw_server({"tools": SURROGATE_TOOLS, "call": "text", "texts": ["ok"]})
    with no_leaks():
        names, outs, _ = await call_tools(entry, [{}, {}])
    assert names == ["mcp__s__t"]
    assert [(o.content, o.is_error) for o in outs] == [("ok", False)] * 2


async def test_an_input_that_cannot_be_sent_fails_that_call_alone(raw_server: Raw) -> None:
    entry = raw_server({"call": "text", "texts": ["ok"]})
    with no_leaks():
        _, outs, _ = await call_tools(entry, [{"x": "\ud800"}, {"x": "fine"}])
    assert outs[0].is_error
    assert "was not sent" in text_of(outs[0])
    assert (outs[1].content, outs[1].is_error) == ("ok", False)


async def test_http_an_input_that_cannot_be_sent_fails_that_call_alone(
    hostile_http: Callable[..., tuple[str, Any]],
) -> None:
    url, _ = hostile_http("ok")
    with no_leaks(processes=False):
        _, outs, _ = await call_tools({"type": "http", "url": url}, [{"x": "\ud800"}, {}])
    assert outs[0].is_error
    assert "was not sent" in text_of(outs[0])
    assert (outs[1].content, outs[1].is_error) == ("ok", False)


names = st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=90)


#: A name with a lone surrogate somewhere among arbitrary code points, long or short.
spoiled_names = st.builds(
    lambda a, s, b: a + s + b, names, st.sampled_from(["", "\ud800", "\udfff"]), names
)


@settings(max_examples=300)
@given(server=names, tool=spoiled_names)
def test_any_name_makes_an_api_tool_name(server: str, tool: str) -> None:
    name = mcp_tool_name(server, tool)
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name)


def listing_reader() -> Reader:
    r = Reader("s")
    r.sent(mcp.types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/list"))
    return r


@settings(max_examples=300)
@given(name=names)
def test_a_listed_name_is_kept_exactly_when_it_can_be_sent_back(name: str) -> None:
    tools = [{"name": name, "inputSchema": {"type": "object"}}]
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}).encode()
    message = listing_reader().read(line)
    assert isinstance(message, mcp.shared.message.SessionMessage)
    response = message.message
    assert isinstance(response, mcp.types.JSONRPCResponse)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        assert response.result["tools"] == []
    else:
        assert [t["name"] for t in response.result["tools"]] == [name]


# 2. An output schema never reaches a backtracking regex engine.

REDOS_TOOLS = [
    {
        "name": "t",
        "inputSchema": {"type": "object"},
        "outputSchema": {
            "type": "object",
            "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}},
        },
    }
]


def structured(value: dict[str, Any]) -> str:
    result = {"content": [{"type": "text", "text": "r"}], "structuredContent": value}
    return '{"jsonrpc": "2.0", "id": {id}, "result": ' + json.dumps(result) + "}"


async def test_a_catastrophic_output_pattern_runs_on_re2(
    raw_server: Raw, monkeypatch: pytest.MonkeyPatch
) -> None:
    searched: list[str] = []
    search = re.search

    def recording(pattern: Any, *args: Any, **kwargs: Any) -> Any:
        searched.append(str(pattern))
        return search(pattern, *args, **kwargs)

    monkeypatch.setattr(re, "search", recording)
    # 22 a's: small enough that Python's re would end too (in about a second).
    bad = raw_server(
        {"tools": REDOS_TOOLS, "call": "raw", "line": structured({"x": "a" * 22 + "b"})}
    )
    good = raw_server({"tools": REDOS_TOOLS, "call": "raw", "line": structured({"x": "aaa"})})
    with no_leaks():
        _, (refused,), _ = await call_tools(bad, [{}])
        _, (accepted,), _ = await call_tools(good, [{}])
    assert refused.is_error
    assert "does not match tool 't''s output schema" in text_of(refused)
    assert (accepted.content, accepted.is_error) == ("r", False)
    assert "^(a+)+$" not in searched


# 3. HTTP: a request that never gets its response holds up no other.


async def test_http_a_request_never_answered_holds_up_no_other(
    hostile_http: Callable[..., tuple[str, subprocess.Popen[str]]],
) -> None:
    url, proc = hostile_http("hang")
    assert proc.stdout is not None
    stdout = proc.stdout
    with no_leaks(processes=False), trio.fail_after(BOUND):
        async with open_mcp_tools({"h": {"type": "http", "url": url}}, call_timeout=30) as tools:
            (tool,) = tools
            async with trio.open_nursery() as nursery:
                nursery.start_soon(tool.run, {"hang": True}, ToolContext("a", tool.name))
                assert await trio.to_thread.run_sync(stdout.readline) == "hung\n"
                out = await tool.run({}, ToolContext("b", tool.name))
                nursery.cancel_scope.cancel()
    assert (out.content, out.is_error) == ("ok", False)


# 4. HTTP has the stdio limits.


async def test_http_300_000_content_items_are_capped(
    hostile_http: Callable[..., tuple[str, Any]],
) -> None:
    url, _ = hostile_http("items", 300_000)
    with no_leaks(processes=False):
        _, (out,), _ = await call_tools({"type": "http", "url": url}, [{}])
    assert "299,000 of 300,000 content items dropped" in text_of(out)
    assert text_of(out).count("i") < 2000


async def test_http_a_20_mb_text_is_refused_in_bounded_memory(
    hostile_http: Callable[..., tuple[str, Any]],
) -> None:
    url, _ = hostile_http("huge", 20_000_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    with no_leaks(processes=False):
        _, (out,), _ = await call_tools({"type": "http", "url": url}, [{}])
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert out.is_error
    assert "over the limit" in text_of(out)
    assert grown < 64 * 1024, f"peak memory grew by {grown} KiB"


async def test_http_20_000_progress_notifications_end_the_call(
    hostile_http: Callable[..., tuple[str, Any]],
) -> None:
    url, _ = hostile_http("progress", 20_000)
    with no_leaks(processes=False) as check:
        _, (out,), progress = await call_tools({"type": "http", "url": url}, [{}])
    assert out.content == "done"
    assert 0 < len(progress) <= MAX_NOTIFICATIONS
    assert check.spawned < 5000


# 5. An id spelled as a string ("3") names request 3, as the SDK reads it.


async def test_a_string_id_answer_that_is_not_utf8_ends_its_call(raw_server: Raw) -> None:
    line = '{"jsonrpc": "2.0", "id": "{id}", "result": {"content": [{"type": "text", "text": "a\xffb"}]}}'
    entry = raw_server({"call": "raw", "line": line})
    with no_leaks():
        _, (out,), _ = await call_tools(entry, [{}], call_timeout=BOUND / 2)
    assert out.is_error
    assert "not valid UTF-8" in text_of(out)


async def test_300_000_items_under_a_string_id_are_capped(raw_server: Raw) -> None:
    items = [{"type": "text", "text": "i"}] * 300_000
    line = '{"jsonrpc": "2.0", "id": "{id}", "result": ' + json.dumps({"content": items}) + "}"
    entry = raw_server({"call": "raw", "line": line})
    with no_leaks():
        _, (out,), _ = await call_tools(entry, [{}])
    assert "299,000 of 300,000 content items dropped" in text_of(out)


spellings = st.one_of(
    st.integers(-3, 12),
    st.integers(-3, 12).map(str),
    st.sampled_from([" 7", "07", "+7", "7_0", "\u0667", "x", "", "7.0"]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)


@settings(max_examples=300)
@given(rid=spellings)
def test_any_id_spelling_names_the_request_the_sdk_would_match(rid: Any) -> None:
    reader = Reader("s")
    reader.sent(mcp.types.JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/call", params={}))
    reader.sent(mcp.types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params={}))
    line = b'{"jsonrpc": "2.0", "id": ' + json.dumps(rid).encode() + b', "result": "\xff"}'
    message = reader.read(line)
    # The SDK keeps a string id verbatim and matches it after coerce_request_id.
    sdk_id: Any = None
    if isinstance(rid, str | int) and not isinstance(rid, bool):
        sdk_id = mcp.shared.dispatcher.coerce_request_id(rid)
    if sdk_id in (7, 1) and not isinstance(sdk_id, bool):
        assert isinstance(message, mcp.shared.message.SessionMessage)
        assert message.message.id == sdk_id  # pyright: ignore[reportAttributeAccessIssue]
        assert set(reader.in_flight) == {7, 1} - {sdk_id}
    else:
        assert isinstance(message, Exception)
        assert set(reader.in_flight) == {7, 1}


# 6. Every flood is capped, whatever its kind.


async def test_unsolicited_answers_do_not_reset_the_log_cap() -> None:
    with no_leaks() as check:
        _, (out,), _ = await call_tools(flood_entry("log_bypass", 20_000), [{}])
    assert out.content == "done"
    assert check.spawned < 5000


async def test_any_kind_of_notification_is_capped() -> None:
    with no_leaks() as check:
        _, (out,), _ = await call_tools(flood_entry("notes", 20_000), [{}])
    assert out.content == "done"
    assert check.spawned < 5000


async def test_the_servers_requests_are_capped() -> None:
    with no_leaks() as check:
        _, (out,), _ = await call_tools(flood_entry("pings", 20_000), [{}])
    assert out.content == "done"
    assert check.spawned < 5000


# 7. A few huge schemas are checked off the loop, as many small ones are.


async def test_a_huge_schema_is_checked_in_a_worker_thread(
    raw_server: Raw, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked_in: list[threading.Thread] = []
    problem = _open.schema_problem

    def recording(schema: Any) -> str | None:
        checked_in.append(threading.current_thread())
        return problem(schema)

    monkeypatch.setattr(_open, "schema_problem", recording)
    props = {f"p{i}": {"type": "string", "description": "d" * 50} for i in range(3000)}
    big = {"type": "object", "properties": props}
    entry = raw_server({"tools": [{"name": "t", "inputSchema": big}], "call": "text"})
    with no_leaks():
        names, _, _ = await call_tools(entry, [])
    assert names == ["mcp__s__t"]
    assert checked_in
    assert threading.main_thread() not in checked_in
