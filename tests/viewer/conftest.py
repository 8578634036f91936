"""A real headless Chromium, driven over WebDriver (chromedriver's HTTP API, with httpx),
for the viewer's tests; the viewer itself served on 127.0.0.1 in the test's Trio run.

Chromium and chromedriver are Debian's packages (``apt-get install chromium
chromium-driver``; ``.ci/run`` installs them). The browser runs with a fresh
profile in a temporary directory, no network but loopback (the pages need none).
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from trio_agent._viewer import Library, serve_viewer

#: WebDriver's key for an element reference.
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1200,1600",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def chromedriver() -> Iterator[str]:
    """chromedriver on a loopback port; yields its URL once it said it started."""
    binary = shutil.which("chromedriver")
    assert binary is not None, "chromedriver is missing: apt-get install chromium chromium-driver"
    port = _free_port()
    process = subprocess.Popen(
        [binary, f"--port={port}", "--allowed-ips=127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        for line in process.stdout:  # it prints this line once it listens
            lines.append(line)
            if "started successfully" in line:
                break
        else:
            raise AssertionError(f"chromedriver did not start: {''.join(lines)}")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


class Browser:
    """One WebDriver session (a headless Chromium window), its commands async."""

    def __init__(self, driver: str, session_id: str) -> None:
        self.base = f"{driver}/session/{session_id}"
        self.http = httpx.AsyncClient(timeout=60)

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        response = await self.http.request(method, self.base + path, json=body)
        data = response.json()
        if response.status_code != 200:
            raise AssertionError(f"WebDriver {path}: {data.get('value')}")
        return data.get("value")

    async def get(self, url: str) -> None:
        """Load *url* (returns once the page has loaded)."""
        await self._call("POST", "/url", {"url": url})

    async def js(self, script: str, *args: Any) -> Any:
        """Run *script* (a function body) in the page; its return value."""
        return await self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    async def wait_for(self, condition: str, timeout_s: float = 30) -> Any:
        """Wait until the JS expression *condition* is truthy in the page; its value.

        The test asks the page again and again (a synchronous script each time, which
        chromedriver runs only once a navigation has finished), not one long async
        script in the page: a live update reloads the page, which ends any script
        running in it, and a page's animation frames can stall on a loaded machine.
        """
        script = f"try {{ return ({condition}) || null; }} catch (e) {{ return null; }}"
        asked = 0
        with trio.move_on_after(timeout_s):
            while True:
                asked += 1
                try:
                    value = await self.js(script)
                except AssertionError as exc:  # the page unloaded under the script
                    if "unloaded" not in str(exc) and "navigat" not in str(exc):
                        raise
                    value = None
                if value:
                    return value
                await trio.sleep(0.05)
        raise AssertionError(f"{condition} was still false after {timeout_s} s ({asked} looks)")

    async def click(self, css: str) -> None:
        element = await self._call("POST", "/element", {"using": "css selector", "value": css})
        await self._call("POST", f"/element/{element[ELEMENT]}/click", {})

    async def screenshot(self, path: Path) -> None:
        data = await self._call("GET", "/screenshot")
        path.write_bytes(base64.b64decode(data))


@pytest.fixture(scope="session")
def browser_session(chromedriver: str) -> Iterator[str]:
    """A headless Chromium session (shared by the viewer's tests); yields its id."""
    with tempfile.TemporaryDirectory(prefix="trio-agent-chromium-") as profile:
        capabilities = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": shutil.which("chromium") or "/usr/bin/chromium",
                        "args": [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"],
                    },
                }
            }
        }
        response = httpx.post(f"{chromedriver}/session", json=capabilities, timeout=120)
        assert response.status_code == 200, response.text
        session_id = response.json()["value"]["sessionId"]
        try:
            yield session_id
        finally:
            httpx.delete(f"{chromedriver}/session/{session_id}", timeout=60)


@pytest.fixture
async def browser(chromedriver: str, browser_session: str) -> AsyncIterator[Browser]:
    driver = Browser(chromedriver, browser_session)
    async with driver.http:
        yield driver


@pytest.fixture
def viewer() -> Any:
    """``async with viewer(paths) as url:`` serves those files on 127.0.0.1."""

    @contextlib.asynccontextmanager
    async def serve(paths: Sequence[Path], database: Any = None) -> AsyncIterator[str]:
        async with trio.open_nursery() as nursery:
            url = await nursery.start(serve_viewer, Library(paths, database))
            try:
                yield url
            finally:
                nursery.cancel_scope.cancel()

    return serve
