import os
import pathlib

import pytest

from trio_agent import WorkspaceError
from trio_agent.tools import Workspace


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> Workspace:
    root = tmp_path / "root"
    root.mkdir()
    return Workspace(root)


def test_root_must_be_a_directory(tmp_path):
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace(tmp_path / "file")


def test_root_is_resolved(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    ws = Workspace(tmp_path / "link")
    assert ws.root == (tmp_path / "real").resolve()
    assert ws.resolve("a.txt") == ws.root / "a.txt"


def test_relative_and_absolute_inside(ws):
    assert ws.resolve("a/b.txt") == ws.root / "a" / "b.txt"
    assert ws.resolve("./a/./b.txt") == ws.root / "a" / "b.txt"
    assert ws.resolve(".") == ws.root
    assert ws.resolve(str(ws.root / "x")) == ws.root / "x"
    assert ws.resolve(str(ws.root)) == ws.root


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "empty path"),
        ("a\0b", "NUL"),
        ("..", "'..'"),
        ("../x", "'..'"),
        ("a/../b", "'..'"),
        ("a/../../x", "'..'"),
        ("/etc/passwd", "outside"),
        ("/", "outside"),
    ],
)
def test_rejected(ws, path, message):
    with pytest.raises(WorkspaceError, match=message):
        ws.resolve(path)


def test_sibling_with_common_prefix_is_outside(tmp_path, ws):
    # /tmp/x/root vs /tmp/x/root2: a string-prefix check would let this through.
    (tmp_path / "root2").mkdir()
    with pytest.raises(WorkspaceError, match="outside"):
        ws.resolve(str(tmp_path / "root2" / "f"))


def test_symlink_escapes(tmp_path, ws):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    (ws.root / "file_link").symlink_to(outside / "secret")
    (ws.root / "dir_link").symlink_to(outside)
    (ws.root / "dangling").symlink_to(outside / "not-yet")
    for path in ["file_link", "dir_link", "dir_link/secret", "dir_link/new", "dangling"]:
        with pytest.raises(WorkspaceError, match="outside"):
            ws.resolve(path)


def test_symlink_inside_is_followed(ws):
    (ws.root / "real").mkdir()
    (ws.root / "alias").symlink_to(ws.root / "real")
    assert ws.resolve("alias/f") == ws.root / "real" / "f"


def test_symlink_loop_stays_inside_or_is_rejected(ws):
    os.symlink("loop", ws.root / "loop")
    # a loop cannot lead outside: resolving it (non-strictly) stays in the workspace
    assert ws.resolve("loop").is_relative_to(ws.root)


def test_contains_and_display(tmp_path, ws):
    assert ws.contains(ws.root / "a")
    assert ws.contains(ws.root)
    assert not ws.contains(tmp_path)
    assert ws.display(ws.root / "a" / "b") == "a/b"
    assert ws.display(ws.root) == "."
    assert ws.display(tmp_path) == str(tmp_path)
