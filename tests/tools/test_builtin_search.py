"""Glob and Grep on real directory trees in tmp_path."""

import os
import pathlib
import threading
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent import Tool, ToolContext, ToolOutput
from trio_agent.tools import Glob, Grep, Workspace, _grep


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> Workspace:
    root = tmp_path / "root"
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "pkg").mkdir()
    (root / "src" / "main.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (root / "src" / "pkg" / "util.py").write_text("def helper():\n    return 42\n")
    (root / "README.md").write_text("# Title\nSee main() in src.\n")
    (root / "data.bin").write_bytes(b"main\0\x01\x02")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("main = yes\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.py").write_text("def main(): leak\n")
    (root / "outlink").symlink_to(outside)
    (root / "leak_link.py").symlink_to(outside / "leak.py")
    return Workspace(root)


def refusal(message: str) -> str:
    return f"<tool_use_error>{message}</tool_use_error>"


async def call(tool: Tool, input: dict[str, Any]) -> ToolOutput:
    assert tool.validate(input) is None, tool.validate(input)
    out = await tool.run(input, ToolContext("toolu_1", tool.name))
    assert isinstance(out, ToolOutput)
    return out


def set_mtime(ws: Workspace, rel: str, when: float) -> None:
    os.utime(ws.root / rel, (when, when))


# -- Glob ---------------------------------------------------------------------------


async def test_glob_newest_first_relative_to_root(ws):
    set_mtime(ws, "src/main.py", 1_000_000)
    set_mtime(ws, "src/pkg/util.py", 2_000_000)
    out = await call(Glob(ws), {"pattern": "**/*.py"})
    assert not out.is_error
    # leak_link.py and outlink/leak.py point out of the workspace: not listed.
    assert str(out.content).splitlines() == ["src/pkg/util.py", "src/main.py"]


async def test_glob_by_name_and_in_subdirectory(ws):
    out = await call(Glob(ws, sort="name"), {"pattern": "**/*"})
    assert str(out.content).splitlines() == [
        ".git/config",
        "README.md",
        "data.bin",
        "src/main.py",
        "src/pkg/util.py",
    ]
    out = await call(Glob(ws, sort="name"), {"pattern": "*.py", "path": "src"})
    assert out.content == "src/main.py"


async def test_glob_no_match_and_cap(ws):
    out = await call(Glob(ws), {"pattern": "*.rs"})
    assert (out.content, out.is_error) == ("No files found", False)
    for i in range(7):
        (ws.root / f"f{i}.txt").write_text("x")
    out = await call(Glob(ws, max_results=5, sort="name"), {"pattern": "*.txt"})
    lines = str(out.content).splitlines()
    assert lines == [
        *(f"f{i}.txt" for i in range(5)),
        "(Results are truncated. Consider using a more specific path or pattern.)",
    ]


@pytest.mark.parametrize(
    ("input", "message"),
    [
        ({"pattern": "../*"}, "'..'"),
        ({"pattern": "src/../../*"}, "'..'"),
        ({"pattern": "/etc/*"}, "relative"),
        ({"pattern": ""}, "empty"),
        ({"pattern": "a\0"}, "NUL"),
        ({"pattern": "*", "path": ".."}, "'..'"),
        ({"pattern": "*", "path": "outlink"}, "outside"),
        ({"pattern": "*", "path": "README.md"}, "Path is not a directory: README.md"),
        ({"pattern": "*", "path": "nope"}, "Directory does not exist: nope. Note: "),
    ],
)
async def test_glob_refusals(ws, input, message):
    out = await call(Glob(ws), input)
    assert out.is_error
    assert str(out.content).startswith("<tool_use_error>")
    assert str(out.content).endswith("</tool_use_error>")
    assert message in str(out.content)


async def test_glob_is_safe(ws):
    assert Glob(ws).is_concurrency_safe({"pattern": "*"})


# -- Grep ---------------------------------------------------------------------------


async def test_grep_file_line_text(ws):
    out = await call(Grep(ws), {"output_mode": "content", "pattern": r"main\(\)"})
    assert not out.is_error
    # Sorted walk; no .git, no binary file, no symlink out of the workspace.
    assert str(out.content).splitlines() == [
        "README.md:2:See main() in src.",
        "src/main.py:3:def main():",
    ]
    # The default mode lists the files, newest first (then by name).
    set_mtime(ws, "README.md", 1_000_000)
    out = await call(Grep(ws), {"pattern": r"main\(\)"})
    assert out.content == "Found 2 files\nsrc/main.py\nREADME.md"


async def test_grep_glob_path_and_case(ws):
    out = await call(
        Grep(ws), {"output_mode": "content", "pattern": "RETURN", "-i": True, "glob": "*.py"}
    )
    assert str(out.content).splitlines() == [
        "src/main.py:4:    return os.getcwd()",
        "src/pkg/util.py:2:    return 42",
    ]
    out = await call(Grep(ws), {"output_mode": "content", "pattern": "RETURN"})
    assert (out.content, out.is_error) == ("No matches found", False)
    out = await call(Grep(ws), {"pattern": "RETURN"})
    assert (out.content, out.is_error) == ("No files found", False)
    out = await call(Grep(ws), {"output_mode": "content", "pattern": "return", "path": "src/pkg"})
    assert out.content == "src/pkg/util.py:2:    return 42"
    # One file searched: no path, as ripgrep prints it.
    out = await call(
        Grep(ws), {"output_mode": "content", "pattern": "return", "path": "src/pkg/util.py"}
    )
    assert out.content == "2:    return 42"
    out = await call(
        Grep(ws), {"output_mode": "content", "pattern": "return", "glob": "src/pkg/*.py"}
    )
    assert out.content == "src/pkg/util.py:2:    return 42"


async def test_grep_follows_symlinked_files_inside(ws):
    (ws.root / "alias.md").symlink_to(ws.root / "README.md")
    out = await call(Grep(ws), {"output_mode": "content", "pattern": "Title"})
    assert str(out.content).splitlines() == ["README.md:1:# Title", "alias.md:1:# Title"]


async def test_grep_invalid_regex_is_an_error_result(ws):
    out = await call(Grep(ws), {"pattern": "(unclosed"})
    assert out.is_error
    assert "invalid regular expression" in str(out.content)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("..", "'..'"),
        ("outlink", "outside"),
        ("leak_link.py", "outside"),
        ("nope", "Path does not exist: nope. Note: your current working directory is "),
    ],
)
async def test_grep_path_refusals(ws, path, message):
    out = await call(Grep(ws), {"pattern": "main", "path": path})
    assert out.is_error
    assert str(out.content).startswith("<tool_use_error>")
    assert message in str(out.content)
    assert "leak" not in str(out.content).replace("leak_link", "")


async def test_grep_caps_matches_and_long_lines(ws):
    (ws.root / "many.txt").write_text("hit\n" * 10 + "hit " + "z" * 1000 + "\n")
    out = await call(
        Grep(ws), {"output_mode": "content", "pattern": "hit", "glob": "many.txt", "head_limit": 3}
    )
    assert out.content == (
        "many.txt:1:hit\nmany.txt:2:hit\nmany.txt:3:hit\n\n"
        "[Showing results with pagination = limit: 3]"
    )
    # head_limit 0 is "all", still within the tool's own cap.
    out = await call(
        Grep(ws, max_results=3),
        {"output_mode": "content", "pattern": "hit", "glob": "many.txt", "head_limit": 0},
    )
    assert str(out.content).endswith("\n\n[Showing results with pagination = limit: 3]")
    out = await call(Grep(ws), {"output_mode": "content", "pattern": "z+", "glob": "many.txt"})
    assert out.content == "many.txt:11:[Omitted long matching line]"


async def test_grep_walks_in_a_worker_thread(ws, monkeypatch):
    for i in range(50):
        (ws.root / f"file{i}.txt").write_text("needle\n" * 50)
    walkers: list[int] = []
    real_scandir = os.scandir

    def scandir(path):
        walkers.append(threading.get_ident())
        return real_scandir(path)

    monkeypatch.setattr(_grep.os, "scandir", scandir)
    out = await call(Grep(ws), {"output_mode": "content", "pattern": "needle", "head_limit": 0})
    assert len(str(out.content).splitlines()) == 50 * 50
    assert walkers
    assert threading.get_ident() not in walkers


async def test_grep_cancelled(ws):
    with trio.move_on_after(0) as scope:
        await call(Grep(ws), {"pattern": "x"})
    assert scope.cancelled_caught


async def test_grep_is_safe(ws):
    tool = Grep(ws)
    assert tool.name == "Grep"
    assert tool.is_concurrency_safe({"pattern": "x"})


async def test_grep_skips_fifos(ws):
    os.mkfifo(ws.root / "pipe")
    out = await call(Grep(ws), {"output_mode": "content", "pattern": "Title"})
    assert out.content == "README.md:1:# Title"


async def test_grep_skips_what_it_cannot_read(ws, monkeypatch):
    real_open = os.open

    def open_(path, *args, **kwargs):
        if path in ("pkg", "README.md"):  # a directory and a file (opened by name)
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(_grep.os, "open", open_)
    out = await call(Grep(ws), {"output_mode": "content", "pattern": "return|Title"})
    assert out.content == "src/main.py:4:    return os.getcwd()"


async def test_glob_many_files(ws):
    many = ws.root / "many"
    many.mkdir()
    for i in range(1500):
        (many / f"{i:04}.txt").touch()
    out = await call(Glob(ws, sort="name", max_results=2), {"pattern": "many/*.txt"})
    assert str(out.content).splitlines() == [
        "many/0000.txt",
        "many/0001.txt",
        "(Results are truncated. Consider using a more specific path or pattern.)",
    ]


async def test_grep_searches_whole_long_lines(ws):
    # ripgrep searches a 2 MiB line to its end; the line is not shown (over 500 bytes).
    (ws.root / "wide.txt").write_text("a" * 50 + "early" + "b" * (2 << 20) + "late\nlate\n")
    out = await call(
        Grep(ws), {"output_mode": "content", "pattern": "early|late", "glob": "wide.txt"}
    )
    assert out.content == "wide.txt:1:[Omitted long matching line]\nwide.txt:2:late"
    out = await call(Grep(ws), {"output_mode": "content", "pattern": "b+late", "glob": "wide.txt"})
    assert out.content == "wide.txt:1:[Omitted long matching line]"
