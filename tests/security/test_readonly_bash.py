"""Read-only Bash runs in parallel (issue 23): the classifier calls a command read-only
only if running it for real never changes the file system.

Commands are generated from the allowlist's grammar, from writers, and from junk;
whatever the classifier calls read-only runs with ``bash -c`` in a fresh copy of a small
tree, and the tree (paths, modes, contents, link targets) must be unchanged.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import stat
import subprocess

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trio_agent.tools import Bash, Workspace
from trio_agent.tools._readonly import READ_ONLY_COMMANDS, is_read_only

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C"}


def make_tree(root: pathlib.Path) -> pathlib.Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "a.py").write_text("import os\nTODO = 1\n")
    (root / "src" / "pkg" / "b.txt").write_text("beta\nalpha\nTODO\n")
    (root / "notes.md").write_text("# notes\nTODO: more\n")
    (root / "empty").write_text("")
    (root / "link").symlink_to("src/a.py")
    os.chmod(root / "notes.md", 0o640)
    return root


def snapshot(root: pathlib.Path) -> dict[str, tuple[int, str]]:
    seen: dict[str, tuple[int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = pathlib.Path(dirpath) / name
            st_ = path.lstat()
            if stat.S_ISLNK(st_.st_mode):
                what = "->" + os.readlink(path)
            elif stat.S_ISREG(st_.st_mode):
                what = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                what = "dir" if stat.S_ISDIR(st_.st_mode) else "other"
            seen[str(path.relative_to(root))] = (st_.st_mode, what)
    return seen


FILES = ["src/a.py", "notes.md", "empty", "link", "src/pkg/b.txt", "missing", "'src'/a.py"]
DIRS = [".", "src", "src/pkg", "..", "/nonexistent-dir"]
WORDS = ["TODO", "alpha", "'a b'", '"$HOME"', "x*", "-n"]

READERS = st.one_of(
    st.builds("cat {}".format, st.sampled_from(FILES)),
    st.builds("head -n {} {}".format, st.integers(0, 3), st.sampled_from(FILES)),
    st.builds("tail -c {} {}".format, st.integers(0, 3), st.sampled_from(FILES)),
    st.builds("wc -l {}".format, st.sampled_from(FILES)),
    st.builds("ls -la {}".format, st.sampled_from(DIRS)),
    st.builds("ls {}".format, st.sampled_from(["*", "src/*", "-R"])),
    st.builds("grep -rn {} {}".format, st.sampled_from(WORDS), st.sampled_from(DIRS[:3])),
    st.builds("grep -c {} {}".format, st.sampled_from(WORDS), st.sampled_from(FILES)),
    st.builds(
        "find {} -name {}".format, st.sampled_from(DIRS[:3]), st.sampled_from(["'*.py'", "x"])
    ),
    st.builds("find {} -type f".format, st.sampled_from(DIRS[:3])),
    st.builds("sort {}".format, st.sampled_from(FILES)),
    st.builds("sort -r -u {}".format, st.sampled_from(FILES)),
    st.builds("stat {}".format, st.sampled_from(FILES)),
    st.builds("du -sh {}".format, st.sampled_from(DIRS[:3])),
    st.builds("rg -n {} {}".format, st.sampled_from(WORDS), st.sampled_from(DIRS[:3])),
    st.sampled_from(
        [
            "pwd",
            "echo hi",
            "true",
            "sleep 0",
            "git status",
            "git log -1",
            "git diff",
            "date",
            "id",
            "uname -a",
            "printf '%s\\n' a b",
            "cd src && ls",
            "command -v ls",
            "tree -a",
            "jq . /dev/null",
            "seq 3",
            "test -f notes.md",
            "[ -d src ]",
        ]
    ),
)
WRITERS = st.one_of(
    st.builds("rm -f {}".format, st.sampled_from(FILES)),
    st.builds("touch {}".format, st.sampled_from(["new", "src/new", "notes.md"])),
    st.builds("echo x > {}".format, st.sampled_from(["new", "notes.md"])),
    st.builds("echo x >> {}".format, st.sampled_from(["new", "notes.md"])),
    st.builds("cat {} | tee {}".format, st.sampled_from(FILES), st.sampled_from(["new"])),
    st.builds("sort -o {0} {0}".format, st.sampled_from(FILES)),
    st.builds("sort -ro {0} {0}".format, st.sampled_from(FILES)),
    st.sampled_from(
        [
            "find . -name empty -delete",
            "find . -name empty -exec rm {} +",
            "mkdir d",
            "chmod 000 notes.md",
            "ln -s a b",
            "mv notes.md n2",
            "cp notes.md n2",
            "sed -i s/a/b/ src/a.py",
            "truncate -s 0 notes.md",
            "git init -q",
            "tree -o out",
            "date > d",
            "ls >| out",
            "ls &> out",
            "ls 2> err",
            "cat <> rw",
            "ls >& out",
            "find . -fprint out",
            "dd if=notes.md of=out",
            "xargs touch < notes.md",
            "rg --pre touch x .",
            "cd src; touch z",
            "f() { ls; }; f",
            "eval 'touch e'",
            "ls $(touch s)",
            "ls `touch s`",
            "cat <(touch p)",
            "x=$(touch q)",
            "git stash",
            "git branch newb",
            "git tag t",
            "git config user.name x",
            "git diff --output=o",
            "exec 3>out",
            "./link",
            "printenv > out",
        ]
    ),
)
JUNK = st.text(st.sampled_from(list("ls cat>|&;$()`'\"-\\\n<x*.#=/")), max_size=30)
SEPARATORS = ["; ", " && ", " || ", " | ", "\n", " & "]
SUFFIXES = ["", " 2>/dev/null", " >/dev/null 2>&1", " 2>&1", " < notes.md", " > out", " >> out"]


@st.composite
def commands(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(READERS, READERS, WRITERS, JUNK), min_size=1, max_size=4))
    line = parts[0]
    for part in parts[1:]:
        line += draw(st.sampled_from(SEPARATORS)) + part
    line += draw(st.sampled_from(SUFFIXES))
    wrap = draw(st.sampled_from(["{}", "echo $({})", "({})", "{{ {}; }}", "timeout 5 {}"]))
    return wrap.format(line) if "\n" not in line or wrap == "{}" else line


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return make_tree(tmp_path_factory.mktemp("pristine") / "tree")


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(command=commands())
@example(command="ls -la; grep -r x . | head -3")  # the subject runs, whatever is drawn
def test_what_is_called_read_only_changes_nothing(
    command: str, pristine: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    if not is_read_only(command):
        return
    work = tmp_path / f"run{abs(hash(command))}"
    shutil.copytree(pristine, work, symlinks=True)
    before = snapshot(work)
    subprocess.run(
        ["/bin/bash", "-c", command],
        cwd=work,
        env=ENV,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=20,
        check=False,
    )
    assert snapshot(work) == before, command
    shutil.rmtree(work)


READ_ONLY = [
    "cat a; sleep 1; cat b",
    "grep -r x .",
    "ls -la",
    "git status",
    "git log --oneline -5",
    "git diff HEAD~1 -- src",
    "find . -name '*.py' -type f",
    "rg -n TODO src | head -20",
    "ls 2>/dev/null",
    "grep x f 2>&1 | wc -l",
    "cat < notes.md",
    "wc -l $(ls)",
    "FOO=1 ls",
    'for f in *; do cat "$f"; done',
    "git branch -a",
    "command -v rg",
]
NOT_READ_ONLY = [
    "ls > out",
    "echo hi | tee f",
    "rm x",
    "unknown-command",
    "sort -o f f",
    "find . -delete",
    "find . -exec cat {} +",
    "git stash",
    "git -c core.pager=x log",
    "xargs cat",
    "sudo cat /etc/shadow",
    "./ls",
    "eval ls",
    "bash -c ls",
    "ls $(touch x)",
    "cat <<EOF\n$(touch x)\nEOF",
    "f() { ls; }; f",
    "echo $((x))",
    "PATH=. ls",
    "ls 'unclosed",
    "ls " + "x " * 40000,
]


@pytest.mark.parametrize("command", READ_ONLY)
def test_read_only_commands(command: str) -> None:
    assert is_read_only(command), command


@pytest.mark.parametrize("command", NOT_READ_ONLY)
def test_commands_that_may_write_are_not_read_only(command: str) -> None:
    assert not is_read_only(command), command


def test_bash_is_concurrency_safe_exactly_for_read_only_commands(tmp_path: pathlib.Path) -> None:
    bash = Bash(Workspace(tmp_path))
    assert callable(bash.concurrency_safe)
    assert bash.is_concurrency_safe({"command": "git status"})
    assert bash.is_concurrency_safe({"command": "cat a; sleep 1; cat b"})
    assert not bash.is_concurrency_safe({"command": "ls > out"})
    assert not bash.is_concurrency_safe({"command": 3})
    assert {"cat", "ls", "grep", "git", "find"} <= READ_ONLY_COMMANDS
