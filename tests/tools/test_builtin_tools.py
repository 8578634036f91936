"""The trio_agent.tools package: exports and default_tools."""

import httpx

import trio_agent.tools
from trio_agent import ToolContext, ToolOutput
from trio_agent.tools import Workspace, default_tools


def test_all_is_sorted_and_complete():
    assert trio_agent.tools.__all__ == sorted(trio_agent.tools.__all__)
    for name in trio_agent.tools.__all__:
        assert hasattr(trio_agent.tools, name), name
    public = {
        name
        for name in dir(trio_agent.tools)
        if not name.startswith("_")
        and getattr(trio_agent.tools, name).__class__.__name__ != "module"
        and getattr(getattr(trio_agent.tools, name), "__module__", "").startswith(
            "trio_agent.tools"
        )
    }
    assert public - set(trio_agent.tools.__all__) == set()


def test_default_tools(tmp_path):
    tools = default_tools(Workspace(tmp_path))
    assert [t.name for t in tools] == ["Read", "Write", "Edit", "Glob", "Grep", "Bash", "WebFetch"]
    safe = {t.name for t in tools if t.is_concurrency_safe({})}
    assert safe == {"Read", "Glob", "Grep", "WebFetch"}
    for tool in tools:
        api = tool.to_api()
        assert api["description"]
        assert api["input_schema"]["type"] == "object"


async def test_default_tools_share_the_http_client(tmp_path):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="from the given client")

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        fetch = default_tools(Workspace(tmp_path), http_client=client)[-1]
        out = await fetch.run({"url": "https://example.test/"}, ToolContext("t", "WebFetch"))
    assert isinstance(out, ToolOutput)
    assert str(out.content).endswith("from the given client")


async def test_file_tools_work_together(tmp_path):
    read, write, edit, glob, grep, bash, _ = default_tools(Workspace(tmp_path))
    ctx = ToolContext("t", "x")

    async def run(tool, input):
        out = await tool.run(input, ctx)
        assert isinstance(out, ToolOutput)
        return out.content

    assert await run(write, {"file_path": "pkg/mod.py", "content": "VALUE = 1\n"}) == (
        "File created successfully at: pkg/mod.py"
    )
    # What Write wrote counts as seen: Edit needs no Read of it.
    assert await run(edit, {"file_path": "pkg/mod.py", "old_string": "1", "new_string": "2"}) == (
        "The file pkg/mod.py has been updated successfully."
    )
    assert await run(read, {"file_path": "pkg/mod.py"}) == "1\tVALUE = 2"
    assert await run(glob, {"pattern": "**/*.py"}) == "pkg/mod.py"
    assert await run(grep, {"pattern": r"VALUE = \d"}) == "Found 1 file\npkg/mod.py"
    assert await run(grep, {"pattern": r"VALUE = \d", "output_mode": "content"}) == (
        "pkg/mod.py:1:VALUE = 2"
    )
    assert await run(grep, {"pattern": "VALUE", "output_mode": "count"}) == (
        "pkg/mod.py:1\n\nFound 1 total occurrence across 1 file."
    )
    assert await run(bash, {"command": "cat pkg/mod.py"}) == "VALUE = 2"
    # Bash changed the file: Edit refuses until it is read again.
    await run(bash, {"command": "echo 'VALUE = 3' > pkg/mod.py"})
    assert await run(edit, {"file_path": "pkg/mod.py", "old_string": "3", "new_string": "4"}) == (
        "<tool_use_error>File has been modified since read, either by the user or by a "
        "linter. Read it again before attempting to write it.</tool_use_error>"
    )
