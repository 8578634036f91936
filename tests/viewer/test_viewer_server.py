"""The viewer's server without a browser: the Host-header check (DNS rebinding), the
loopback-only listener, read-only answers, the static assets, a durable database read
read-only, hostile session files, and the ``trio-agent view`` command itself."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import (
    AssistantMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
)
from trio_agent._viewer import DatabaseSource, Library, ViewerApp, read_session
from trio_agent._viewer._html import list_page, session_page
from trio_agent.lowlevel import TranscriptWriter


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    writer = TranscriptWriter.open(path, model="m")
    writer.append(UserMessage("hello"))
    writer.append(
        AssistantMessage(
            id="msg_1",
            model="m",
            content=[TextBlock("hi")],
            stop_reason="end_turn",
            usage=Usage(input_tokens=3, output_tokens=2),
        )
    )
    writer.close()
    return path


async def test_other_host_headers_are_refused(viewer: Any, transcript: Path) -> None:
    async with viewer([transcript]) as url, httpx.AsyncClient() as http:
        port = url.rsplit(":", 1)[1]
        ok = await http.get(url + "/")
        assert ok.status_code == 200
        assert "hello" in ok.text
        assert (await http.get(url + "/", headers={"host": f"localhost:{port}"})).status_code == 200
        for host in (
            f"attacker.example:{port}",  # a rebinding page's own name
            "attacker.example",
            f"127.0.0.1:{int(port) + 1}",
            f"127.0.0.1.attacker.example:{port}",
            "",
        ):
            refused = await http.get(url + "/", headers={"host": host})
            assert refused.status_code == 403, host
            assert "hello" not in refused.text
            assert "own address" in refused.text


async def test_it_listens_on_127_0_0_1_only(viewer: Any, transcript: Path) -> None:
    async with viewer([transcript]) as url:
        port = int(url.rsplit(":", 1)[1])
        assert url == f"http://127.0.0.1:{port}"
        # another loopback address of this machine: nothing listens there
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.2", port)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.aclose()


async def test_it_is_read_only(viewer: Any, transcript: Path) -> None:
    before = transcript.read_bytes()
    async with viewer([transcript]) as url, httpx.AsyncClient() as http:
        home = await http.get(url + "/")
        session = home.text.split('href="/s/', 1)[1].split('"', 1)[0]
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            answer = await http.request(method, f"{url}/s/{session}", content=b"x")
            assert answer.status_code == 405
            assert answer.headers["allow"] == "GET, HEAD"
        page = await http.get(f"{url}/s/{session}")
        assert page.status_code == 200
        head = await http.head(f"{url}/s/{session}")
        assert head.status_code == 200
        assert head.content == b""
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "default-src 'none'" in csp
        assert page.headers["x-frame-options"] == "DENY"
    assert transcript.read_bytes() == before


async def test_static_assets_ship_in_the_package(viewer: Any, transcript: Path) -> None:
    async with viewer([transcript]) as url, httpx.AsyncClient() as http:
        css = await http.get(url + "/static/viewer.css")
        js = await http.get(url + "/static/viewer.js")
        assert css.status_code == 200
        assert css.headers["content-type"].startswith("text/css")
        assert js.status_code == 200
        assert "data-live" in js.text
        for path in ("/static/../_app.py", "/static/viewer.py", "/static/", "/nothing"):
            assert (await http.get(url + path)).status_code == 404
        assert "https://" not in css.text + js.text  # nothing from the network


async def test_live_versions_change_as_the_file_grows(viewer: Any, transcript: Path) -> None:
    async with viewer([transcript]) as url, httpx.AsyncClient() as http:
        home = await http.get(url + "/")
        session = home.text.split('href="/s/', 1)[1].split('"', 1)[0]
        first = (await http.get(f"{url}/api/session/{session}")).json()["version"]
        listed = (await http.get(f"{url}/api/list")).json()["version"]
        with transcript.open("ab") as f:
            f.write(b'{"type":"user","message":{"role":"user","content":"more"},"ts":1}\n')
        assert (await http.get(f"{url}/api/session/{session}")).json()["version"] != first
        assert (await http.get(f"{url}/api/list")).json()["version"] != listed
        assert (await http.get(f"{url}/api/session/nosuch")).status_code == 404


def _durable_message(question: str) -> list[Any]:
    return [
        UserMessage(question),
        AssistantMessage(
            id=f"msg_{question}",
            model="m",
            content=[ToolUseBlock("t1", "Read", {"file_path": "x"})],
            stop_reason="tool_use",
            usage=Usage(input_tokens=7, output_tokens=1),
        ),
        UserMessage([ToolResultBlock("t1", "file body")]),
    ]


def test_a_durable_database_is_listed_read_only_newest_first(tmp_path: Path) -> None:
    import sqlalchemy as sa

    from trio_agent.durable import SqlSessionStore

    db = tmp_path / "agents.sqlite"
    store = SqlSessionStore.connect(f"sqlite:///{db}")
    store.append("alice", _durable_message("alice's question"))
    store.append("bob", _durable_message("bob's question"))
    with store.engine.begin() as conn:  # two committed turns, as DBOS records them
        conn.execute(
            sa.text("CREATE TABLE workflow_status (workflow_uuid TEXT, updated_at INTEGER)")
        )
        conn.execute(
            sa.text(
                "INSERT INTO workflow_status VALUES ('wa', 1700000000000), ('wb', 1800000000000)"
            )
        )
        for turn, sid in (("wa", "alice"), ("wb", "bob")):
            conn.execute(
                sa.text("INSERT INTO trio_agent_turns VALUES (:t, :s, :summary)"),
                {"t": turn, "s": sid, "summary": json.dumps({"reason": "completed"})},
            )
    store.close()
    before = db.read_bytes()
    source = DatabaseSource(f"sqlite:///{db}")
    try:
        views = {v.where: v for v in Library([], source).sessions()}
        alice, bob = views["database:alice"], views["database:bob"]
        assert alice.title == "alice's question"
        assert alice.input_tokens == 7
        assert alice.end == "completed"
        assert alice.items[1].blocks[0]["result"] == {"content": "file body", "is_error": False}
        assert (alice.updated, bob.updated) == (1700000000.0, 1800000000.0)
        page = list_page(list(views.values()), "v")
        assert page.index("bob&#x27;s question") < page.index("alice&#x27;s question")
        with pytest.raises(sa.exc.OperationalError, match="readonly"), source.engine.begin() as c:
            c.execute(sa.text("DELETE FROM trio_agent_messages"))
        assert db.read_bytes() == before  # viewing wrote nothing
        # the database changes (another turn's messages): the page's version moves on
        writer = SqlSessionStore.connect(f"sqlite:///{db}")
        writer.append("alice", [UserMessage("a follow-up")])
        writer.close()
        again = {v.where: v for v in Library([], source).sessions()}["database:alice"]
        assert again.version != alice.version
        assert again.items[-1].text == "a follow-up"
    finally:
        source.close()


_TEXT = st.lists(
    st.characters()
    | st.sampled_from(
        ["<script>", "</pre>", "\"'", "<img src=x onerror=alert(1)>", "&amp;", "\udcff"]
    ),
    max_size=12,
).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


def _record(kind: str, payload: Any) -> dict[str, Any]:
    return {"type": kind, **payload} if isinstance(payload, dict) else {"type": kind, "x": payload}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.one_of(
            st.builds(
                _record,
                st.sampled_from(
                    [
                        "header",
                        "user",
                        "assistant",
                        "history",
                        "pending",
                        "TurnEnd",
                        "Timeline",
                        "AssistantMessage",
                    ]
                ),
                _JSON,
            ),
            st.builds(lambda t: {"type": "user", "message": {"role": "user", "content": t}}, _TEXT),
            st.builds(
                lambda t, n: {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "id": t,
                        "model": t,
                        "content": [
                            {"type": "text", "text": t},
                            {"type": "tool_use", "id": t, "name": t, "input": {"k": t}},
                        ],
                        "usage": {"input_tokens": n},
                    },
                },
                _TEXT,
                st.integers(),
            ),
            _JSON,
        ),
        max_size=8,
    ),
    torn=st.binary(max_size=20),
)
def test_any_session_file_renders_escaped(tmp_path: Path, lines: list[Any], torn: bytes) -> None:
    path = tmp_path / "fuzz.jsonl"
    data = b"".join(json.dumps(line, ensure_ascii=True).encode() + b"\n" for line in lines)
    path.write_bytes(data + torn)
    page = session_page(read_session(path))
    # the only markup is the viewer's: no text from the file made a tag
    assert page.count("<script") == 1
    assert "<img" not in page
    page.encode("utf-8", "replace")  # what the server sends (a lone surrogate: "?")


@settings(max_examples=80, deadline=None)
@given(
    path=_TEXT,
    host=st.sampled_from(["127.0.0.1:1234", "evil:1234", ""]),
    method=st.sampled_from(["GET", "HEAD", "POST"]),
)
def test_any_request_gets_a_plain_answer(path: str, host: str, method: str) -> None:
    app = ViewerApp(Library([]))
    app.allow_port(1234)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": "/" + path,
        "headers": [(b"host", host.encode())],
    }
    trio.run(app, scope, receive, send)
    status = sent[0]["status"]
    if host != "127.0.0.1:1234":
        assert status == 403
    elif method == "POST":
        assert status == 405
    else:
        assert status in (200, 404)


def test_the_view_command_serves_until_interrupted(transcript: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trio_agent._cli",
            "view",
            str(transcript.parent),
            "--port",
            "0",
            "--no-open",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("trio-agent view: http://127.0.0.1:"), line
            url = line.split(": ", 1)[1].split()[0].rstrip("/")
            page = httpx.get(url + "/", timeout=30)
            assert page.status_code == 200
            assert "hello" in page.text
        finally:
            process.send_signal(signal.SIGINT)
            _, said = process.communicate(timeout=60)
    assert process.returncode == 130, said
    assert said == "trio-agent: interrupted\n"


def test_the_view_command_refuses_a_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    from trio_agent._cli import main

    assert main(["view", "--port", "70000", "--no-open"]) == 2
    assert "--port must be 0-65535" in capsys.readouterr().err


async def test_approvals_and_compactions_are_noted(tmp_path: Path, autojump_clock: Any) -> None:
    """A turn that ends awaiting approval (a real Session with Defer), then a history
    line (what a compaction writes): the page says both."""
    from trio_agent import Allow, Defer, Session, Tool, TurnOptions
    from trio_agent.testing import ScriptedAnswer, ScriptedModel

    async def run(input: Any, ctx: Any) -> str:
        return "ran"

    async def ask_later(tool: Any, input: Any, ctx: Any) -> Any:
        return Defer() if tool.name == "Bash" else Allow()

    bash = Tool("Bash", "Run a command.", {"type": "object"}, run)
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[ToolUseBlock("b1", "Bash", {"command": "rm -rf build"})],
                stop_reason="tool_use",
            )
        ]
    )
    path = tmp_path / "approval.jsonl"
    session = Session(
        model.client(),
        [bash],
        model="m",
        transcript_path=path,
        options=TurnOptions(can_use_tool=ask_later),
    )
    async with session, session.submit("clean up") as events:
        async for _ in events:
            pass
    view = read_session(path)
    assert view.end == "awaiting_approval"
    notes = [(i.level, i.text) for i in view.items if i.kind == "note"]
    assert ("warn", "approval requested: the last answer's tool calls await a decision") in notes
    (use,) = [b for i in view.items if i.kind == "assistant" for b in i.blocks]
    assert use["name"] == "Bash"
    assert use["result"] is None  # not run: awaiting the decision
    assert "no result (yet)" in session_page(view)

    writer = TranscriptWriter.open(path, model="m")
    writer.replace_history([UserMessage("a summary of the conversation so far")])
    writer.close()
    view = read_session(path)
    assert any(
        i.kind == "note" and i.text.startswith("history replaced (1 messages)") for i in view.items
    )


def test_a_directory_is_walked_and_each_file_read_once_until_it_changes(tmp_path: Path) -> None:
    from trio_agent._viewer._sources import FileSource

    for where in ("a.jsonl", "deep/er/b.jsonl", ".hidden/c.jsonl", "node_modules/d.jsonl"):
        path = tmp_path / where
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"type":"user","message":{"role":"user","content":"q"},"ts":1}\n')
    (tmp_path / "notes.txt").write_text("not a session")
    source = FileSource([tmp_path])
    files = source.files()
    assert [p.relative_to(tmp_path).as_posix() for p in files] == ["a.jsonl", "deep/er/b.jsonl"]
    first = source.read(files[0])
    assert source.read(files[0]) is first  # unchanged: not read again
    with files[0].open("a") as f:
        f.write('{"type":"user","message":{"role":"user","content":"more"},"ts":2}\n')
    again = source.read(files[0])
    assert again is not first
    assert [i.text for i in again.items] == ["q", "more"]


def test_the_view_command_says_when_its_port_is_taken(
    transcript: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trio_agent._cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["view", str(transcript), "--port", str(port), "--no-open"]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err
    assert "--port 0 takes any free port" in err
