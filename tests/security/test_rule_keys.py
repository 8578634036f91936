"""What a Bash pattern is held against: only ``command``, and never nothing (an
adversarial audit found both walked through allow and deny rules)."""

from __future__ import annotations

import pytest

from trio_agent import PermissionRules
from trio_agent._loop._rules import Rule, RuleAction

DENY = PermissionRules(allow=["Bash(*)"], deny=["Bash(rm *)", "Bash(rm)"])
ALLOW = PermissionRules(allow=["Bash(git status*)", "Bash(ls *)"])


@pytest.mark.parametrize("other", ["path", "file_path", "url", "pattern"])
def test_bash_is_decided_by_its_command_whatever_else_the_input_holds(other: str) -> None:
    call = {"command": "rm -rf x", other: "ls x"}
    assert DENY.decide("Bash", call)[0] is RuleAction.DENY
    assert ALLOW.decide("Bash", call)[0] is RuleAction.ASK
    assert Rule.parse("Bash(rm *)").matches("Bash", call)
    assert not Rule.parse("Bash(ls *)").matches("Bash", call)
    # Without a command, no pattern applies (the other key is not a command).
    assert ALLOW.decide("Bash", {other: "ls x"})[0] is RuleAction.ASK
    # Other tools keep their order of keys.
    assert Rule.parse("Read(ls*)").matches("Read", {other: "ls x"})


@pytest.mark.parametrize(
    "command",
    [
        "[ -v 'a[$(touch pwned)]' ]",
        "[[ -v 'a[$(touch pwned)]' ]]",
        "x='a[$(touch pwned)]'; a=([x]=1)",
        "a=1",
        "",
        "# only a comment",
    ],
)
def test_a_line_with_no_simple_command_is_not_allowed_by_a_pattern(command: str) -> None:
    assert ALLOW.decide("Bash", {"command": command})[0] is RuleAction.ASK
    # A bare allow rule needs no analysis.
    assert PermissionRules(allow=["Bash"]).decide("Bash", {"command": command})[0] is (
        RuleAction.ALLOW
    )
    # The control: what the rules do allow still is.
    assert ALLOW.decide("Bash", {"command": "git status"})[0] is RuleAction.ALLOW
