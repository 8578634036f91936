"""The leak helper itself: it finds each kind of leak, and passes clean code."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from trio_agent import AnthropicClient, RetryPolicy, TextBlock, UserMessage
from trio_agent.testing import (
    LeakCheck,
    LeakError,
    Leaks,
    ScriptedAnswer,
    ScriptedModel,
    Timing,
    no_leaks,
)

linux_only = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


async def test_clean_stream_has_no_leaks(autojump_clock: Any) -> None:
    model = ScriptedModel([ScriptedAnswer(blocks=[TextBlock("hello")])])
    async with httpx.AsyncClient(transport=model.transport()) as http:
        client = AnthropicClient(api_key="k", http_client=http, retry=RetryPolicy.never())
        with no_leaks(models=[model], http_clients=[http]) as check:
            async with client.stream(
                model="m", max_tokens=10, messages=[UserMessage("hi")]
            ) as items:
                received = [item async for item in items]
        assert received
        assert check.spawned == 0  # the stream is read in the consumer's own task


async def forever() -> None:
    await trio.sleep_forever()


async def test_a_task_left_running_is_found() -> None:
    check = LeakCheck(processes=False, fds=False)
    async with trio.open_nursery() as nursery:
        with pytest.raises(LeakError, match="forever"), check:  # noqa: PT012
            nursery.start_soon(forever)
            await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()


async def test_an_unclosed_scripted_stream_is_found(autojump_clock: Any) -> None:
    model = ScriptedModel(
        [ScriptedAnswer(blocks=[TextBlock("x" * 100)], timing=Timing(token_delay=1))]
    )
    async with httpx.AsyncClient(transport=model.transport()) as http:
        response: httpx.Response | None = None
        with (
            pytest.raises(LeakError, match="open_streams=1"),
            no_leaks(models=[model], fds=False, processes=False),
        ):
            response = await http.send(
                http.build_request("POST", "http://t/v1/messages", json={}), stream=True
            )
        assert response is not None
        await response.aclose()
    assert LeakCheck(models=[model]).leaks().open_streams == 0


@linux_only
def test_a_child_process_left_running_is_found() -> None:
    check = LeakCheck(fds=False, grace=0.05)
    proc: subprocess.Popen[bytes] | None = None
    with pytest.raises(LeakError, match="sleep"), check:
        proc = subprocess.Popen(["sleep", "30"])
    assert proc is not None
    proc.kill()
    proc.wait()
    assert not check.leaks().processes


@linux_only
def test_an_orphaned_grandchild_is_found_when_adopting() -> None:
    check = LeakCheck(fds=False, adopt_orphans=True, grace=0.05)
    with pytest.raises(LeakError, match="sleep") as info, check:
        # bash starts sleep in the background and exits: sleep is orphaned.
        subprocess.run(
            ["bash", "-c", "sleep 30 >/dev/null 2>&1 &"], check=True, stdout=subprocess.DEVNULL
        )
    pid = check.leaks().processes[0][0]
    os.kill(pid, 9)
    assert "processes" in str(info.value)
    assert not check.leaks().processes  # the zombie is reaped, not counted


@linux_only
def test_an_open_file_is_found(tmp_path: Any) -> None:
    check = LeakCheck(processes=False)
    with pytest.raises(LeakError, match=r"leak\.txt"), check:
        f = open(tmp_path / "leak.txt", "w")  # noqa: SIM115
    f.close()
    assert not check.leaks().fds


def test_around_trio_run_as_an_instrument() -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep, 1)

    check = LeakCheck()
    with check:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0), instruments=[check])
    assert check.spawned >= 2


def test_leaks_value() -> None:
    assert not Leaks()
    leaks = Leaks(
        tasks=("a",), open_streams=2, busy_connections=1, processes=((1, "x"),), fds=((3, "f"),)
    )
    assert leaks
    assert leaks.count == 6


def test_an_exception_in_the_block_is_not_masked() -> None:
    with pytest.raises(ZeroDivisionError), no_leaks():
        _ = 1 / 0
    assert sys.platform  # reached


async def test_busy_http_connection_is_found() -> None:
    # A real loopback server, so httpx's pool holds a real connection.
    from trio_agent.testing import serve_scripted_model

    model = ScriptedModel(
        [ScriptedAnswer(blocks=[TextBlock("slow " * 50)], timing=Timing(token_delay=0.01))]
    )
    async with serve_scripted_model(model) as base_url, httpx.AsyncClient() as http:
        check = LeakCheck(models=[model], http_clients=[http], processes=False, fds=False)
        with pytest.raises(LeakError, match="busy_connections=1"), check:
            response = await http.send(
                http.build_request("POST", f"{base_url}/v1/messages", json={}), stream=True
            )
        await response.aclose()
        assert check.leaks().busy_connections == 0
