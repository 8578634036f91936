"""Read, Write and Edit on real files in tmp_path."""

import os
import pathlib
import stat
from typing import Any

import pytest
import trio

from trio_agent import Tool, ToolContext, ToolOutput
from trio_agent.tools import Edit, Read, Workspace, Write, _files


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> Workspace:
    root = tmp_path / "root"
    root.mkdir()
    return Workspace(root)


@pytest.fixture
def outside(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret\n")
    return path


async def call(tool: Tool, input: dict[str, Any]) -> ToolOutput:
    assert tool.validate(input) is None, tool.validate(input)
    out = await tool.run(input, ToolContext("toolu_1", tool.name))
    assert isinstance(out, ToolOutput)
    return out


async def read_first(ws: Workspace, path: str) -> None:
    """Read *path* through *ws*: Write and Edit of an existing file require it."""
    out = await call(Read(ws), {"file_path": path})
    assert not out.is_error, out.content


def refusal(message: str) -> str:
    return f"<tool_use_error>{message}</tool_use_error>"


def snapshot(root: pathlib.Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(root.rglob("*"))
    }


# -- Read ---------------------------------------------------------------------------


async def test_read_numbers_lines_as_claude_code(ws):
    (ws.root / "a.txt").write_text("alpha\nbeta\n\ngamma")
    out = await call(Read(ws), {"file_path": "a.txt"})
    assert not out.is_error
    assert out.content == "1\talpha\n2\tbeta\n3\t\n4\tgamma"


async def test_read_offset_and_limit(ws):
    (ws.root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await call(Read(ws), {"file_path": "a.txt", "offset": 3, "limit": 2})
    lines = str(out.content).splitlines()
    assert lines[:2] == ["3\tline 3", "4\tline 4"]
    assert "showed lines 3-4" in lines[2]
    assert "offset=5" in lines[2]
    whole = await call(Read(ws), {"file_path": "a.txt", "offset": 9})
    assert str(whole.content).splitlines() == ["9\tline 9", "10\tline 10"]
    # offset 0 reads from the start, as Claude Code's does.
    start = await call(Read(ws), {"file_path": "a.txt", "offset": 0, "limit": 1})
    assert str(start.content).splitlines()[0] == "1\tline 1"


async def test_read_offset_past_end_is_claude_codes_warning(ws):
    (ws.root / "a.txt").write_text("one\ntwo\n")
    out = await call(Read(ws), {"file_path": "a.txt", "offset": 5})
    assert not out.is_error
    assert out.content == (
        "<system-reminder>Warning: the file exists but is shorter than the provided offset "
        "(5). The file has 2 lines.</system-reminder>"
    )


async def test_read_crlf_and_empty_file(ws):
    (ws.root / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    out = await call(Read(ws), {"file_path": "crlf.txt"})
    assert out.content == "1\ta\n2\tb"
    # Only "\n" ends a line (a lone "\r" is text); a UTF-8 BOM is not shown.
    (ws.root / "cr.txt").write_bytes(b"\xef\xbb\xbfa\rb\nc")
    out = await call(Read(ws), {"file_path": "cr.txt"})
    assert out.content == "1\ta\rb\n2\tc"
    (ws.root / "empty.txt").write_bytes(b"")
    out = await call(Read(ws), {"file_path": "empty.txt"})
    assert not out.is_error
    assert out.content == (
        "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
    )


async def test_read_size_cap_says_where_to_go_on(ws):
    (ws.root / "big.txt").write_text("".join(f"{'x' * 90}\n" for _ in range(100)))
    out = await call(Read(ws, max_chars=1000), {"file_path": "big.txt"})
    text = str(out.content)
    body, note = text.rsplit("\n", 1)
    assert len(body) <= 1000
    assert "output limit of 1000 characters" in note
    shown = len(body.splitlines())
    assert f"offset={shown + 1}" in note


async def test_read_cuts_long_lines(ws):
    (ws.root / "long.txt").write_text("y" * 5000 + "\n")
    out = await call(Read(ws), {"file_path": "long.txt"})
    assert "3000 more characters" in str(out.content)
    assert len(str(out.content)) < 2100


async def test_read_refuses_binary_directory_and_missing(ws):
    (ws.root / "bin.dat").write_bytes(b"\x89PNG\0\0\x01")
    (ws.root / "dir").mkdir()
    out = await call(Read(ws), {"file_path": "bin.dat"})
    assert out.is_error
    assert out.content == refusal(
        "This tool cannot read binary files. The file appears to be a binary .dat file. "
        "Please use appropriate tools for binary file analysis."
    )
    out = await call(Read(ws), {"file_path": "dir"})
    assert out.is_error
    assert out.content == refusal("dir is a directory; use Glob to list files")
    out = await call(Read(ws), {"file_path": "nope.txt"})
    assert out.is_error
    assert out.content == refusal(
        f"File does not exist. Note: your current working directory is {ws.root}."
    )


async def test_read_invalid_utf8_is_replaced(ws):
    (ws.root / "latin.txt").write_bytes(b"caf\xe9\n")
    out = await call(Read(ws), {"file_path": "latin.txt"})
    assert out.content == "1\tcaf\ufffd"


async def test_os_errors_are_error_results(ws):
    (ws.root / "file.txt").write_text("x")
    out = await call(Write(ws), {"file_path": "file.txt/child.txt", "content": "x"})
    assert out.is_error
    assert "file.txt" in str(out.content)
    out = await call(Read(ws), {"file_path": "file.txt/child.txt"})
    assert out.is_error


@pytest.mark.parametrize("path", ["../outside/secret.txt", "link", "dirlink/secret.txt", "abs"])
async def test_read_escapes_are_rejected(ws, outside, path):
    (ws.root / "link").symlink_to(outside / "secret.txt")
    (ws.root / "dirlink").symlink_to(outside)
    if path == "abs":
        path = str(outside / "secret.txt")
    out = await call(Read(ws), {"file_path": path})
    assert out.is_error
    assert "secret" not in str(out.content).replace("secret.txt", "")
    assert "outside the workspace" in str(out.content) or "'..'" in str(out.content)


async def test_read_nul_in_path(ws):
    out = await call(Read(ws), {"file_path": "a\0b"})
    assert out.is_error
    assert "NUL" in str(out.content)


async def test_read_is_safe():
    tool = Read(Workspace("."))
    assert tool.name == "Read"
    assert tool.is_concurrency_safe({"file_path": "x"})
    assert tool.validate({"file_path": "x", "offset": -1}) is not None
    assert tool.validate({"file_path": "x", "limit": 0}) is not None
    assert tool.validate({"path": "x"}) is not None
    assert tool.validate({}) is not None


async def test_read_cancelled_while_in_thread(ws):
    (ws.root / "a.txt").write_text("x\n" * 50_000)
    with trio.CancelScope() as scope:
        scope.cancel()
        await call(Read(ws), {"file_path": "a.txt"})
    assert scope.cancelled_caught


# -- Write --------------------------------------------------------------------------


async def test_write_creates_file_and_parents(ws):
    out = await call(Write(ws), {"file_path": "a/b/c.txt", "content": "héllo\n"})
    assert not out.is_error
    assert out.content == "File created successfully at: a/b/c.txt"
    assert (ws.root / "a/b/c.txt").read_text() == "héllo\n"
    mode = stat.S_IMODE((ws.root / "a/b/c.txt").stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask
    assert [p.name for p in (ws.root / "a/b").iterdir()] == ["c.txt"]  # no temp file left


async def test_write_replaces_and_keeps_mode(ws):
    path = ws.root / "run.sh"
    path.write_text("old")
    path.chmod(0o750)
    before = path.stat().st_ino
    await read_first(ws, "run.sh")
    out = await call(Write(ws), {"file_path": "run.sh", "content": "new"})
    assert out.content == "The file run.sh has been updated successfully."
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert path.stat().st_ino != before  # replaced, not rewritten in place


async def test_write_to_directory_is_an_error(ws):
    (ws.root / "d").mkdir()
    out = await call(Write(ws), {"file_path": "d", "content": "x"})
    assert out.is_error
    assert "is a directory" in str(out.content)


async def test_write_through_symlink_inside_writes_the_target(ws):
    (ws.root / "target.txt").write_text("old")
    (ws.root / "alias.txt").symlink_to(ws.root / "target.txt")
    await read_first(ws, "alias.txt")  # the read is of the target: either name works
    out = await call(Write(ws), {"file_path": "target.txt", "content": "newer"})
    assert not out.is_error
    out = await call(Write(ws), {"file_path": "alias.txt", "content": "new"})
    assert not out.is_error
    assert (ws.root / "target.txt").read_text() == "new"
    assert (ws.root / "alias.txt").is_symlink()


@pytest.mark.parametrize(
    "path",
    ["../outside/new.txt", "link", "dirlink/new.txt", "dirlink/sub/new.txt", "dangling", "abs"],
)
async def test_write_escapes_have_no_side_effect(tmp_path, ws, outside, path):
    (ws.root / "link").symlink_to(outside / "secret.txt")
    (ws.root / "dirlink").symlink_to(outside)
    (ws.root / "dangling").symlink_to(outside / "created.txt")
    if path == "abs":
        path = str(outside / "new.txt")
    inside_before = snapshot(ws.root)
    outside_before = snapshot(outside)
    out = await call(Write(ws), {"file_path": path, "content": "pwned"})
    assert out.is_error
    assert snapshot(ws.root) == inside_before
    assert snapshot(outside) == outside_before
    assert not (tmp_path / "new.txt").exists()


async def test_write_nul_and_empty_path(ws):
    for path in ["a\0b", ""]:
        out = await ws_write(ws, path)
        assert out.is_error
    assert list(ws.root.iterdir()) == []


async def ws_write(ws: Workspace, path: str) -> ToolOutput:
    # "" is not rejected by the schema: the workspace must refuse it.
    return await call(Write(ws), {"file_path": path, "content": "x"})


async def test_write_is_not_safe(ws):
    assert not Write(ws).is_concurrency_safe({"file_path": "x", "content": ""})


# -- Edit ---------------------------------------------------------------------------


async def test_edit_replaces_a_unique_string(ws):
    path = ws.root / "a.py"
    path.write_text("def f():\n    return 1\n")
    await read_first(ws, "a.py")
    out = await call(
        Edit(ws), {"file_path": "a.py", "old_string": "return 1", "new_string": "return 2"}
    )
    assert not out.is_error
    assert out.content == "The file a.py has been updated successfully."
    assert path.read_text() == "def f():\n    return 2\n"


async def test_edit_not_unique_without_replace_all(ws):
    path = ws.root / "a.txt"
    path.write_text("x = 1\nx = 1\n")
    await read_first(ws, "a.txt")
    out = await call(Edit(ws), {"file_path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"})
    assert out.is_error
    assert out.content == refusal(
        "Found 2 matches of the string to replace, but replace_all is false. To replace all "
        "occurrences, set replace_all to true. To replace only one occurrence, please provide "
        "more context to uniquely identify the instance.\nString: x = 1"
    )
    assert path.read_text() == "x = 1\nx = 1\n"
    out = await call(
        Edit(ws),
        {"file_path": "a.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": True},
    )
    assert out.content == (
        "The file a.txt has been updated. All occurrences were successfully replaced."
    )
    assert path.read_text() == "x = 2\nx = 2\n"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("absent", "y", "String to replace not found in file.\nString: absent"),
        ("", "y", "Cannot create new file - file already exists."),
        ("same", "same", "No changes to make: old_string and new_string are exactly the same."),
    ],
)
async def test_edit_refusals_leave_the_file_alone(ws, old, new, message):
    path = ws.root / "a.txt"
    path.write_text("same text\n")
    await read_first(ws, "a.txt")
    out = await call(Edit(ws), {"file_path": "a.txt", "old_string": old, "new_string": new})
    assert out.is_error
    assert out.content == refusal(message)
    assert path.read_text() == "same text\n"


async def test_edit_missing_binary_and_non_utf8(ws):
    (ws.root / "bin").write_bytes(b"a\0b")
    (ws.root / "latin").write_bytes(b"caf\xe9")
    (ws.root / "dir").mkdir()
    for path, message in [
        ("nope", "File does not exist."),
        ("nope/deeper", "File does not exist."),
        ("bin", "bin is a binary file"),
        ("latin", "latin is not UTF-8 text (unexpected end of data at byte 3)"),
        ("dir", "dir is a directory"),
    ]:
        out = await call(Edit(ws), {"file_path": path, "old_string": "a", "new_string": "b"})
        assert out.is_error
        assert out.content == refusal(message)
    assert (ws.root / "bin").read_bytes() == b"a\0b"
    assert (ws.root / "latin").read_bytes() == b"caf\xe9"


@pytest.mark.parametrize("path", ["../outside/secret.txt", "link", "dirlink/secret.txt", "abs"])
async def test_edit_escapes_have_no_side_effect(ws, outside, path):
    (ws.root / "link").symlink_to(outside / "secret.txt")
    (ws.root / "dirlink").symlink_to(outside)
    if path == "abs":
        path = str(outside / "secret.txt")
    out = await call(Edit(ws), {"file_path": path, "old_string": "top", "new_string": "no"})
    assert out.is_error
    assert (outside / "secret.txt").read_text() == "top secret\n"


async def test_edit_is_not_safe(ws):
    tool = Edit(ws)
    assert tool.name == "Edit"
    assert not tool.is_concurrency_safe({"file_path": "x", "old_string": "a", "new_string": "b"})


async def test_fifo_is_refused_without_blocking(ws):
    os.mkfifo(ws.root / "pipe")
    for tool, input in [
        (Read(ws), {"file_path": "pipe"}),
        (Edit(ws), {"file_path": "pipe", "old_string": "a", "new_string": "b"}),
        (Write(ws), {"file_path": "pipe", "content": "b"}),
    ]:
        out = await call(tool, input)
        assert out.is_error
        assert out.content == refusal("pipe is not a regular file")


async def test_failed_write_leaves_no_temp_file(ws, monkeypatch):
    (ws.root / "keep.txt").write_text("old")

    def fail(src, dst, **kw):
        raise OSError("disk on fire")

    await read_first(ws, "keep.txt")
    monkeypatch.setattr(_files.os, "replace", fail)
    out = await call(Write(ws), {"file_path": "keep.txt", "content": "new"})
    assert out.is_error
    assert out.content == refusal("disk on fire")
    assert sorted(p.name for p in ws.root.iterdir()) == ["keep.txt"]
    assert (ws.root / "keep.txt").read_text() == "old"


async def test_write_rechecks_the_parent_after_making_it(tmp_path, ws, outside, monkeypatch):
    # A directory swapped for a symlink to outside between resolve() and the write
    # (a race) must not be written through.
    real_mkdir = os.mkdir

    def racing_mkdir(path, *args, dir_fd=None, **kwargs):
        real_mkdir(path, *args, dir_fd=dir_fd, **kwargs)
        if path == "sub":
            os.rmdir(path, dir_fd=dir_fd)
            os.symlink(outside, path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    out = await call(Write(ws), {"file_path": "sub/new.txt", "content": "x"})
    assert out.is_error
    assert "outside the workspace" in str(out.content)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_read_far_into_a_long_file(ws):
    (ws.root / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 25_001)))
    out = await call(Read(ws), {"file_path": "long.txt", "offset": 24_999})
    assert out.content == "24999\t24999\n25000\t25000"


async def test_read_cuts_a_huge_single_line_in_bounded_memory(ws):
    (ws.root / "one.txt").write_text("z" * 300_000 + "\nnext\n" + "w" * 2001)
    out = await call(Read(ws), {"file_path": "one.txt"})
    lines = str(out.content).splitlines()
    assert lines[0] == f"1\t{'z' * 2000} [... line cut, 298000 more characters]"
    assert lines[1] == "2\tnext"
    assert lines[2] == f"3\t{'w' * 2000} [... line cut, 1 more characters]"
