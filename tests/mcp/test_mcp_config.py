"""``.mcp.json`` parsing, tool names and result mapping: pure, no server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import OpaqueBlock, TextBlock, TrioAgentError
from trio_agent.mcp import (
    HttpServerConfig,
    MCPConfigError,
    StdioServerConfig,
    load_mcp_config,
    mcp_tool_name,
    open_mcp_tools,
    parse_server_config,
)
from trio_agent.mcp._convert import tool_output

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def test_load_a_claude_code_file(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {
                        "command": "npx",
                        "args": ["-y", "server", "${ROOT}"],
                        "env": {"TOKEN": "${TOKEN}", "MODE": "${MODE:-fast}"},
                    },
                    "web": {
                        "type": "http",
                        "url": "https://${HOST}/mcp",
                        "headers": {"Authorization": "Bearer ${TOKEN}"},
                        "timeout": 12,
                    },
                }
            }
        )
    )
    env = {"ROOT": "/srv", "TOKEN": "t0k", "HOST": "example.com"}
    servers = load_mcp_config(path, env=env)
    assert servers == {
        "files": StdioServerConfig(
            command="npx", args=("-y", "server", "/srv"), env={"TOKEN": "t0k", "MODE": "fast"}
        ),
        "web": HttpServerConfig(
            url="https://example.com/mcp", headers={"Authorization": "Bearer t0k"}, timeout=12.0
        ),
    }
    # Header values (secrets) are not in the repr.
    assert "t0k" not in repr(servers["web"])


def test_a_missing_variable_names_the_server_and_field(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(
        json.dumps({"mcpServers": {"web": {"type": "http", "url": "http://h/${NOPE}"}}})
    )
    with pytest.raises(MCPConfigError, match=r"^web\.url: environment variable 'NOPE'") as info:
        load_mcp_config(path, env={})
    assert (info.value.server, info.value.field) == ("web", "url")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "not valid JSON"),
        ("[]", 'no "mcpServers"'),
        ('{"mcpServers": []}', "mcpServers must be an object"),
        ('{"mcpServers": {"s": {"type": "sse", "url": "http://h"}}}', r"^s\.type: unsupported"),
        ('{"mcpServers": {"s": {"args": []}}}', r"^s\.command: is required"),
        ('{"mcpServers": {"s": {"command": "x", "env": {"A": 1}}}}', r"^s\.env: entry 'A'"),
        ('{"mcpServers": {"s": {"url": "ftp://h"}}}', r"^s\.url: must be an http"),
        ('{"mcpServers": {"s": {"command": "x", "timeout": -1}}}', r"^s\.timeout"),
        ("[" * 100_000, "not valid JSON"),
    ],
)
def test_a_malformed_file_is_a_typed_error(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(text)
    with pytest.raises(MCPConfigError, match=match):
        load_mcp_config(path, env={})


def test_an_unreadable_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(MCPConfigError, match="cannot read"):
        load_mcp_config(tmp_path / "missing.json")


@settings(max_examples=200)
@given(raw=JSON, name=st.text(min_size=1, max_size=5))
def test_any_json_entry_parses_or_is_a_typed_error(raw: Any, name: str) -> None:
    outcome = _parse(name, raw)
    if isinstance(outcome, MCPConfigError):
        assert outcome.server == name
        assert isinstance(outcome, TrioAgentError)
    else:
        assert isinstance(outcome, StdioServerConfig | HttpServerConfig)


def _parse(name: str, raw: Any) -> Any:
    """The config, or the MCPConfigError (any other exception fails the test)."""
    try:
        return parse_server_config(name, raw, env={})
    except MCPConfigError as exc:
        return exc


@given(
    raw=st.fixed_dictionaries(
        {"command": st.just("x")},
        optional={"args": JSON, "env": JSON, "cwd": JSON, "timeout": JSON, "type": JSON},
    )
)
def test_wrong_types_in_a_stdio_entry_name_the_field(raw: dict[str, Any]) -> None:
    outcome = _parse("s", raw)
    if isinstance(outcome, MCPConfigError):
        assert outcome.field is not None
        assert outcome.field.split(".")[0] in raw


def test_open_mcp_tools_checks_every_entry_before_starting() -> None:
    with pytest.raises(MCPConfigError, match=r"^b\.command"):
        open_mcp_tools({"a": {"command": "true"}, "b": {"command": 3}})
    with pytest.raises(ValueError, match="call_timeout"):
        open_mcp_tools({}, call_timeout=0)
    with pytest.raises(ValueError, match="max_result_chars"):
        open_mcp_tools({}, max_result_chars=True)


_API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@given(server=st.text(min_size=1), tool=st.text(min_size=1))
def test_tool_names_are_what_the_api_accepts(server: str, tool: str) -> None:
    name = mcp_tool_name(server, tool)
    assert _API_NAME.match(name)
    assert name.startswith("mcp__")
    if re.fullmatch(r"[a-zA-Z0-9_-]*", server + tool) and len(f"mcp__{server}__{tool}") <= 64:
        assert name == f"mcp__{server}__{tool}"


def test_long_names_are_cut_but_stay_apart() -> None:
    first, second = mcp_tool_name("s", "t" * 80 + "a"), mcp_tool_name("s", "t" * 80 + "b")
    assert len(first) == len(second) == 64
    assert first != second


TEXT_ITEMS = st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=50))
ITEMS = st.one_of(
    TEXT_ITEMS,
    st.just({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
    st.just({"type": "image", "data": "AAAA", "mimeType": "image/tiff"}),
    st.just({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}),
    st.just({"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}}),
    st.just({"type": "resource", "resource": {"uri": "file:///b", "blob": "AAAA"}}),
    st.just({"type": "resource_link", "uri": "file:///c", "name": "c"}),
    JSON,
)


@given(items=st.lists(ITEMS, max_size=6), error=JSON, cap=st.integers(1, 80))
def test_results_map_to_tool_output(items: list[Any], error: Any, cap: int) -> None:
    output = tool_output({"content": items, "isError": error}, max_chars=cap)
    assert output.is_error is (error is True)
    blocks = (
        [TextBlock(output.content)] if isinstance(output.content, str) else list(output.content)
    )
    texts = [b.text for b in blocks if isinstance(b, TextBlock)]
    truncated = any("[output truncated" in t for t in texts)
    kept = sum(len(t) for t in texts if "[output truncated" not in t)
    assert kept <= cap or not truncated
    images = [b for b in blocks if isinstance(b, OpaqueBlock)]
    assert all(b.to_api()["source"]["media_type"] == "image/png" for b in images)
    assert len(images) == sum(
        1 for i in items if isinstance(i, dict) and i.get("mimeType") == "image/png"
    )


def test_structured_content_alone_is_shown_as_json() -> None:
    output = tool_output({"content": [], "structuredContent": {"a": 1}})
    assert output.content == '{"a": 1}'
