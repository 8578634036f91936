"""The built-in tools against a table of Claude Code's: input schemas field by field
(names, JSON types, defaults, descriptions, required fields) and result texts text by
text, with a note on every place where we differ on purpose.

Source of the table: the npm package ``@anthropic-ai/claude-code@2.1.100`` (the last
release that ships its JavaScript, ``cli.js``, rather than a native binary; fetched
with ``npm pack @anthropic-ai/claude-code@2.1.100``), read in:

- ``sdk-tools.d.ts``: the JSON schemas of the tool inputs (``BashInput``,
  ``FileReadInput``, ``FileWriteInput``, ``FileEditInput``, ``GlobInput``,
  ``GrepInput``), the same file the public repository
  github.com/Cometix-Org/Claude-Code-Agent-SDK-Typescript-Tracker vendors;
- ``cli.js``, the zod schemas (``int()`` for Read's offset and limit) and each tool's
  ``validateInput`` (its refusals), ``call`` and ``mapToolResultToToolResultBlockParam``
  (its result texts): Grep's ``Found N files`` / ``No files found`` / ``No matches
  found`` / ``Found N total occurrences across M files.`` and its pagination note
  (``head_limit`` defaults to 250), Read's ``N<TAB>line`` compact line prefix (older
  releases, e.g. 2.0.27, wrote ``%6d→line``), Bash's ``Exit code N`` and
  ``(<tool> completed with no output)``, the tool executor's
  ``<tool_use_error>...</tool_use_error>`` around input errors and refusals.

Run ``pytest tests/tools/test_claude_code_parity.py``; the properties at the end
check Grep's modes and context flags against a reference (Python's ``re`` over the
files, and ripgrep's own printer) and Read's offset/limit over arbitrary bytes.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
from collections.abc import Mapping
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import Tool, ToolContext, ToolOutput
from trio_agent._executor._results import invalid_input_message, unknown_tool_message
from trio_agent.tools import Workspace, _files, default_tools
from trio_agent.tools._grep import ripgrep

# -- the schema table ----------------------------------------------------------------

CC_BASH_DESCRIPTION = """Clear, concise description of what this command does in active \
voice. Never use words like "complex" or "risk" in the description - just describe what \
it does.

For simple commands (git, npm, standard CLI tools), keep it brief (5-10 words):
- ls → "List files in current directory"
- git status → "Show working tree status"
- npm install → "Install package dependencies"

For commands that are harder to parse at a glance (piped commands, obscure flags, etc.), \
add enough context to clarify what it does:
- find . -name "*.tmp" -exec rm {} \\; → "Find and delete all .tmp files recursively"
- git reset --hard origin/main → "Discard all local changes and match remote main"
- curl -s url | jq '.data[]' → "Fetch JSON from URL and extract data array elements\""""

#: tool → (required fields, {field: (JSON type, JSON Schema default or None,
#: description)}), as in Claude Code 2.1.100 (sdk-tools.d.ts, and cli.js for the zod
#: types: ``int()``, ``.default()``). The defaults a tool applies when a field is left
#: out (Grep's head_limit 250...) are behaviour, checked by the result tests below.
CLAUDE_CODE: Mapping[str, tuple[list[str], Mapping[str, tuple[str, Any, str]]]] = {
    "Bash": (
        ["command"],
        {
            "command": ("string", None, "The command to execute"),
            "timeout": ("number", None, "Optional timeout in milliseconds (max 600000)"),
            "description": ("string", None, CC_BASH_DESCRIPTION),
            "run_in_background": (
                "boolean",
                None,
                "Set to true to run this command in the background. Use Read to read the "
                "output later.",
            ),
            "dangerouslyDisableSandbox": (
                "boolean",
                None,
                "Set this to true to dangerously override sandbox mode and run commands "
                "without sandboxing.",
            ),
        },
    ),
    "Read": (
        ["file_path"],
        {
            "file_path": ("string", None, "The absolute path to the file to read"),
            "offset": (
                "integer",
                None,
                "The line number to start reading from. Only provide if the file is too "
                "large to read at once",
            ),
            "limit": (
                "integer",
                None,
                "The number of lines to read. Only provide if the file is too large to "
                "read at once.",
            ),
            "pages": (
                "string",
                None,
                'Page range for PDF files (e.g., "1-5", "3", "10-20"). Only applicable to '
                "PDF files. Maximum 20 pages per request.",
            ),
        },
    ),
    "Write": (
        ["file_path", "content"],
        {
            "file_path": (
                "string",
                None,
                "The absolute path to the file to write (must be absolute, not relative)",
            ),
            "content": ("string", None, "The content to write to the file"),
        },
    ),
    "Edit": (
        ["file_path", "old_string", "new_string"],
        {
            "file_path": ("string", None, "The absolute path to the file to modify"),
            "old_string": ("string", None, "The text to replace"),
            "new_string": (
                "string",
                None,
                "The text to replace it with (must be different from old_string)",
            ),
            "replace_all": (
                "boolean",
                False,
                "Replace all occurrences of old_string (default false)",
            ),
        },
    ),
    "Glob": (
        ["pattern"],
        {
            "pattern": ("string", None, "The glob pattern to match files against"),
            "path": (
                "string",
                None,
                "The directory to search in. If not specified, the current working "
                "directory will be used. IMPORTANT: Omit this field to use the default "
                'directory. DO NOT enter "undefined" or "null" - simply omit it for the '
                "default behavior. Must be a valid directory path if provided.",
            ),
        },
    ),
    "Grep": (
        ["pattern"],
        {
            "pattern": (
                "string",
                None,
                "The regular expression pattern to search for in file contents",
            ),
            "path": (
                "string",
                None,
                "File or directory to search in (rg PATH). Defaults to current working directory.",
            ),
            "glob": (
                "string",
                None,
                'Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}") - maps to rg --glob',
            ),
            "output_mode": (
                "string",
                None,
                'Output mode: "content" shows matching lines (supports -A/-B/-C context, -n '
                'line numbers, head_limit), "files_with_matches" shows file paths (supports '
                'head_limit), "count" shows match counts (supports head_limit). Defaults to '
                '"files_with_matches".',
            ),
            "-B": (
                "number",
                None,
                "Number of lines to show before each match (rg -B). Requires output_mode: "
                '"content", ignored otherwise.',
            ),
            "-A": (
                "number",
                None,
                "Number of lines to show after each match (rg -A). Requires output_mode: "
                '"content", ignored otherwise.',
            ),
            "-C": ("number", None, "Alias for context."),
            "context": (
                "number",
                None,
                "Number of lines to show before and after each match (rg -C). Requires "
                'output_mode: "content", ignored otherwise.',
            ),
            "-n": (
                "boolean",
                None,
                'Show line numbers in output (rg -n). Requires output_mode: "content", '
                "ignored otherwise. Defaults to true.",
            ),
            "-i": ("boolean", None, "Case insensitive search (rg -i)"),
            "type": (
                "string",
                None,
                "File type to search (rg --type). Common types: js, py, rust, go, java, etc. "
                "More efficient than include for standard file types.",
            ),
            "head_limit": (
                "number",
                None,
                'Limit output to first N lines/entries, equivalent to "| head -N". Works '
                "across all output modes: content (limits output lines), files_with_matches "
                "(limits file paths), count (limits count entries). Defaults to 250 when "
                "unspecified. Pass 0 for unlimited (use sparingly — large result sets waste "
                "context).",
            ),
            "offset": (
                "number",
                None,
                'Skip first N lines/entries before applying head_limit, equivalent to "| tail '
                '-n +N | head -N". Works across all output modes. Defaults to 0.',
            ),
            "multiline": (
                "boolean",
                None,
                "Enable multiline mode where . matches newlines and patterns can span lines "
                "(rg -U --multiline-dotall). Default: false.",
            ),
        },
    ),
}

#: Where an input differs on purpose: (tool, field) → why. A field absent from ours,
#: a different JSON type or a different description must be listed here.
DIFFERENT_ON_PURPOSE: Mapping[tuple[str, str], str] = {
    ("Bash", "run_in_background"): (
        "not offered: nothing a tool starts may outlive it (the subreaper kills every "
        "descendant before the tool returns, structured concurrency); a background shell "
        "needs Claude Code's task registry and its output-reading tools, which outlive calls"
    ),
    ("Bash", "dangerouslyDisableSandbox"): "no sandbox to disable: permission rules gate Bash",
    ("Read", "pages"): "no PDF support: Read shows text files",
    ("Read", "file_path"): "a path relative to the workspace root is accepted too",
    ("Write", "file_path"): "a path relative to the workspace root is accepted too",
    ("Edit", "file_path"): "a path relative to the workspace root is accepted too",
    ("Glob", "path"): "the default is the workspace root (not a process's cwd)",
    ("Grep", "path"): "the default is the workspace root (not a process's cwd)",
    **{
        ("Grep", field): "an integer >= 0 (Claude Code takes any number, and coerces strings)"
        for field in ("-A", "-B", "-C", "context", "head_limit", "offset")
    },
}

#: Ours beyond Claude Code's, with why (none: every field we take is Claude Code's).
OURS_ONLY: Mapping[tuple[str, str], str] = {}


@pytest.fixture
def tools(tmp_path: pathlib.Path) -> dict[str, Tool]:
    return {t.name: t for t in default_tools(Workspace(tmp_path))}


@pytest.mark.parametrize("name", sorted(CLAUDE_CODE))
def test_the_input_schema_is_claude_codes_field_by_field(tools: dict[str, Tool], name: str):
    required, fields = CLAUDE_CODE[name]
    schema = tools[name].input_schema
    assert schema["type"] == "object"
    assert schema["required"] == required
    assert schema.get("additionalProperties") is False  # Claude Code's are strictObject
    ours: Mapping[str, Any] = schema["properties"]
    for field, (kind, default, description) in fields.items():
        note = DIFFERENT_ON_PURPOSE.get((name, field))
        if field not in ours:
            assert note is not None, f"{name}.{field} is missing without a note"
            continue
        prop = ours[field]
        assert prop.get("default") == default, (name, field)
        if prop["type"] != kind:
            assert note is not None, f"{name}.{field}: {prop['type']} is not {kind}, no note"
        if prop["description"] != description:
            assert note is not None, f"{name}.{field}: another description without a note"
            if field == "file_path":  # Claude Code's words, then ours in parentheses
                assert prop["description"].startswith(description.split(" (")[0] + " (")
    for field in ours:
        assert field in fields or (name, field) in OURS_ONLY, f"{name}.{field} is not Claude Code's"
    for tool, field in DIFFERENT_ON_PURPOSE:
        assert field in CLAUDE_CODE[tool][1], (tool, field)  # no stale note


def test_the_bash_schema_takes_milliseconds_up_to_claude_codes_cap(tools: dict[str, Tool]):
    bash = tools["Bash"]
    assert bash.input_schema["properties"]["timeout"]["maximum"] == 600_000
    assert bash.validate({"command": "ls", "timeout": 600_000}) is None
    assert bash.validate({"command": "ls", "timeout": 600_001}) is not None
    assert bash.validate({"command": "ls", "run_in_background": True}) is not None


# -- the result-text table -----------------------------------------------------------


async def _run(tool: Tool, input: dict[str, Any]) -> ToolOutput:
    assert tool.validate(input) is None, tool.validate(input)
    out = await tool.run(input, ToolContext("toolu_1", tool.name))
    assert isinstance(out, ToolOutput)
    return out


def _wrapped(text: str) -> str:
    return f"<tool_use_error>{text}</tool_use_error>"


#: (tool, setup files, input, Claude Code's text — {root} is the workspace —, error?)
RESULTS: list[tuple[str, dict[str, str], dict[str, Any], str, bool]] = [
    ("Bash", {}, {"command": "true"}, "(Bash completed with no output)", False),
    ("Bash", {}, {"command": "echo hi"}, "hi", False),
    ("Bash", {}, {"command": "echo boom >&2; exit 1"}, "Exit code 1\nboom", True),
    ("Bash", {}, {"command": "exit 3"}, "Exit code 3", True),
    ("Bash", {"a": "x\n"}, {"command": "grep nope a"}, "(Bash completed with no output)", False),
    (
        "Bash",
        {},
        {"command": "sleep 30", "timeout": 100},
        "Exit code 143\nCommand timed out after 0s",
        True,
    ),
    ("Read", {"a.py": "first\nsecond\n"}, {"file_path": "a.py"}, "1\tfirst\n2\tsecond", False),
    (
        "Read",
        {"a.py": "1\n2\n3\n"},
        {"file_path": "a.py", "offset": 2, "limit": 1},
        "2\t2\n[truncated at the limit of 1 lines: showed lines 2-2; more lines follow, "
        "read on with offset=3]",
        False,
    ),
    (
        "Read",
        {"e": ""},
        {"file_path": "e"},
        "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>",
        False,
    ),
    (
        "Read",
        {"a": "x\n"},
        {"file_path": "a", "offset": 3},
        "<system-reminder>Warning: the file exists but is shorter than the provided offset (3). "
        "The file has 1 lines.</system-reminder>",
        False,
    ),
    (
        "Read",
        {},
        {"file_path": "nope"},
        _wrapped("File does not exist. Note: your current working directory is {root}."),
        True,
    ),
    (
        "Read",
        {"b.bin": "\0"},
        {"file_path": "b.bin"},
        _wrapped(
            "This tool cannot read binary files. The file appears to be a binary .bin file. "
            "Please use appropriate tools for binary file analysis."
        ),
        True,
    ),
    (
        "Write",
        {},
        {"file_path": "n.txt", "content": "x"},
        "File created successfully at: n.txt",
        False,
    ),
    (
        "Write",
        {"o.txt": "old"},
        {"file_path": "o.txt", "content": "x"},
        _wrapped("File has not been read yet. Read it first before writing to it."),
        True,
    ),
    (
        "Edit",
        {"o.txt": "old"},
        {"file_path": "o.txt", "old_string": "old", "new_string": "new"},
        _wrapped("File has not been read yet. Read it first before writing to it."),
        True,
    ),
    (
        "Edit",
        {"o.txt": "old"},
        {"file_path": "o.txt", "old_string": "x", "new_string": "x"},
        _wrapped("No changes to make: old_string and new_string are exactly the same."),
        True,
    ),
    (
        "Edit",
        {},
        {"file_path": "nope", "old_string": "x", "new_string": "y"},
        _wrapped("File does not exist."),
        True,
    ),
    (
        "Edit",
        {"o.txt": "old"},
        {"file_path": "o.txt", "old_string": "", "new_string": "y"},
        _wrapped("Cannot create new file - file already exists."),
        True,
    ),
    ("Glob", {}, {"pattern": "*.rs"}, "No files found", False),
    (
        "Glob",
        {},
        {"pattern": "*", "path": "nope"},
        _wrapped("Directory does not exist: nope. Note: your current working directory is {root}."),
        True,
    ),
    (
        "Glob",
        {"f": ""},
        {"pattern": "*", "path": "f"},
        _wrapped("Path is not a directory: f"),
        True,
    ),
    ("Grep", {"a": "x\n"}, {"pattern": "y"}, "No files found", False),
    ("Grep", {"a": "x\n"}, {"pattern": "x"}, "Found 1 file\na", False),
    ("Grep", {"a": "x\n"}, {"pattern": "y", "output_mode": "content"}, "No matches found", False),
    (
        "Grep",
        {"a": "x\n"},
        {"pattern": "y", "output_mode": "count"},
        "No matches found\n\nFound 0 total occurrences across 0 files.",
        False,
    ),
    (
        "Grep",
        {"a": "x\nx\n"},
        {"pattern": "x", "output_mode": "count"},
        "a:2\n\nFound 2 total occurrences across 1 file.",
        False,
    ),
    (
        "Grep",
        {"a": "x\nx\n"},
        {"pattern": "x", "output_mode": "content", "head_limit": 1, "offset": 1},
        "a:2:x\n\n[Showing results with pagination = offset: 1]",
        False,
    ),
    (
        "Grep",
        {"a": "x\nx\nx\n"},
        {"pattern": "x", "output_mode": "content", "head_limit": 1, "offset": 1},
        "a:2:x\n\n[Showing results with pagination = limit: 1, offset: 1]",
        False,
    ),
    (
        "Grep",
        {"a": "x\n", "b": "x\n"},
        {"pattern": "x", "output_mode": "count", "head_limit": 1},
        "a:1\n\nFound 1 total occurrence across 1 file. with pagination = limit: 1",
        False,
    ),
    (
        "Grep",
        {},
        {"pattern": "x", "path": "nope"},
        _wrapped("Path does not exist: nope. Note: your current working directory is {root}."),
        True,
    ),
]


#: Where a result differs on purpose from Claude Code 2.1.100's, and why. Checked by
#: test_the_noted_result_differences_hold, or elsewhere: read-size-cap in
#: test_builtin_files.py, grep-hidden-note in tests/security/test_path_rules.py,
#: grep-unlimited in test_builtin_search.py, bash-tail in test_builtin_bash.py.
RESULT_DIFFERENCES: Mapping[str, str] = {
    "read-line-cut": "Read cuts a line past 2000 characters with `[... line cut, N more "
    "characters]`: Claude Code's prompt promises the cut, its code sends the whole line",
    "read-default-limit": "Read shows 2000 lines by default, then says where to read on; "
    "Claude Code reads the whole file and refuses one over 256 KB or 25,000 tokens",
    "read-size-cap": "Read stops at max_chars (100,000) with the same note (an output cap)",
    "read-last-newline": "a final newline ends the last line; Claude Code numbers an empty "
    "line after it",
    "read-directory": "a directory is refused as `X is a directory; use Glob to list files` "
    "(Claude Code: `EISDIR: illegal operation on a directory, read 'X'`)",
    "read-no-reminder": "no malware <system-reminder> appended to every Read",
    "glob-order": "Glob lists newest first; Claude Code's ripgrep `--sort=modified` lists "
    "oldest first (so its 100-file cap keeps the oldest)",
    "paths": "Glob and Grep paths are relative to the workspace root (Claude Code: to its "
    "cwd); .gitignore is not honoured (Claude Code's Grep honours it)",
    "grep-hidden-note": "a permission rule's hidden files are counted in a last line",
    "grep-cr": "a CRLF line's \\r is not shown (ripgrep prints it)",
    "grep-unlimited": "head_limit 0 is still bounded by the tool's max_results (10,000)",
    "grep-single-count": "count mode names the file even when one file is searched "
    "(ripgrep prints a bare count, which Claude Code then counts as 0 files)",
    "bash-tail": "Bash keeps the last 30,000 characters, after `[... N characters of "
    "earlier output dropped ...]` (Claude Code saves large output to a file)",
    "bash-bracket": "`[ ... ]` exiting 1 is a failure (the shell analysis sees a test, not "
    "a command); Claude Code counts it an answer as it does test's",
    "empty-result": "`(Bash completed with no output)` is Bash's; Claude Code says "
    "`(<Tool> completed with no output)` for any tool's empty result",
    "edit-quotes": "Edit matches old_string exactly (Claude Code also tries it with curly "
    "quotes straightened); CRLF files are matched with \\n when CRLF is the majority",
    "input-errors": "an unknown tool's error lists the tools; an invalid input's says what is "
    "wrong in JSON Schema's words (tested in tests/executor/test_executor.py)",
    "webfetch": "WebFetch takes no `prompt`: there is no second model to run over the page",
}


async def test_the_noted_result_differences_hold(tmp_path: pathlib.Path):
    (tmp_path / "long.txt").write_text("y" * 2001 + "\n" + "z\n" * 2001)
    (tmp_path / "d").mkdir()
    os.utime(tmp_path / "long.txt", (1_000_000, 1_000_000))
    (tmp_path / "new.txt").write_text("a\r\n")
    tools = {t.name: t for t in default_tools(Workspace(tmp_path))}
    read = str((await _run(tools["Read"], {"file_path": "long.txt"})).content).split("\n")
    assert read[0] == f"1\t{'y' * 2000} [... line cut, 1 more characters]"  # read-line-cut
    assert len(read) == 2001  # read-default-limit
    assert read[-1] == (
        "[truncated at the limit of 2000 lines: showed lines 1-2000; more lines follow, "
        "read on with offset=2001]"
    )
    out = await _run(tools["Read"], {"file_path": "new.txt"})
    assert out.content == "1\ta"  # read-last-newline, read-no-reminder
    out = await _run(tools["Read"], {"file_path": "d"})
    assert out.content == _wrapped("d is a directory; use Glob to list files")  # read-directory
    out = await _run(tools["Glob"], {"pattern": "*.txt"})
    assert out.content == "new.txt\nlong.txt"  # glob-order
    out = await _run(tools["Grep"], {"pattern": "a", "output_mode": "content"})
    assert out.content == "new.txt:1:a"  # grep-cr
    out = await _run(tools["Bash"], {"command": "[ -e nothing ]"})
    assert (out.content, out.is_error) == ("Exit code 1", True)  # bash-bracket
    assert "prompt" not in tools["WebFetch"].input_schema["properties"]  # webfetch


@pytest.mark.parametrize(("name", "files", "input", "expected", "error"), RESULTS)
async def test_the_result_text_is_claude_codes(
    tmp_path: pathlib.Path,
    name: str,
    files: dict[str, str],
    input: dict[str, Any],
    expected: str,
    error: bool,
):
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    ws = Workspace(tmp_path)
    tool = next(t for t in default_tools(ws) if t.name == name)
    out = await _run(tool, input)
    assert (out.content, out.is_error) == (expected.format(root=ws.root), error)


async def test_edit_and_write_success_texts(tmp_path: pathlib.Path):
    (tmp_path / "a.txt").write_text("x = 1\nx = 1\n")
    ws = Workspace(tmp_path)
    read, write, edit, *_ = default_tools(ws)
    await _run(read, {"file_path": "a.txt"})
    out = await _run(edit, {"file_path": "a.txt", "old_string": "y", "new_string": "z"})
    assert out.content == _wrapped("String to replace not found in file.\nString: y")
    out = await _run(edit, {"file_path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"})
    assert out.content == _wrapped(
        "Found 2 matches of the string to replace, but replace_all is false. To replace all "
        "occurrences, set replace_all to true. To replace only one occurrence, please provide "
        "more context to uniquely identify the instance.\nString: x = 1"
    )
    out = await _run(
        edit,
        {"file_path": "a.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": True},
    )
    assert out.content == (
        "The file a.txt has been updated. All occurrences were successfully replaced."
    )
    out = await _run(
        edit, {"file_path": "a.txt", "old_string": "x = 2\nx = 2", "new_string": "x = 3"}
    )
    assert out.content == "The file a.txt has been updated successfully."
    out = await _run(write, {"file_path": str(ws.root / "a.txt"), "content": "w"})
    assert out.content == f"The file {ws.root / 'a.txt'} has been updated successfully."
    assert (tmp_path / "a.txt").read_text() == "w"


async def test_glob_truncation_line_and_grep_files_pagination(tmp_path: pathlib.Path):
    for i in range(101):
        (tmp_path / f"f{i:03}.txt").write_text("hit\n")
        os.utime(tmp_path / f"f{i:03}.txt", (1_000_000 + i, 1_000_000 + i))
    tools = {t.name: t for t in default_tools(Workspace(tmp_path))}
    out = await _run(tools["Glob"], {"pattern": "*.txt"})
    lines = str(out.content).splitlines()
    # 100 files (Claude Code's cap), newest first, then Claude Code's line.
    assert lines[:2] == ["f100.txt", "f099.txt"]
    assert len(lines) == 101
    assert lines[-1] == "(Results are truncated. Consider using a more specific path or pattern.)"
    out = await _run(tools["Grep"], {"pattern": "hit", "head_limit": 2, "offset": 1})
    assert out.content == "Found 2 files limit: 2, offset: 1\nf099.txt\nf098.txt"
    out = await _run(tools["Grep"], {"pattern": "hit"})
    lines = str(out.content).splitlines()
    assert lines[:3] == ["Found 101 files", "f100.txt", "f099.txt"]
    assert len(lines) == 102


async def test_grep_defaults_are_claude_codes(tmp_path: pathlib.Path):
    """Left out: output_mode files_with_matches, -n true (content), head_limit 250."""
    (tmp_path / "many.txt").write_text("hit\n" * 260)
    grep = next(t for t in default_tools(Workspace(tmp_path)) if t.name == "Grep")
    assert (await _run(grep, {"pattern": "hit"})).content == "Found 1 file\nmany.txt"
    out = await _run(grep, {"pattern": "hit", "output_mode": "content"})
    lines = str(out.content).split("\n")
    assert lines[:250] == [f"many.txt:{n}:hit" for n in range(1, 251)]
    assert lines[250:] == ["", "[Showing results with pagination = limit: 250]"]
    out = await _run(
        grep, {"pattern": "hit", "output_mode": "content", "-n": False, "head_limit": 0}
    )
    assert out.content == "\n".join(["many.txt:hit"] * 260)


def test_input_errors_are_wrapped_as_claude_codes():
    # Claude Code: `<tool_use_error>Error: No such tool available: X</tool_use_error>` and
    # `<tool_use_error>InputValidationError: ...</tool_use_error>`. Ours name the tools
    # that exist, and say which input is wrong (JSON Schema's words, not zod's): the
    # executor's use of these is tested in tests/executor/test_executor.py.
    assert unknown_tool_message("Rread", ["Read"]) == (
        "<tool_use_error>Error: No such tool available: Rread. Available tools: Read"
        "</tool_use_error>"
    )
    assert invalid_input_message("Read", "'file_path' is a required property") == (
        "<tool_use_error>InputValidationError: Read: 'file_path' is a required property"
        "</tool_use_error>"
    )


# -- read before write ---------------------------------------------------------------

NOT_READ = _wrapped("File has not been read yet. Read it first before writing to it.")
MODIFIED = _wrapped(
    "File has been modified since read, either by the user or by a linter. Read it again "
    "before attempting to write it."
)


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> Workspace:
    (tmp_path / "f.txt").write_text("one\ntwo\nthree\n")
    return Workspace(tmp_path)


def _tools(ws: Workspace) -> tuple[Tool, Tool, Tool]:
    read, write, edit, *_ = default_tools(ws)
    return read, write, edit


async def test_write_and_edit_of_an_unread_file_are_refused(ws: Workspace):
    read, write, edit = _tools(ws)
    before = (ws.root / "f.txt").read_bytes()
    assert (
        await _run(edit, {"file_path": "f.txt", "old_string": "one", "new_string": "1"})
    ).content == NOT_READ
    assert (await _run(write, {"file_path": "f.txt", "content": "clobbered"})).content == NOT_READ
    assert (ws.root / "f.txt").read_bytes() == before
    # Another workspace's reads do not count; forgetting them does not either.
    other_read, *_ = default_tools(Workspace(ws.root))
    await _run(other_read, {"file_path": "f.txt"})
    assert (await _run(write, {"file_path": "f.txt", "content": "x"})).content == NOT_READ
    await _run(read, {"file_path": "f.txt"})
    ws.reads.forget()
    assert (await _run(write, {"file_path": "f.txt", "content": "x"})).content == NOT_READ
    assert (ws.root / "f.txt").read_bytes() == before


async def test_a_file_changed_between_read_and_edit_is_not_clobbered(ws: Workspace):
    read, write, edit = _tools(ws)
    await _run(read, {"file_path": "f.txt"})
    (ws.root / "f.txt").write_text("one\ntwo\nthree\nthe user's line\n")
    out = await _run(edit, {"file_path": "f.txt", "old_string": "one", "new_string": "1"})
    assert (out.content, out.is_error) == (MODIFIED, True)
    assert (await _run(write, {"file_path": "f.txt", "content": "x"})).content == MODIFIED
    assert (ws.root / "f.txt").read_text() == "one\ntwo\nthree\nthe user's line\n"
    # Read again: the edit goes through, on the user's version.
    await _run(read, {"file_path": "f.txt"})
    out = await _run(edit, {"file_path": "f.txt", "old_string": "one", "new_string": "1"})
    assert out.content == "The file f.txt has been updated successfully."
    assert (ws.root / "f.txt").read_text() == "1\ntwo\nthree\nthe user's line\n"
    # What the tools wrote counts as seen: no Read needed between edits.
    out = await _run(edit, {"file_path": "f.txt", "old_string": "two", "new_string": "2"})
    assert out.content == "The file f.txt has been updated successfully."


async def test_a_touch_is_not_a_change_after_a_whole_read(ws: Workspace):
    read, _, edit = _tools(ws)
    await _run(read, {"file_path": "f.txt"})
    os.utime(ws.root / "f.txt", (2_000_000, 2_000_000))  # same bytes, new mtime
    out = await _run(edit, {"file_path": "f.txt", "old_string": "one", "new_string": "1"})
    assert out.content == "The file f.txt has been updated successfully."
    # After a partial read nothing vouches for the rest: the touch counts.
    await _run(read, {"file_path": "f.txt", "limit": 1})
    os.utime(ws.root / "f.txt", (3_000_000, 3_000_000))
    out = await _run(edit, {"file_path": "f.txt", "old_string": "1", "new_string": "one"})
    assert out.content == MODIFIED


async def test_a_write_racing_the_edit_is_seen_before_the_rename(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
):
    """Someone writes the file after Edit checked it and while Edit writes its
    temporary file: the check right before the rename refuses, their bytes stay."""
    read, _, edit = _tools(ws)
    await _run(read, {"file_path": "f.txt"})
    real_fsync = os.fsync
    raced: list[int] = []

    def fsync_then_race(fd: int) -> None:
        real_fsync(fd)
        if not raced:
            raced.append(fd)
            (ws.root / "f.txt").write_text("theirs\n")

    monkeypatch.setattr(_files.os, "fsync", fsync_then_race)
    out = await _run(edit, {"file_path": "f.txt", "old_string": "one", "new_string": "1"})
    assert raced  # the race happened, after Edit's first check
    assert out.content == MODIFIED
    assert (ws.root / "f.txt").read_text() == "theirs\n"
    assert sorted(p.name for p in ws.root.iterdir()) == ["f.txt"]  # no temporary file left


async def test_a_file_created_meanwhile_is_not_clobbered_by_write(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
):
    _, write, _ = _tools(ws)
    real_fsync = os.fsync

    def fsync_then_create(fd: int) -> None:
        real_fsync(fd)
        if not (ws.root / "new.txt").exists():
            (ws.root / "new.txt").write_text("theirs\n")

    monkeypatch.setattr(_files.os, "fsync", fsync_then_create)
    out = await _run(write, {"file_path": "new.txt", "content": "mine\n"})
    assert out.content == NOT_READ
    assert (ws.root / "new.txt").read_text() == "theirs\n"


async def test_the_read_is_of_the_file_not_of_the_name(ws: Workspace):
    read, write, _ = _tools(ws)
    (ws.root / "alias").symlink_to("f.txt")
    (ws.root / "sub").mkdir()
    await _run(read, {"file_path": "alias"})
    out = await _run(write, {"file_path": str(ws.root / "sub" / ".." / "f.txt"), "content": "x"})
    assert out.is_error  # ".." is refused before anything else
    out = await _run(write, {"file_path": str(ws.root / "f.txt"), "content": "x"})
    assert out.content == f"The file {ws.root / 'f.txt'} has been updated successfully."


async def test_edit_keeps_crlf_line_ends(tmp_path: pathlib.Path):
    (tmp_path / "w.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    read, _, edit = _tools(Workspace(tmp_path))
    assert (await _run(read, {"file_path": "w.txt"})).content == "1\ta\n2\tb\n3\tc"
    # old_string as Read showed it ("\n" line ends): matched, and CRLF written back.
    out = await _run(edit, {"file_path": "w.txt", "old_string": "a\nb", "new_string": "A\nB"})
    assert not out.is_error, out.content
    assert (tmp_path / "w.txt").read_bytes() == b"A\r\nB\r\nc\r\n"


# -- Grep against a reference ----------------------------------------------------------

WORDS = st.sampled_from(["a", "b", "ab", "ba", "A", "B a", "", "bab", "x" * 501 + "a"])
FILE = st.tuples(
    st.lists(WORDS, max_size=8),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),  # a final line end
)
NAMES = st.sampled_from(["a.txt", "b.py", "c.md", "sub/d.txt", "sub/e.py"])


def _file_text(spec: tuple[list[str], str, bool]) -> str:
    lines, end, final = spec
    return end.join(lines) + (end if final and lines else "")


def _page(items: list[str], head_limit: int, offset: int) -> tuple[list[str], int | None]:
    """Claude Code's ``Ii1``: *offset* skipped, then *head_limit* (0: all)."""
    if head_limit == 0:
        return items[offset:], None
    return items[offset : offset + head_limit], (
        head_limit if len(items) - offset > head_limit else None
    )


def _where(limit: int | None, offset: int) -> str:
    """Claude Code's ``xi1``."""
    return ", ".join(
        [
            *([f"limit: {limit}"] if limit is not None else []),
            *([f"offset: {offset}"] if offset else []),
        ]
    )


def _frame(mode: str, items: list[str], head_limit: int, offset: int) -> str:
    """Claude Code's Grep framing of ripgrep's lines (mapToolResultToToolResultBlockParam)."""
    shown, limit = _page(items, head_limit, offset)
    where = _where(limit, offset)
    if mode == "files_with_matches":
        if not shown:
            return "No files found"
        return "\n".join(
            [
                f"Found {len(shown)} {'file' if len(shown) == 1 else 'files'}"
                + (f" {where}" if where else ""),
                *shown,
            ]
        )
    text = "\n".join(shown) or "No matches found"
    if mode == "content":
        return f"{text}\n\n[Showing results with pagination = {where}]" if where else text
    total = sum(int(line.rsplit(":", 1)[1]) for line in shown)
    files = len(shown)
    return (
        f"{text}\n\nFound {total} total {'occurrence' if total == 1 else 'occurrences'} across "
        f"{files} {'file' if files == 1 else 'files'}."
        + (f" with pagination = {where}" if where else "")
    )


def _reference_lines(
    files: dict[str, str],
    pattern: str,
    ignore_case: bool,
    mode: str,
    numbers: bool,
    before: int,
    after: int,
) -> list[str]:
    """What ripgrep prints, computed with Python's re: ``path:N:text`` matches,
    ``path-N-text`` context, ``--`` between groups that do not touch."""
    regex = re.compile(re.escape(pattern), re.IGNORECASE if ignore_case else 0)
    out: list[str] = []
    last: tuple[str, int] | None = None
    for rel in sorted(files, key=lambda r: r.split("/")):
        lines = files[rel].split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        hits = {i for i, line in enumerate(lines) if regex.search(line)}
        if not hits:
            continue
        if mode == "count":
            out.append(f"{rel}:{len(hits)}")
            continue
        shown = sorted(
            {j for i in hits for j in range(max(0, i - before), min(len(lines), i + after + 1))}
        )
        for i in shown:
            if (before or after) and last is not None and last != (rel, i - 1):
                out.append("--")
            last = (rel, i)
            kind = ":" if i in hits else "-"
            text = lines[i].removesuffix("\r")
            if len(text.encode()) > 500:
                text = f"[Omitted long {'matching' if i in hits else 'context'} line]"
            out.append(f"{rel}{kind}" + (f"{i + 1}{kind}" if numbers else "") + text)
    return out


def _ripgrep_lines(
    root: pathlib.Path,
    pattern: str,
    ignore_case: bool,
    mode: str,
    numbers: bool,
    before: int,
    after: int,
) -> list[str]:
    """ripgrep's own printer over the same files (what Claude Code passes on)."""
    rg = ripgrep()
    assert rg is not None
    if not any(p.is_file() for p in root.rglob("*")):
        return []  # ripgrep calls searching nothing an error
    argv = [
        rg,
        "--no-config",
        "--no-ignore",
        "--hidden",
        "--sort",
        "path",
        "--with-filename",
        "--max-columns",
        "500",
        "-e",
        pattern,
    ]
    argv += ["-i"] if ignore_case else []
    if mode == "count":
        argv += ["-c"]
    else:
        argv += ["-n"] if numbers else ["-N"]
        argv += ["-B", str(before), "-A", str(after)]
    done = subprocess.run(argv, cwd=root, capture_output=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    return [line.removesuffix("\r") for line in done.stdout.decode().splitlines()]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    files=st.dictionaries(NAMES, FILE, max_size=4),
    pattern=st.sampled_from(["a", "b", "ab", "A", "a b", "x"]),
    ignore_case=st.booleans(),
    mode=st.sampled_from(["content", "files_with_matches", "count"]),
    numbers=st.booleans(),
    context=st.tuples(st.integers(0, 2), st.integers(0, 2), st.none() | st.integers(0, 2)),
    head_limit=st.none() | st.integers(0, 6),
    offset=st.integers(0, 4),
    mtimes=st.permutations(range(5)),
)
def test_grep_modes_and_context_match_the_reference(
    tmp_path_factory: pytest.TempPathFactory,
    files: dict[str, tuple[list[str], str, bool]],
    pattern: str,
    ignore_case: bool,
    mode: str,
    numbers: bool,
    context: tuple[int, int, int | None],
    head_limit: int | None,
    offset: int,
    mtimes: list[int],
):
    root = tmp_path_factory.mktemp("grep")
    texts = {rel: _file_text(spec) for rel, spec in files.items()}
    for n, (rel, text) in enumerate(sorted(texts.items())):
        (root / rel).parent.mkdir(exist_ok=True)
        (root / rel).write_bytes(text.encode())
        os.utime(root / rel, (1_000_000 + mtimes[n], 1_000_000 + mtimes[n]))
    before, after, both = context
    input: dict[str, Any] = {
        "pattern": pattern,
        "output_mode": mode,
        "-n": numbers,
        "-i": ignore_case,
        "-B": before,
        "-A": after,
        "offset": offset,
    }
    if both is not None:
        input["-C"] = both
        before = after = both
    if head_limit is not None:
        input["head_limit"] = head_limit
    grep = next(t for t in default_tools(Workspace(root)) if t.name == "Grep")
    out = trio.run(_run, grep, input)
    assert not out.is_error, out.content
    if mode == "files_with_matches":
        lines = _reference_lines(texts, pattern, ignore_case, "count", numbers, 0, 0)
        matched = {line.rsplit(":", 1)[0] for line in lines}
        items = sorted(matched, key=lambda rel: (-os.stat(root / rel).st_mtime_ns, rel))
    else:
        items = _reference_lines(texts, pattern, ignore_case, mode, numbers, before, after)
        # The reference is ripgrep's printer: ripgrep itself agrees.
        assert items == _ripgrep_lines(root, pattern, ignore_case, mode, numbers, before, after)
    expected = _frame(mode, items, 250 if head_limit is None else head_limit, offset)
    assert out.content == expected


# -- Read against a reference ----------------------------------------------------------


def _repeat(n: int, piece: bytes) -> bytes:
    return piece * n


PIECES = st.one_of(
    st.binary(max_size=20),
    st.sampled_from([b"\n", b"\r\n", b"\r", b"\xff", b"\xc3", b"\xe2\x82", b"\xef\xbb\xbf", b"\0"]),
    st.builds(_repeat, st.integers(1900, 2100), st.sampled_from([b"x", "é".encode(), b"\r"])),
    st.text(st.characters(codec="utf-8"), max_size=10).map(str.encode),
)


def _read_reference(data: bytes, offset: int | None, limit: int | None, path: str) -> str:
    """Claude Code's Read over *data* (split at "\\n", one "\\r" dropped, a BOM dropped,
    ``N<TAB>line``), with our cut of lines past 2000 characters and our notes."""
    if b"\0" in data[:8192]:
        return _wrapped(
            "This tool cannot read binary files. The file appears to be a binary .txt file. "
            "Please use appropriate tools for binary file analysis."
        )
    lines = data.decode("utf-8", "replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        return "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
    first = max(offset or 1, 1)
    count = limit or 2000
    chosen = lines[first - 1 : first - 1 + count]
    if not chosen:
        return (
            "<system-reminder>Warning: the file exists but is shorter than the provided offset "
            f"({first}). The file has {len(lines)} lines.</system-reminder>"
        )
    out = []
    for n, line in enumerate(chosen, first):
        line = line.removesuffix("\r")
        cut = max(len(line) - 2000, 0)
        line = line[:2000]
        if n == 1:  # a BOM counts toward the cut, and is not shown
            line = line.removeprefix("\ufeff")
        out.append(f"{n}\t{line}" + (f" [... line cut, {cut} more characters]" if cut else ""))
    if first - 1 + count < len(lines):
        last = first + len(chosen) - 1
        out.append(
            f"[truncated at the limit of {count} lines: showed lines {first}-{last}; more lines "
            f"follow, read on with offset={last + 1}]"
        )
    return "\n".join(out)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    pieces=st.lists(PIECES, max_size=12),
    offset=st.none() | st.integers(0, 8),
    limit=st.none() | st.integers(1, 5),
)
def test_read_offset_and_limit_over_arbitrary_files(
    tmp_path_factory: pytest.TempPathFactory,
    pieces: list[bytes],
    offset: int | None,
    limit: int | None,
):
    data = b"".join(pieces)
    root = tmp_path_factory.mktemp("read")
    (root / "f.txt").write_bytes(data)
    ws = Workspace(root)
    read = next(t for t in default_tools(ws) if t.name == "Read")
    input: dict[str, Any] = {"file_path": "f.txt"}
    if offset is not None:
        input["offset"] = offset
    if limit is not None:
        input["limit"] = limit
    out = trio.run(_run, read, input)
    assert out.content == _read_reference(data, offset, limit, "f.txt")
    assert out.is_error == (b"\0" in data[:8192])
    # A Read that showed the file lets Write replace it (the binary refusal does not).
    seen = ws.reads.get("f.txt")
    assert (seen is not None) == (not out.is_error)


# -- read before write, as a model ----------------------------------------------------

CONTENTS = st.lists(st.sampled_from(["a", "b", "ab", "ba"]), min_size=2, max_size=4).map(
    lambda lines: "".join(f"{line}\n" for line in lines)
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.sampled_from([None, 1])),
        st.tuples(st.just("outside"), CONTENTS),  # someone else writes the file
        st.tuples(st.just("touch"), st.none()),  # someone else touches it
        st.tuples(st.just("edit"), st.sampled_from([("a", "c"), ("ab", "x"), ("zz", "a")])),
        st.tuples(st.just("write"), CONTENTS),
    ),
    min_size=3,
    max_size=12,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(initial=CONTENTS, ops=OPS)
def test_read_before_write_follows_the_model(
    tmp_path_factory: pytest.TempPathFactory, initial: str, ops: list[tuple[str, Any]]
):
    """Any interleaving of Reads (whole or partial), outside writes and touches, Edits
    and Writes: a write goes through exactly when the file was read and is unchanged
    since (same stamp, or same bytes after a whole Read), as the model says."""
    root = tmp_path_factory.mktemp("rbw")
    path = root / "f.txt"
    path.write_text(initial)
    read, write, edit = _tools(Workspace(root))
    clock = iter(range(1_000_000, 2_000_000))
    os.utime(path, (next(clock), next(clock)))
    content = initial
    seen: tuple[str, str] | None = None  # ("whole" | "part", the content then)
    fresh = False  # the stamp is the one last seen

    async def main() -> None:
        nonlocal content, seen, fresh
        for op, arg in ops:
            if op == "read":
                out = await _run(read, {"file_path": "f.txt", **({"limit": arg} if arg else {})})
                assert not out.is_error
                whole = arg is None or content.count("\n") <= arg
                seen, fresh = ("whole" if whole else "part", content), True
            elif op in ("outside", "touch"):
                if op == "outside":
                    path.write_text(arg)
                    content = arg
                when = next(clock)
                os.utime(path, (when, when))
                fresh = False
            else:
                ok = seen is not None and (fresh or seen == ("whole", content))
                if ok:
                    fresh = True  # a check that passes records the stamp (not more)
                if op == "edit":
                    old, new = arg
                    out = await _run(
                        edit, {"file_path": "f.txt", "old_string": old, "new_string": new}
                    )
                    after = content.replace(old, new, 1)
                    done = ok and content.count(old) == 1
                else:
                    out = await _run(write, {"file_path": "f.txt", "content": arg})
                    after, done = arg, ok
                if not ok:
                    assert out.content == (NOT_READ if seen is None else MODIFIED)
                assert out.is_error == (not done), (op, arg, out.content)
                if done:
                    content, seen, fresh = after, ("whole", after), True
            assert path.read_text() == content

    trio.run(main)


# -- Grep's file selection against ripgrep's ---------------------------------------------

SELECT_NAMES = st.sampled_from(
    ["a.py", "b.md", "c.txt", "d.pyi", "sub/e.py", "sub/f.md", "sub/deep/g.txt", "Makefile"]
)
GLOBS = st.sampled_from(
    [
        "*.py",
        "*.{py,md}",
        "!*.md",
        "sub/*.py",
        "**/*.txt",
        "*.py,*.md",
        "*.md !sub/*",
        "!sub/* *.md",
        "!sub",
        "sub/*",
        "*",
    ]
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    names=st.sets(SELECT_NAMES, min_size=1),
    glob=st.none() | GLOBS,
    kind=st.none() | st.sampled_from(["py", "md", "txt", "make"]),
)
def test_grep_glob_and_type_select_the_files_ripgrep_selects(
    tmp_path_factory: pytest.TempPathFactory, names: set[str], glob: str | None, kind: str | None
):
    """Claude Code passes ``glob`` (split at spaces and commas outside braces) as
    ripgrep ``--glob``s and ``type`` as ``--type``: the same files are searched."""
    root = tmp_path_factory.mktemp("select")
    for rel in names:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("hit\n")
    input: dict[str, Any] = {"pattern": "hit", "head_limit": 0}
    argv = [str(ripgrep()), "--no-config", "--no-ignore", "--hidden", "-l", "hit"]
    if glob is not None:
        input["glob"] = glob
        for word in glob.split():
            for one in [word] if "{" in word else [w for w in word.split(",") if w]:
                argv += ["--glob", one]
    if kind is not None:
        input["type"] = kind
        argv += ["--type", kind]
    grep = next(t for t in default_tools(Workspace(root)) if t.name == "Grep")
    out = trio.run(_run, grep, input)
    done = subprocess.run(argv, cwd=root, capture_output=True, check=False)
    # 2: "No files were searched" (the filters left none), no match either.
    assert done.returncode in (0, 1) or b"No files were searched" in done.stderr, done.stderr
    expected = set(done.stdout.decode().split())
    text = str(out.content)
    ours: set[str] = set() if text == "No files found" else set(text.split("\n")[1:])
    assert ours == expected, (glob, kind, text)
