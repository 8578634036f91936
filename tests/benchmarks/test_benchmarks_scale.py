"""The in-process scale run behind ``scale_10k``: its model answers as the loopback
server does, and every turn completes after all of them were open at once."""

from __future__ import annotations

import json

import httpx
import trio

from benchmarks._scale import _child, _InProcessModel
from benchmarks._server import Router


def _request(assistant_turns: int) -> httpx.Request:
    messages: list[dict[str, object]] = [{"role": "user", "content": "go"}]
    for _ in range(assistant_turns):
        messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    body = {"stream": True, "model": "m", "max_tokens": 8, "messages": messages}
    return httpx.Request(
        "POST", "http://scripted/s/scale/1.0/v1/messages", content=json.dumps(body).encode()
    )


def test_in_process_model_sends_what_the_server_sends() -> None:
    async def main() -> None:
        model, router = _InProcessModel(), Router()
        for turns in (0, 1, 2):
            request = _request(turns)
            served = router.respond(
                request.method, request.url.path, list(request.headers.items()), request.content
            )
            expected = b"".join(data for _, data in served.plan.schedule())
            response = await model.handle_async_request(request)
            assert response.status_code == served.status == 200
            assert response.headers["content-type"] == dict(served.headers)["content-type"]
            assert b"".join([chunk async for chunk in response.aiter_raw()]) == expected
            assert expected.count(b'"type":"tool_use"') == (2 if turns == 0 else 0)

    trio.run(main)


def test_every_turn_completes_after_all_were_open_at_once() -> None:
    agents = 30
    result = _child(agents, "in-process", "session", in_process=True)
    assert result["errors"] == {}
    assert result["turns"] == agents
    # Each turn arrived in its first tool call and waited there until the last one did.
    assert result["open_at_release"] == agents
    assert result["peak_open"] == agents
    assert result["sessions_kept"] == agents
    assert result["peak_rss_kb"] >= result["rss_at_release_kb"] > 0


def test_a_warm_measurement_leaves_its_warm_up_turn_out() -> None:
    """``warm``: one turn of the contestant runs first, alone, and is not counted."""
    agents = 5
    for mode in ("session", "after"):
        result = _child(
            agents, "in-process", mode, in_process=True, barrier=False, share_tools=True, warm=True
        )
        assert result["errors"] == {}
        assert result["turns"] == agents
        assert result["cpu"] > 0
