"""The pytest plugin (entry point pytest11): its fixtures used here, in this suite, and
a user's test file recorded with ``--record`` then replayed, in real pytest processes.

``test_weather_agent`` replays ``cassettes/test_cassette_plugin/test_weather_agent.json``,
recorded by ``pytest --record tests/testing/test_cassette_plugin.py::test_weather_agent``
from the scripted model on a loopback socket (standing in for the API).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agent import AnthropicClient, RetryPolicy, Session, TextBlock, ToolUseBlock, tool
from trio_agent.testing import ScriptedAnswer, ScriptedModel, serve_scripted_model

pytestmark = pytest.mark.filterwarnings("error")


async def test_the_scripted_model_fixture_is_a_fresh_model(
    scripted_model: ScriptedModel, autojump_clock: Any
) -> None:
    assert isinstance(scripted_model, ScriptedModel)
    assert scripted_model.remaining == ()
    scripted_model.append(ScriptedAnswer(blocks=[TextBlock("hi")]))
    session = Session(scripted_model.client(), [], model="claude-test")
    async with session.submit("hello") as events:
        async for _ in events:
            pass
    assert len(scripted_model.requests) == 1
    assert session.messages[-1].text == "hi"  # pyright: ignore[reportAttributeAccessIssue]


def _weather_answers() -> list[ScriptedAnswer]:
    return [
        ScriptedAnswer(
            blocks=[TextBlock("Checking."), ToolUseBlock("toolu_w", "weather", {"city": "Oslo"})],
            stop_reason="tool_use",
        ),
        ScriptedAnswer(blocks=[TextBlock("Snow in Oslo.")]),
    ]


@tool
async def weather(city: str) -> str:
    "The weather in a city."
    await trio.sleep(0.1)
    return f"snow in {city}"


@pytest.mark.cassette(tools="replay")
async def test_weather_agent(cassette: Any, cassette_clock: Any) -> None:
    async with contextlib_server(cassette.recording) as url:
        real = AnthropicClient(api_key="sk-test", base_url=url, retry=RetryPolicy.never())
        async with cassette.client(real) as client:
            session = Session(client, cassette.tools([weather]), model="claude-test")
            async with session.submit("weather in Oslo?") as events:
                async for _ in events:
                    pass
    assert session.messages[-1].text == "Snow in Oslo."  # pyright: ignore[reportAttributeAccessIssue]
    if not cassette.recording:
        assert cassette.model is not None
        assert len(cassette.model.requests) == 2
        assert cassette.model.tool_mode == "replay"
        assert cassette.model.cassette is not None
        # the tool was timed when recorded (it sleeps 0.1 s); its replay took as long
        duration = cassette.model.cassette.tool_outputs["toolu_w"].duration
        assert duration is not None
        assert duration >= 0.1


def contextlib_server(recording: bool) -> Any:
    """The stand-in API on 127.0.0.1 while recording; no server at all when replaying."""
    import contextlib

    if recording:
        return serve_scripted_model(ScriptedModel(_weather_answers()))
    return contextlib.nullcontext("http://127.0.0.1:9")  # nothing listens: replay is offline


USER_TEST = """
import contextlib

import pytest
import trio
from trio_agent import AnthropicClient, RetryPolicy, Session, TextBlock
from trio_agent.testing import ScriptedAnswer, ScriptedModel, Timing, serve_scripted_model


async def _ask(cassette, prompt):
    server = (
        serve_scripted_model(ScriptedModel([ScriptedAnswer(
            blocks=[TextBlock("recorded answer")], timing=Timing(token_delay=0.5))]))
        if cassette.recording else contextlib.nullcontext("http://127.0.0.1:9")
    )
    async with server as url:
        real = AnthropicClient(api_key="sk-ant-SECRET", base_url=url, retry=RetryPolicy.never())
        async with cassette.client(real) as client:
            session = Session(client, [], model="claude-test")
            async with session.submit(prompt) as events:
                async for _ in events:
                    pass
    return session


async def test_agent(cassette, cassette_clock):
    start = trio.current_time()
    session = await _ask(cassette, "hello there")
    assert session.messages[-1].text == "recorded answer"
    print("ELAPSED", trio.current_time() - start, "RECORDING", cassette.recording)


@pytest.mark.cassette(path="cassettes/test_user/test_agent.json")
async def test_changed_prompt(cassette, cassette_clock):
    await _ask(cassette, "hello again")


@pytest.mark.cassette(path="cassettes/never_recorded.json")
async def test_missing(cassette, cassette_clock):
    await _ask(cassette, "hello")


async def test_left_open(scripted_model):
    import httpx

    scripted_model.append(ScriptedAnswer(blocks=[TextBlock("x")]))
    http = httpx.AsyncClient(transport=scripted_model.transport())
    request = http.build_request("POST", "http://m/v1/messages", json={"stream": True})
    response = await http.send(request, stream=True)  # never closed
    assert response.status_code == 200
"""


def _pytest(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_user_test_records_with_record_then_replays(tmp_path: Path) -> None:
    """Two real pytest runs of a user's file: ``--record`` (against a loopback server),
    then a replay without any server: the same prompt passes in virtual time, a changed
    prompt fails naming the field, a cassette never recorded says how to record it."""
    (tmp_path / "pytest.ini").write_text("[pytest]\ntrio_mode = true\n")
    (tmp_path / "test_user.py").write_text(USER_TEST)
    cassette = tmp_path / "cassettes" / "test_user" / "test_agent.json"

    recorded = _pytest(tmp_path, "--record", "-k", "test_agent", "-W", "ignore::ResourceWarning")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "RECORDING True" in recorded.stdout
    text = cassette.read_text()
    assert "SECRET" not in text
    data = json.loads(text)
    assert data["interactions"][0]["request"]["body"]["messages"][0]["content"] == "hello there"
    # recorded in real time: the answer's tokens came 0.5 s apart
    assert sum(c[0] for c in data["interactions"][0]["response"]["chunks"]) >= 0.5

    replayed = _pytest(tmp_path, "-rA", "-W", "ignore::ResourceWarning")
    out = replayed.stdout
    assert replayed.returncode == 1, out + replayed.stderr
    assert (
        "2 failed, 2 passed, 1 error in" in out
    )  # test_left_open: passed, then its teardown error
    # the scripted_model fixture: a response body left open fails the test
    assert "ERROR test_user.py::test_left_open" in out
    assert "1 scripted response bodies were left open" in out
    assert "RECORDING False" in out
    assert "PASSED test_user.py::test_agent" in out
    # the changed prompt: the first differing field, both values
    assert "FAILED test_user.py::test_changed_prompt" in out
    assert "CassetteMismatch" in out
    assert "body.messages[0].content" in out
    assert '"hello there"' in out
    assert '"hello again"' in out
    # never recorded: how to record it
    assert "record it with `pytest --record`" in out
    assert cassette.read_text() == text  # replaying never writes the cassette


async def test_a_replay_that_stops_early_fails_at_teardown(autojump_clock: Any) -> None:
    from trio_agent import TurnOptions
    from trio_agent.testing._pytest_plugin import CassetteFixture

    path = Path(__file__).parent / "cassettes" / "test_cassette_plugin" / "test_weather_agent.json"
    fixture = CassetteFixture(path, recording=False, tool_mode="replay")
    real = AnthropicClient(api_key="sk-test", base_url="http://127.0.0.1:9")
    async with fixture.client(real) as client:
        options = TurnOptions(max_turns=1)  # the second recorded request is never made
        session = Session(client, fixture.tools([weather]), model="claude-test", options=options)
        async with session.submit("weather in Oslo?") as events:
            async for _ in events:
                pass
    assert fixture.model is not None
    assert len(fixture.model.requests) == 1
    with pytest.raises(pytest.fail.Exception, match=r"made 1 requests; .* recorded 2"):
        fixture.check()


def test_the_readme_example_records_then_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's "Record and replay" test, recorded against the scripted model on a
    loopback socket standing in for the API, then replayed in virtual time."""
    import re

    import trio.testing

    import trio_agent
    from trio_agent.testing._pytest_plugin import CassetteFixture

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Record and replay", 1)[1].split("\n## ", 1)[0]
    (example,) = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    namespace: dict[str, Any] = {"__name__": "readme_cassette"}
    exec(compile(example, "README.md", "exec"), namespace)
    test = namespace["test_weather_agent"]
    (mark,) = test.pytestmark
    path = tmp_path / "test_weather_agent.json"
    real = trio_agent.AnthropicClient
    upstream = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[ToolUseBlock("toolu_l", "weather", {"city": "Lyon"})],
                stop_reason="tool_use",
            ),
            ScriptedAnswer(blocks=[TextBlock("Lyon: sunny, 21 °C.")]),
        ]
    )

    async def record() -> None:
        async with serve_scripted_model(upstream) as url:
            monkeypatch.setattr(
                trio_agent, "AnthropicClient", lambda: real(api_key="sk-real", base_url=url)
            )
            await test(CassetteFixture(path, recording=True, tool_mode=mark.kwargs["tools"]), None)

    trio.run(record)
    assert len(upstream.requests) == 2
    assert "sk-real" not in path.read_text()

    monkeypatch.setattr(trio_agent, "AnthropicClient", lambda: real(api_key="sk-other"))
    replay = CassetteFixture(path, recording=False, tool_mode=mark.kwargs["tools"])
    trio.run(test, replay, None, clock=trio.testing.MockClock(autojump_threshold=0))
    replay.check()
    assert replay.model is not None
    assert len(replay.model.requests) == 2
    assert replay.model.tool_mode == "replay"


def test_a_replayed_tool_takes_as_long_as_it_did(tmp_path: Path) -> None:
    """Recorded in real time through the fixture (the tool timed), replayed with
    tools="replay" in virtual time: the same timeline, the tool's run as long."""
    import trio.testing

    from trio_agent._cli._timeline import TurnRecorder, instrument
    from trio_agent.testing._pytest_plugin import CassetteFixture

    path = tmp_path / "timed.json"

    @tool
    async def slow(city: str) -> str:
        "Slow."
        await trio.sleep(0.3)
        return "done"

    answers = [
        ScriptedAnswer(
            blocks=[ToolUseBlock("toolu_s", "slow", {"city": "x"})], stop_reason="tool_use"
        ),
        ScriptedAnswer(blocks=[TextBlock("ok")]),
    ]

    async def turn(fixture: CassetteFixture, url: str) -> TurnRecorder:
        recorder = TurnRecorder(trio.current_time)
        real = AnthropicClient(api_key="k", base_url=url, retry=RetryPolicy.never())
        async with fixture.client(real) as client:
            tools = instrument(fixture.tools([slow]), recorder)
            session = Session(client, tools, model="claude-test")
            async with session.submit("go") as events:
                async for event in events:
                    recorder.feed(event)
        return recorder

    async def record() -> TurnRecorder:
        async with serve_scripted_model(ScriptedModel(answers)) as url:
            return await turn(CassetteFixture(path, recording=True, tool_mode="run"), url)

    recorded = trio.run(record)
    data = json.loads(path.read_text())
    duration = data["tool_outputs"]["toolu_s"]["duration"]
    assert duration >= 0.3

    fixture = CassetteFixture(path, recording=False, tool_mode="replay")
    replayed = trio.run(
        turn, fixture, "http://127.0.0.1:9", clock=trio.testing.MockClock(autojump_threshold=0)
    )
    fixture.check()
    row = replayed.tools["toolu_s"]
    assert row.started_at is not None
    assert row.ended_at is not None
    assert row.ended_at - row.started_at == pytest.approx(duration, abs=1e-9)
    shape = [[w for _, w in r.timeline(c)] for r in (recorded,) for c in r.calls]
    assert [[w for _, w in replayed.timeline(c)] for c in replayed.calls] == shape
