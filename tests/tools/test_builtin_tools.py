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
    await write.run({"path": "pkg/mod.py", "content": "VALUE = 1\n"}, ctx)
    await edit.run({"path": "pkg/mod.py", "old_string": "1", "new_string": "2"}, ctx)
    out = await read.run({"path": "pkg/mod.py"}, ctx)
    assert isinstance(out, ToolOutput)
    assert out.content == "     1\tVALUE = 2"
    out = await glob.run({"pattern": "**/*.py"}, ctx)
    assert isinstance(out, ToolOutput)
    assert out.content == "pkg/mod.py"
    out = await grep.run({"pattern": r"VALUE = \d"}, ctx)
    assert isinstance(out, ToolOutput)
    assert out.content == "pkg/mod.py:1:VALUE = 2"
    out = await bash.run({"command": "cat pkg/mod.py"}, ctx)
    assert isinstance(out, ToolOutput)
    assert out.content == "VALUE = 2\n"
