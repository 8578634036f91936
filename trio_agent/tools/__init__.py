"""Built-in tools: Read, Write, Edit, Glob, Grep, Bash and WebFetch.

The file tools are confined to a :class:`Workspace`; every path the model gives is
resolved (symlinks included) and must stay inside its root. Their inputs, defaults
and result texts are Claude Code's (tests/tools/test_claude_code_parity.py holds the
table, and where they differ on purpose); Write and Edit of an existing file require
that Read showed it and it has not changed since (:class:`ReadLog`).

Example::

    ws = Workspace(project_dir)
    tools = default_tools(ws)
    async with trio_agent.open_tool_executor(tools, ...) as executor:
        ...
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from .. import _util
from .._tools import Tool
from ._bash import Bash as Bash
from ._edit import Edit as Edit
from ._glob import Glob as Glob
from ._grep import Grep as Grep
from ._read import Read as Read
from ._ssrf import AddressPolicy as AddressPolicy
from ._ssrf import AddressRefused as AddressRefused
from ._ssrf import guarded_transport as guarded_transport
from ._webfetch import WebFetch as WebFetch
from ._workspace import ReadLog as ReadLog
from ._workspace import Seen as Seen
from ._workspace import Workspace as Workspace
from ._write import Write as Write

__all__ = [
    "AddressPolicy",
    "AddressRefused",
    "Bash",
    "Edit",
    "Glob",
    "Grep",
    "Read",
    "ReadLog",
    "Seen",
    "WebFetch",
    "Workspace",
    "Write",
    "default_tools",
    "guarded_transport",
]


def default_tools(
    ws: Workspace,
    *,
    http_client: httpx.AsyncClient | None = None,
    exclude: Callable[[str], bool] | None = None,
) -> list[Tool]:
    """Every built-in tool with its default settings, the file tools rooted in *ws*.

    *exclude* (a workspace-relative path -> True to keep it out: pass
    ``rules.read_denied`` of the session's :class:`~trio_agent.PermissionRules`)
    keeps Glob and Grep from listing or reading what a Read deny rule covers.
    """
    return [
        Read(ws),
        Write(ws),
        Edit(ws),
        Glob(ws, exclude=exclude),
        Grep(ws, exclude=exclude),
        Bash(ws),
        WebFetch(http_client=http_client),
    ]


_util.fixup_module_metadata(__name__, globals())
