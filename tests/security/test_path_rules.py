"""File rules are normalized (issue 23): every spelling of a rule and of a path, symlinks
inside the workspace included, match alike; a Read deny rule keeps Grep and Glob away
from what it covers."""

from __future__ import annotations

import os
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent import PermissionRules, ToolContext, ToolOutput
from trio_agent._loop._rules import RuleAction
from trio_agent.tools import Glob, Grep, Read, Workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("ws")
    (root / "secret" / "deep").mkdir(parents=True)
    (root / "secret" / "x").write_text("TOKEN=hunter2\n")
    (root / "secret" / "deep" / "y").write_text("TOKEN=deeper\n")
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("TOKEN = None  # public\n")
    (root / "link").symlink_to("secret")
    (root / "xlink").symlink_to("secret/x")
    (root / "src" / "up").symlink_to("../secret")
    return pathlib.Path(os.path.realpath(root))


def rule_spellings(root: pathlib.Path) -> list[str]:
    return [
        "./secret/**",
        "secret/**",
        f"{root}/secret/**",
        f"/{root}/secret/**",
        "secret",
        "./secret",
        "secret/",
        "secret/**/*",
    ]


@st.composite
def path_spellings(draw: st.DrawFn, root: pathlib.Path) -> str:
    target = draw(st.sampled_from(["x", "deep/y"]))
    base = draw(
        st.sampled_from(
            ["secret", "./secret", "link", "./link", "src/up", "src/../secret", "a/../secret"]
        )
    )
    path = f"{base}/{target}"
    if draw(st.booleans()):
        path = path.replace("/", "//")
    if draw(st.booleans()):
        path = f"{root}/{path}"
    return path


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_every_spelling_of_a_rule_denies_every_spelling_of_a_path(
    ws: pathlib.Path, data: st.DataObject
) -> None:
    pattern = data.draw(st.sampled_from(rule_spellings(ws)))
    path = data.draw(path_spellings(ws))
    key = data.draw(st.sampled_from(["path", "file_path"]))
    rules = PermissionRules(allow=["Read"], deny=[f"Read({pattern})"], root=ws)
    assert rules.decide("Read", {key: path})[0] is RuleAction.DENY, (pattern, path)
    assert rules.read_denied(path)
    assert rules.decide("Read", {key: "src/a.py"})[0] is RuleAction.ALLOW
    assert not rules.read_denied("src/a.py")


def test_the_symlink_to_a_denied_file_is_denied(ws: pathlib.Path) -> None:
    rules = PermissionRules(allow=["Read"], deny=["Read(./secret/**)"], root=ws)
    assert rules.decide("Read", {"file_path": "xlink"})[0] is RuleAction.DENY
    allowed = PermissionRules(allow=["Read(src/**)"], root=ws)
    assert allowed.decide("Read", {"file_path": "./src/a.py"})[0] is RuleAction.ALLOW
    assert allowed.decide("Read", {"file_path": f"{ws}/src/a.py"})[0] is RuleAction.ALLOW
    for escape in ["src/up/x", "src/../secret/x", "xlink"]:
        assert allowed.decide("Read", {"file_path": escape})[0] is RuleAction.ASK, escape


def test_gitignore_patterns(ws: pathlib.Path) -> None:
    star = PermissionRules(allow=["Read"], deny=["Read(*.py)"], root=ws)
    assert star.decide("Read", {"file_path": "src/a.py"})[0] is RuleAction.DENY  # any depth
    one = PermissionRules(allow=["Read(src/*)"], root=ws)
    assert one.decide("Read", {"file_path": "src/a.py"})[0] is RuleAction.ALLOW
    assert one.decide("Read", {"file_path": "secret/x"})[0] is RuleAction.ASK


async def _run(tool: object, input: dict[str, object]) -> ToolOutput:
    from trio_agent import Tool

    assert isinstance(tool, Tool)
    out = await tool.run(input, ToolContext("t", tool.name))
    assert isinstance(out, ToolOutput)
    return out


async def test_grep_and_glob_skip_what_read_may_not_see(ws: pathlib.Path) -> None:
    rules = PermissionRules(allow=["Read", "Grep", "Glob"], deny=["Read(./secret/**)"], root=ws)
    workspace = Workspace(ws)
    # Control: without the rules' predicate, Grep prints the denied file.
    content = {"pattern": "TOKEN", "path": ".", "output_mode": "content"}
    plain = await _run(Grep(workspace), content)
    assert "hunter2" in str(plain.content)
    grep = Grep(workspace, exclude=rules.read_denied)
    out = await _run(grep, content)
    text = str(out.content)
    assert "hunter2" not in text
    assert "deeper" not in text
    assert "src/a.py:1:" in text
    assert "not searched: a permission rule denies reading them" in text
    glob = Glob(workspace, exclude=rules.read_denied)
    listed = str((await _run(glob, {"pattern": "**/*"})).content)
    assert "secret/x" not in listed
    assert "src/a.py" in listed
    assert "not listed" in listed
    # A search aimed at the denied directory is denied outright.
    for name in ("Grep", "Glob"):
        for path in ("secret", "./secret/deep", "link", f"{ws}/secret"):
            action = rules.decide(name, {"pattern": "x", "path": path})[0]
            assert action is RuleAction.DENY, (name, path)
    assert rules.decide("Grep", {"pattern": "x", "path": "src"})[0] is RuleAction.ALLOW
    # Read itself.
    read = Read(workspace)
    assert rules.decide(read.name, {"file_path": "link/x"})[0] is RuleAction.DENY
