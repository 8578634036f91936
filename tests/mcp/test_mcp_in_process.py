"""In-process MCP servers in Trio's virtual time: timeouts, overlap, the property
harness over MCP tools, and a whole turn through ``query()`` with permissions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AnthropicClient,
    Deny,
    PermissionRules,
    RetryPolicy,
    TextBlock,
    Tool,
    ToolContext,
    ToolResultBlock,
    ToolUseBlock,
    TurnEnd,
    TurnEndReason,
    TurnOptions,
    UserMessage,
    query,
)
from trio_agent.mcp import MCPProgress, mcp_tool_info, open_mcp_tools
from trio_agent.testing import (
    ScriptedAnswer,
    ScriptedModel,
    check_tool_run,
    no_leaks,
    run_tool_calls,
    tool_calls,
)


async def test_calls_in_virtual_time(
    autojump_clock: Any, server_factory: Any, run_calls: Any
) -> None:
    with no_leaks():
        async with open_mcp_tools(
            {"p": server_factory()}, call_timeout=100, max_result_chars=50
        ) as tools:
            start = trio.current_time()
            ran = await run_calls(
                tools,
                [
                    *[("mcp__p__rendezvous", {"key": "v", "count": 2})] * 2,
                    ("mcp__p__sleep", {"seconds": 30}),
                    ("mcp__p__block", {"key": "t"}),  # runs into the call timeout
                    ("mcp__p__big", {"size": 1000}),
                ],
            )
            # The read-only calls ran side by side; the block call waited its turn
            # (not safe) and timed out after 100 virtual seconds.
            assert trio.current_time() - start == 130
            r = ran.results
            assert r["call_0"].content == r["call_1"].content == "2 met"
            assert r["call_2"].content == "slept 30.0"
            assert r["call_3"].is_error
            assert "did not answer within 100 s" in str(r["call_3"].content)
            assert str(r["call_4"].content).startswith("x" * 50 + "\n[output truncated: 950")
            assert [p.data for p in ran.progress if p.tool_use_id == "call_2"] == [
                MCPProgress(0, None, "started")
            ]
            # The timeout sent the MCP cancellation.
            after = await run_calls(tools, [("mcp__p__wait_cancelled", {"key": "t"})])
            assert after.results["call_0"].content == "t was cancelled"


# -- the property harness over MCP tools -----------------------------------------------

INPUTS = {
    "mcp__p__echo": st.fixed_dictionaries({"text": st.text(max_size=20)}),
    "mcp__p__count": st.fixed_dictionaries({"steps": st.integers(0, 4)}),
    "mcp__p__sleep": st.fixed_dictionaries({"seconds": st.floats(0, 5)}),
    "mcp__p__fail": st.fixed_dictionaries({"message": st.text(min_size=1, max_size=10)}),
    "mcp__p__big": st.fixed_dictionaries({"size": st.integers(0, 100)}),
    "mcp__p__wipe": st.fixed_dictionaries({"path": st.text(max_size=10)}),
}


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_mcp_tools_keep_every_executor_invariant(
    per_call_mcp_tools: list[Tool], data: st.DataObject
) -> None:
    calls = data.draw(tool_calls(per_call_mcp_tools, inputs=INPUTS, max_calls=6))
    run = run_tool_calls(per_call_mcp_tools, calls, max_concurrency=3)
    check_tool_run(run)
    # The calls really went through MCP: every echo that ran to its end has the
    # server's answer.
    echoed = [
        (call.block.input.get("text"), run.result(i))
        for i, call in enumerate(calls.calls)
        if call.block.name == "mcp__p__echo"
    ]
    finished = [(text, r) for text, r in echoed if r is not None and r.abort_reason is None]
    assert all(r.content == text for text, r in finished if r.started)


# -- a turn through query() ------------------------------------------------------------


async def test_a_turn_calls_mcp_tools_under_permission_rules(
    autojump_clock: Any, server_factory: Any
) -> None:
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[
                    TextBlock("Let me look."),
                    ToolUseBlock("t1", "mcp__p__echo", {"text": "hi"}),
                    ToolUseBlock("t2", "mcp__p__wipe", {"path": "/"}),
                    ToolUseBlock("t3", "mcp__p__count", {"steps": 2}),
                ]
            ),
            ScriptedAnswer(blocks=[TextBlock("Done.")]),
        ]
    )
    asked: list[str] = []

    async def ask(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Deny:
        # The MCP hints are available to the callback: refuse destructive tools.
        info = mcp_tool_info(tool)
        assert info is not None
        assert info.is_destructive
        asked.append(tool.name)
        return Deny(f"{tool.name} is destructive; the user said no.")

    rules = PermissionRules(allow=["mcp__p__echo", "mcp__p__count"], ask_callback=ask)
    client = AnthropicClient(
        api_key="k",
        base_url="http://scripted",
        http_client=httpx.AsyncClient(transport=model.transport()),
        retry=RetryPolicy(max_retries=0),
    )
    with no_leaks(models=[model]):
        async with (
            open_mcp_tools({"p": server_factory()}) as tools,
            query(
                client,
                [UserMessage("Go.")],
                tools=tools,
                model="m",
                max_tokens=100,
                options=TurnOptions(can_use_tool=rules),
            ) as events,
        ):
            seen = [event async for event in events]
    end = seen[-1]
    assert isinstance(end, TurnEnd)
    assert end.reason is TurnEndReason.COMPLETED
    assert asked == ["mcp__p__wipe"]
    results = {
        b.tool_use_id: b
        for m in end.messages
        if isinstance(m, UserMessage) and not isinstance(m.content, str)
        for b in m.content
        if isinstance(b, ToolResultBlock)
    }
    assert results["t1"].content == "hi"
    assert results["t2"].is_error
    assert "destructive" in str(results["t2"].content)
    assert results["t3"].content == "counted 2"
    # The tools were offered to the model with their MCP names and schemas.
    offered = {t["name"]: t for t in model.requests[0].body["tools"]}
    assert offered["mcp__p__echo"]["input_schema"]["required"] == ["text"]
