"""File rules and the file tools agree on which file a path names, whatever the
tree and the spelling (an adversarial audit found six ways they did not).

The central property is differential: in a generated tree of directories, files
and symlinks (relative and absolute targets, ``..`` after a symlinked directory,
chains, loops, dangling links), for every generated spelling, the file the real
Read tool returns is one a ``Read(<that file>)`` deny rule denies, and one that
``read_denied`` (Grep's and Glob's exclusion) covers. The rest pins each finding:
paths over ``PATH_MAX``, names with a newline, an absolute pattern spelled through
a symlink to the root, the gitignore escape ``\\[``, Write and Edit rules, the
CLI's root, and names the file system cannot encode.
"""

from __future__ import annotations

import errno
import os
import pathlib
import shutil
import tempfile

import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trio_agent import PermissionRules, Tool, ToolContext, ToolOutput
from trio_agent._loop._rules import RuleAction
from trio_agent.tools import Glob, Grep, Read, Workspace

#: The tree's directories and files (each file holds its own token).
_DIRS = ("a", "a/b", "c", "c/d")
_FILES = ("f", "a/f", "a/b/f", "c/f", "c/d/f")
_LINKS = ("l1", "l2", "a/l3", "c/d/l4")
_NAMES = ("a", "b", "c", "d", "f", "l1", "l2", "l3", "l4", "..", ".")


def _token(rel: str) -> str:
    return f"TOKEN<{rel}>"


def _tree(root: pathlib.Path) -> None:
    for d in _DIRS:
        (root / d).mkdir()
    for f in _FILES:
        (root / f).write_text(_token(f) + "\n")


#: Ways up a symlink's target may go before it goes down: through a link to a
#: directory and then ``..`` is where a lexical and the kernel's walk part.
_UPS = (
    (),
    ("l1",),
    ("l1", ".."),
    ("l1", "..", ".."),
    ("..",),
    ("l2", ".."),
    ("a", "..", "l1", ".."),
)


def _target(draw: st.DrawFn, root: pathlib.Path, link: str) -> str:
    """A symlink's target: the first link points at a directory (so that others
    can go through it and then ``..``), the rest anywhere; relative or absolute."""
    if link == _LINKS[0]:
        parts = draw(st.sampled_from(_DIRS)).split("/")
    else:
        up = draw(st.sampled_from(_UPS) | st.lists(st.sampled_from(_NAMES), max_size=4))
        parts = [*up, *draw(st.sampled_from(("f", "b", "b/f", "."))).split("/")]
    text = "/".join(parts)
    if draw(st.booleans()):
        text = f"{root}/{text}"  # absolute, through the root's real spelling
    return text


def _spellings(root: pathlib.Path) -> list[str]:
    """Every way into the tree through a link (and the files themselves), relative
    and absolute."""
    paths = [*_FILES]
    for link in _LINKS:
        paths += [link, f"{link}/f", f"{link}/b/f", f"{link}/l1/f"]
    return [*paths, *(f"{root}/{p}" for p in paths)]


async def _read(tool: Tool, path: str) -> str:
    out = await tool.run({"file_path": path}, ToolContext("t", tool.name))
    assert isinstance(out, ToolOutput)
    return "" if out.is_error else str(out.content)


async def _read_all(tool: Tool, paths: list[str]) -> dict[str, str]:
    return {path: await _read(tool, path) for path in paths}


def _which(content: str) -> str | None:
    """The file whose token *content* holds, or None."""
    for rel in _FILES:
        if _token(rel) in content:
            return rel
    return None


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_file_read_is_the_file_the_rules_name(data: st.DataObject) -> None:
    base = pathlib.Path(os.path.realpath(tempfile.mkdtemp(prefix="path-audit-")))
    try:
        _tree(base)
        for link in _LINKS:
            (base / link).symlink_to(_target(data.draw, base, link))
        links = {link: os.readlink(base / link) for link in _LINKS}
        read = trio.run(_read_all, Read(Workspace(base)), _spellings(base))
        through = 0
        for spelling, content in read.items():
            rel = _which(content)
            if rel is None:
                continue  # nothing was read (refused, missing, a directory, a loop)
            through += spelling not in _FILES
            # Anchored ("./"): a pattern without a slash would match "f" at any depth.
            rules = PermissionRules(allow=["Read"], deny=[f"Read(./{rel})"], root=base)
            action = rules.decide("Read", {"file_path": spelling})[0]
            assert action is RuleAction.DENY, (spelling, rel, links)
            assert rules.read_denied(spelling), (spelling, rel, links)
        assert sum(_which(c) is not None for c in read.values()) >= len(_FILES)  # it ran
        event(f"files read through links: {min(through, 5)}+")
    finally:
        shutil.rmtree(base)


def test_the_differential_property_reads_files_through_symlinks(tmp_path: pathlib.Path) -> None:
    """The property's subject runs: the audit's spelling reads the file through an
    absolute target with ``..`` after a symlinked directory, as the kernel does."""
    root = pathlib.Path(os.path.realpath(tmp_path))
    _tree(root)
    (root / "l1").symlink_to("a/b")
    (root / "l2").symlink_to(f"{root}/l1/../f")  # l1/.. is a, not the root
    content = trio.run(_read, Read(Workspace(root)), "l2")
    assert _which(content) == "a/f"
    with open(root / "l2") as kernel:
        assert _which(kernel.read()) == "a/f"
    rules = PermissionRules(allow=["Read"], deny=["Read(a/f)"], root=root)
    assert rules.decide("Read", {"file_path": "l2"})[0] is RuleAction.DENY
    assert rules.decide("Read", {"file_path": "f"})[0] is RuleAction.ALLOW


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> pathlib.Path:
    root = pathlib.Path(os.path.realpath(tmp_path / "ws"))
    root.mkdir()
    (root / ".env").write_text("SECRET_ENV=hunter2\n")
    (root / "secret").mkdir()
    (root / "secret" / "x").write_text("SECRET_X=s3cr3t\n")
    (root / "secrets").mkdir()
    (root / "pub").mkdir()
    (root / "pub" / "a.txt").write_text("public\n")
    return root


async def _run(tool: Tool, input: dict[str, object]) -> ToolOutput:
    out = await tool.run(input, ToolContext("t", tool.name))
    assert isinstance(out, ToolOutput)
    return out


async def test_a_symlink_through_a_symlinked_directory_is_excluded_from_grep_and_glob(
    ws: pathlib.Path,
) -> None:
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "d").symlink_to("a/b")
    (ws / "evil").symlink_to(f"{ws}/d/../../secret/x")  # d/../.. is the root
    workspace = Workspace(ws)
    assert "SECRET_X" in str((await _run(Read(workspace), {"file_path": "evil"})).content)
    rules = PermissionRules(allow=["Read", "Grep", "Glob"], deny=["Read(secret/**)"], root=ws)
    assert rules.decide("Read", {"file_path": "evil"})[0] is RuleAction.DENY
    grep = Grep(workspace, exclude=rules.read_denied)
    out = str((await _run(grep, {"pattern": "SECRET", "output_mode": "content"})).content)
    assert "SECRET_X" not in out
    assert "SECRET_ENV" in out  # the search ran
    (ws / "top.txt").write_text("top\n")
    glob = Glob(workspace, exclude=rules.read_denied)
    listed = str((await _run(glob, {"pattern": "*"})).content).splitlines()
    assert "top.txt" in listed  # the listing ran
    assert "evil" not in listed
    unfiltered = str((await _run(Glob(workspace), {"pattern": "*"})).content).splitlines()
    assert "evil" in unfiltered  # the control: only the exclusion keeps it out


def _deep(ws: pathlib.Path) -> str:
    """A directory chain whose real path is over PATH_MAX, made one step at a
    time (as the Write tool makes it, with dir_fd); returns its relative path."""
    parts = ["d" * 250] * 17
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            os.mkdir(part, dir_fd=fd)
            new = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = new
        os.symlink("../" * len(parts) + ".env", "l_env", dir_fd=fd)
    finally:
        os.close(fd)
    return "/".join(parts)


async def test_a_path_over_path_max_is_denied_by_a_deny_rule(ws: pathlib.Path) -> None:
    deep = _deep(ws)
    with pytest.raises(OSError) as info:
        os.lstat(ws / deep / "l_env")
    assert info.value.errno == errno.ENAMETOOLONG  # what os.path.realpath swallows
    read = Read(Workspace(ws))
    # The tool walks it one step at a time and would read .env through it.
    assert "SECRET_ENV" in str((await _run(read, {"file_path": f"{deep}/l_env"})).content)
    rules = PermissionRules(allow=["Read"], deny=["Read(.env)"], root=ws)
    assert rules.decide("Read", {"file_path": f"{deep}/l_env"})[0] is RuleAction.DENY
    assert rules.read_denied(f"{deep}/l_env")
    # Unresolvable, it is never allowed by a pattern either.
    some = PermissionRules(allow=["Read(**)"], root=ws)
    assert some.decide("Read", {"file_path": f"{deep}/l_env"})[0] is RuleAction.ASK
    assert some.decide("Read", {"file_path": "pub/a.txt"})[0] is RuleAction.ALLOW


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        (".env", "cfg\nprod/.env"),
        ("**/.env", "cfg\nprod/.env"),
        ("*.pem", "cfg\nprod/k.pem"),
        ("**/*.pem", "a\nb/c\nd/k.pem"),
        ("secret/**/key", "secret/a\nb/key"),
        ("**/conftest.py", "tests/x\ny/conftest.py"),
        ("a?b", "a\nb"),
    ],
)
def test_names_with_a_newline_match_like_any_other(
    ws: pathlib.Path, pattern: str, path: str
) -> None:
    for tool in ("Read", "Write", "Edit"):
        rules = PermissionRules(allow=[tool], deny=[f"{tool}({pattern})"], root=ws)
        assert rules.decide(tool, {"file_path": path})[0] is RuleAction.DENY, (tool, path)
        absolute = f"{ws}/{path}"
        assert rules.decide(tool, {"file_path": absolute})[0] is RuleAction.DENY, absolute
    assert PermissionRules(deny=[f"Read({pattern})"], root=ws).read_denied(path)


@pytest.mark.parametrize("through", ["alias", "alias/"])
def test_an_absolute_pattern_spelled_through_a_symlink_to_the_root(
    ws: pathlib.Path, through: str
) -> None:
    alias = ws.parent / "alias"
    alias.symlink_to(ws)
    spelled = f"{ws.parent}/{through}".rstrip("/")
    rules = PermissionRules(
        allow=["Read", "Write"],
        deny=[
            f"Read({spelled}/secret/**)",
            f"Read({spelled}/.env)",
            f"Write({spelled}/secrets/**)",
        ],
        root=ws,
    )
    for path in ("secret/x", f"{ws}/secret/x", ".env", f"{ws}/.env"):
        assert rules.decide("Read", {"file_path": path})[0] is RuleAction.DENY, path
        assert rules.read_denied(path), path
    assert rules.decide("Write", {"file_path": "secrets/new.txt"})[0] is RuleAction.DENY
    assert rules.decide("Read", {"file_path": "pub/a.txt"})[0] is RuleAction.ALLOW


def test_a_backslash_escapes_the_next_character(ws: pathlib.Path) -> None:
    (ws / "secret[1].txt").write_text("BRACKET\n")
    rules = PermissionRules(allow=["Read"], deny=[r"Read(secret\[1\].txt)"], root=ws)
    assert rules.decide("Read", {"file_path": "secret[1].txt"})[0] is RuleAction.DENY
    assert rules.decide("Read", {"file_path": "secret1.txt"})[0] is RuleAction.ALLOW
    star = PermissionRules(allow=["Read"], deny=[r"Read(\*.txt)"], root=ws)
    assert star.decide("Read", {"file_path": "*.txt"})[0] is RuleAction.DENY
    assert star.decide("Read", {"file_path": "a.txt"})[0] is RuleAction.ALLOW


def test_a_write_or_edit_deny_rule_covers_both(ws: pathlib.Path) -> None:
    (ws / "secrets" / "old.txt").write_text("old\n")
    for denied, other in (("Write", "Edit"), ("Edit", "Write")):
        rules = PermissionRules(allow=["Write", "Edit"], deny=[f"{denied}(secrets/**)"], root=ws)
        assert rules.decide(other, {"file_path": "secrets/old.txt"})[0] is RuleAction.DENY
        assert rules.decide(other, {"file_path": "pub/a.txt"})[0] is RuleAction.ALLOW
        # Asking stays per tool (the CLI's --allow Write lifts only Write's asking).
        asked = PermissionRules(allow=["Write", "Edit"], ask=[denied], root=ws)
        assert asked.decide(other, {"file_path": "pub/a.txt"})[0] is RuleAction.ALLOW
        assert asked.decide(denied, {"file_path": "pub/a.txt"})[0] is RuleAction.ASK
    # The allow side stays exact: a Write allow rule does not allow an Edit.
    only = PermissionRules(allow=["Write(pub/**)"], root=ws)
    assert only.decide("Edit", {"file_path": "pub/a.txt"})[0] is RuleAction.ASK


@pytest.mark.parametrize("path", ["\ud800", "secret/\udfff", "a/\ud83d/b"])
def test_a_name_the_file_system_cannot_encode_fails_closed(ws: pathlib.Path, path: str) -> None:
    rules = PermissionRules(allow=["Read", "Grep"], deny=["Read(secret/**)"], root=ws)
    assert rules.decide("Read", {"file_path": path})[0] is RuleAction.DENY
    assert rules.decide("Grep", {"pattern": "x", "path": path})[0] is RuleAction.DENY
    assert rules.read_denied(path)
    free = PermissionRules(allow=["Read(**)"], root=ws)
    assert free.decide("Read", {"file_path": path})[0] is RuleAction.ASK
    assert (
        PermissionRules(allow=["Read"], deny=["Read(\ud800)"], root=ws).decide(
            "Read", {"file_path": "pub/a.txt"}
        )[0]
        is RuleAction.ALLOW
    )


def test_a_symlink_loop_fails_closed(ws: pathlib.Path) -> None:
    (ws / "loop1").symlink_to("loop2")
    (ws / "loop2").symlink_to("loop1")
    rules = PermissionRules(allow=["Read"], deny=["Read(secret/**)"], root=ws)
    assert rules.decide("Read", {"file_path": "loop1"})[0] is RuleAction.DENY
    assert (
        PermissionRules(allow=["Read"], root=ws).decide("Read", {"file_path": "loop1"})[0]
        is RuleAction.ALLOW
    )  # a bare allow rule needs no path


def test_the_cli_resolves_file_rules_against_its_workspace(
    ws: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trio_agent._cli._main import build_parser
    from trio_agent._cli._session_options import permission_rules

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (ws / "notes_link").symlink_to("secret/x")
    args = build_parser().parse_args(
        ["run", "--workspace", str(ws), "--deny", "Read(./secret/**)", "--deny", "Read(.env)", "hi"]
    )
    rules = permission_rules(args, None)
    assert os.path.realpath(os.fspath(rules.root)) == str(ws)
    for path in (f"{ws}/secret/x", "notes_link", ".env", f"{ws}/.env"):
        assert rules.decide("Read", {"file_path": path})[0] is RuleAction.DENY, path
        assert rules.read_denied(path), path
    assert rules.decide("Read", {"file_path": "pub/a.txt"})[0] is RuleAction.ALLOW
