"""Permission rules attacked for real (issue 23).

Each bypass runs in a scratch directory: a control run with ``bash -c`` and no rule
really deletes the directory ``x`` (or creates ``pwned``), then the rule decides, and
when it allows the command, the command runs for real and must not have done it.
Hypothesis then generates spellings of the denied command the issue never named.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agent._shell as shell
from trio_agent import PermissionRules
from trio_agent._loop._rules import RuleAction

DENY_RM = PermissionRules(allow=["Bash(*)"], deny=["Bash(rm *)"])
ALLOW_LS = PermissionRules(allow=["Bash(ls *)"])
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C"}


def bash(command: str, cwd: pathlib.Path) -> None:
    subprocess.run(
        ["/bin/bash", "-c", command],
        cwd=cwd,
        env=ENV,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=20,
        check=False,
    )


def scratch(base: pathlib.Path) -> pathlib.Path:
    base.mkdir(parents=True, exist_ok=True)
    (base / "x").mkdir(exist_ok=True)
    (base / "x" / "file").write_text("keep me")
    return base


def gated(rules: PermissionRules, command: str, cwd: pathlib.Path) -> RuleAction:
    """Decide, and run the command for real when the rules allow it."""
    action = rules.decide("Bash", {"command": command})[0]
    if action is RuleAction.ALLOW:
        bash(command, cwd)
    return action


DELETES_X = [
    "FOO=1 rm -rf x",
    "/bin/rm -rf x",
    "\\rm -rf x",
    "'rm' -rf x",
    "command rm -rf x",
    "exec rm -rf x",
    "env rm -rf x",
    "nice rm -rf x",
    "timeout 5 rm -rf x",
    "eval 'rm -rf x'",
    "sh -c 'rm -rf x'",
    "echo x | xargs rm -rf",
    "find . -name x -prune -exec rm -rf {} +",
    # Found while attacking the fix: not in the issue.
    'r"m" -rf x',
    "$'\\x72m' -rf x",
    "/usr/bin/env -i /usr/bin/rm -rf x",
    "echo `echo \\`rm -rf x\\``",
    "y='a[$(rm -rf x)]'; echo $((y))",
    "r\\\nm -rf x",
    "shopt -s expand_aliases\nalias ls='rm -rf'\nls x",
    "/bin/r? -rf x",
    "git -c alias.q='!rm -rf x' q",
    "bash <<< 'rm -rf x'",
    "echo 'rm -rf x' > s; bash s",
    "trap 'rm -rf x' EXIT",
    "cat <<EOF | sh\nrm -rf x\nEOF",
    "echo 'rm -rf x' | xargs -I{} sh -c '{}'",
    "echo rm -rf x | xargs env",
    "echo rm -rf x | xargs nice -n 1",
    "find /usr/bin -name rm -exec {} -rf x \\;",
    "find /usr/bin -name rm -exec sh -c '{} -rf x' \\;",
    "r{m,} -rf x",
    "sh -c -- 'rm -rf x'",
    "bash -c -e 'rm -rf x'",
    # A newline inside double quotes separates two commands for eval and sh -c (the
    # analyzer once joined the quoted parts around it into one word, truerm).
    'eval "true\nrm -rf x"',
    'bash -c "true\n\nrm -rf x"',
    'sh -c "\nrm -rf x"',
    'eval "true\n  rm -rf x"',
    # Held before too (kept as a regression).
    "PATH=/nonexistent:$PATH; rm -rf x",
]


@pytest.mark.parametrize("command", DELETES_X)
def test_a_denied_rm_is_never_run(command: str, tmp_path: pathlib.Path) -> None:
    control = scratch(tmp_path / "control")
    bash(command, control)
    assert not (control / "x").exists(), "the control run must really delete x"
    attacked = scratch(tmp_path / "attacked")
    action = gated(DENY_RM, command, attacked)
    assert action is not RuleAction.ALLOW, command
    assert (attacked / "x" / "file").read_text() == "keep me"


CREATES_PWNED = [
    "ls -l <<EOF\n`touch pwned`\nEOF",
    "ls -l <<-EOF\n\t$(touch pwned)\nEOF",
    "ls -l <<-EOF\n\t`touch pwned` 'q'\nEOF",
    # Held before too (kept as regressions).
    "ls -l <<EOF\n${u:-$(touch pwned)}\nEOF",
    'ls -l <<EOF\n$(: "$(touch pwned)")\nEOF',
    "ls -l <<E\n$(: <<F\n$(touch pwned)\nF\n)\nE",
    "ls -l $(touch pwned)",
    "ls -l `touch pwned`",
    "ls -la; touch pwned",
    'ls -l <<< "$(touch pwned)"',
    'ls -d "$(touch pwned)"',
]


@pytest.mark.parametrize("command", CREATES_PWNED)
def test_an_allowed_ls_runs_nothing_else(command: str, tmp_path: pathlib.Path) -> None:
    control = scratch(tmp_path / "control")
    bash(command, control)
    assert (control / "pwned").exists(), "the control run must really create pwned"
    attacked = scratch(tmp_path / "attacked")
    assert gated(ALLOW_LS, command, attacked) is not RuleAction.ALLOW, command
    assert not (attacked / "pwned").exists()


def test_the_rules_still_allow_what_they_say(tmp_path: pathlib.Path) -> None:
    for command in ["ls -la", "ls x", "ls -l <<'EOF'\n$(touch pwned)\nEOF"]:
        assert ALLOW_LS.decide("Bash", {"command": command})[0] is RuleAction.ALLOW, command
    for command in ["echo hi", "ls -la | grep x", "git status && ls", "cat <<EOF\nhi\nEOF"]:
        assert DENY_RM.decide("Bash", {"command": command})[0] is RuleAction.ALLOW, command
    prefix = PermissionRules(allow=["Bash(npm run test:*)"])
    assert prefix.decide("Bash", {"command": "npm run test"})[0] is RuleAction.ALLOW
    assert prefix.decide("Bash", {"command": "npm run test --watch"})[0] is RuleAction.ALLOW
    assert prefix.decide("Bash", {"command": "npm run testx"})[0] is RuleAction.ASK
    assert prefix.decide("Bash", {"command": "npm run test; rm -rf x"})[0] is RuleAction.ASK


# -- generated spellings -------------------------------------------------------------


def _quote_chars(word: str, how: list[int]) -> str:
    """*word* with each character quoted one of several ways (the same value)."""
    out = []
    for char, style in zip(word, how, strict=False):
        out.append([char, f"\\{char}", f"'{char}'", f'"{char}"', f"$'{char}'"][style % 5])
    out.append(word[len(how) :])
    return "".join(out)


@st.composite
def rm_words(draw: st.DrawFn) -> str:
    path = draw(st.sampled_from(["", "/bin/", "/usr/bin/", "/usr//bin/", "/bin/../bin/"]))
    word = path + "rm"
    how = draw(st.lists(st.integers(0, 4), max_size=len(word)))
    return _quote_chars(word, how)


#: Wrappers that exist here (run for real), each with options; then decision-only ones.
RUN_WRAPPERS = [
    "command",
    "exec",
    "env",
    "env -i",
    "env -u HOME",
    "env A=1 B='x y'",
    "env --",
    "/usr/bin/env",
    "nice",
    "nice -n 5",
    "nice -5",
    "nohup",
    "timeout 5",
    "timeout -s KILL 5",
    "timeout -k 1 5",
    "timeout --preserve-status 5",
    "stdbuf -o0",
    "stdbuf -oL -e L",
    "time",
    "time -p",
    "setsid -w",
    "ionice -c3",
    "xargs",
    "xargs -0",
    "xargs -r -n 1 -I{}",
]
DECIDE_WRAPPERS = [
    "setsid",
    "sudo",
    "sudo -u root",
    "sudo -E --",
    "doas",
    "doas -u root",
    "busybox",
]


def _dq(text: str) -> str:
    return '"' + "".join("\\" + c if c in '"\\$`' else c for c in text) + '"'


#: Ways to nest a command line inside another; each keeps what runs.
NESTINGS: list[Callable[[str], str]] = [
    lambda c: f"eval {shlex.quote(c)}",
    lambda c: f"eval {_dq(c)}",
    lambda c: f"sh -c {shlex.quote(c)}",
    lambda c: f"bash -c {_dq(c)}",
    lambda c: f"eval {_dq('true' + chr(10) + c)}",  # a newline inside double quotes
    lambda c: f"bash -ec {shlex.quote(c)}",
    lambda c: f"dash -c {shlex.quote(c)} name",
    lambda c: f"bash -c -- {shlex.quote(c)}",
    lambda c: f"bash -x -c -e {_dq(c)} name arg",
    lambda c: f"echo $( {c}\n)",
    lambda c: f'echo "$( {c}\n)"',
    lambda c: "echo `" + c.replace("\\", "\\\\").replace("`", "\\`").replace("$", "\\$") + "\n`",
    lambda c: f"cat <<E{len(c)}\n$( {c}\n)\nE{len(c)}",
    lambda c: f"cat <<-E{len(c)}\n\t$( {c}\n)\nE{len(c)}",
    lambda c: (
        f"cat <<E{len(c)}\n`"
        + c.replace("\\", "\\\\").replace("`", "\\`").replace("$", "\\$")
        + f"\n`\nE{len(c)}"
    ),
    lambda c: f'cat <<< "$( {c}\n)"',
    lambda c: f"cat <( {c}\n)",
    lambda c: f"true | {{ {c}\n}}",
    lambda c: f"{{ {c}\n}} | true",
    lambda c: f"true; {c}",
    lambda c: f"true && {c}",
    lambda c: f"false || {c}",
    lambda c: f"true\n{c}",
    lambda c: f"( {c}\n)",  # a space: (( would be arithmetic
    lambda c: f"{{ {c}\n}}",
    lambda c: f"f() {{ {c}\n}}\nf",
    lambda c: f"if true; then {c}\nfi",
    lambda c: f"for i in 1; do {c}\ndone",
    lambda c: f"while true; do {c}\nbreak; done",
    lambda c: f"case a in a) {c}\n;; esac",
    lambda c: f"v=$( {c}\n)",
    lambda c: f"export v=$( {c}\n)",
    lambda c: f"! {{ {c}\n}}",
    lambda c: f"{{ {c}\n}} &\nwait",
    lambda c: f"trap {shlex.quote(c)} EXIT",
    lambda c: f"git -c alias.q={shlex.quote('!' + c)} q",
    lambda c: f"echo {shlex.quote(c)} | sh",
    lambda c: f"watch -n 1 {shlex.quote(c)}",
    lambda c: f"ssh host {shlex.quote(c)}",
    lambda c: f"su -c {shlex.quote(c)}",
    lambda c: f"sudo -s {shlex.quote(c)}",
    lambda c: f"true >( {c}\n)",  # not waited for
]
#: Nestings that only make sense to decide (they would not run here, or not at once).
DECIDE_ONLY = {
    i
    for i, nest in enumerate(NESTINGS)
    if nest("C").startswith(("watch ", "ssh ", "su -c", "sudo -s", "true >("))
}
TRAP = next(i for i, nest in enumerate(NESTINGS) if nest("C").startswith("trap "))
#: Nestings that run the line with /bin/sh (dash here).
POSIX_SH = {
    i
    for i, nest in enumerate(NESTINGS)
    if nest("C").startswith(("sh -c", "dash -c", "git -c")) or nest("C").endswith("| sh")
}
ASSIGNMENTS = ["A=1", "B='x y'", "C=$(echo c)", 'D="$HOME"', "E="]


@st.composite
def denied_spellings(draw: st.DrawFn) -> tuple[str, bool]:
    """A command line that runs ``rm -rf x``, and whether it can run for real here."""
    runnable = True
    word = draw(rm_words())
    wrappers = draw(
        st.lists(st.sampled_from(RUN_WRAPPERS + DECIDE_WRAPPERS), max_size=3, unique=True)
    )
    if any(w in DECIDE_WRAPPERS for w in wrappers):
        runnable = False
    # Only the first wrapper may be a shell keyword (time) or a builtin (command, exec).
    wrappers.sort(key=lambda w: w.split()[0] not in ("time", "command", "exec"))
    if sum(w.split()[0] in ("time", "command", "exec") for w in wrappers) > 1:
        wrappers = wrappers[:1]
    xargs = [w for w in wrappers if w.startswith("xargs")]
    wrappers = [w for w in wrappers if not w.startswith("xargs") or w == xargs[0]]
    args = "-rf x" if not any("-I{}" in w for w in wrappers) else "-rf {}"
    assignments = draw(st.lists(st.sampled_from(ASSIGNMENTS), max_size=2))
    line = " ".join([*assignments, *wrappers, word, args])
    if xargs:
        line = ("echo x | " if "-I{}" in line else "echo | ") + line
    previous = -1
    for index in draw(st.lists(st.integers(0, len(NESTINGS) - 1), max_size=2)):
        if index in DECIDE_ONLY:
            runnable = False
        if index == previous == TRAP:
            runnable = False  # a trap set while the EXIT trap runs never fires
        if index in POSIX_SH and ("$'" in line or "time" in line or previous != -1):
            runnable = False  # dash has no $'...', no time keyword, no bash syntax
        previous = index
        line = NESTINGS[index](line)
    return line, runnable


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spelling=denied_spellings())
def test_no_spelling_of_rm_is_allowed(spelling: tuple[str, bool], tmp_path: pathlib.Path) -> None:
    line, runnable = spelling
    for rules in (DENY_RM, ALLOW_LS):
        assert rules.decide("Bash", {"command": line})[0] is not RuleAction.ALLOW, line
    if runnable:
        # The generator is honest: the spelling really deletes x.
        here = scratch(tmp_path / str(abs(hash(line))))
        bash(line, here)
        assert not (here / "x").exists(), line


@settings(max_examples=300, deadline=None)
@given(junk=st.text(alphabet=st.sampled_from(list("rm -x;|&$()`'\"\\\n<>{}=*?!#ab/")), max_size=60))
def test_junk_is_never_allowed_unless_every_command_is(junk: str) -> None:
    # Whatever the text, an allow never comes from a line that mentions rm as a command.
    action = DENY_RM.decide("Bash", {"command": junk})[0]
    analysis = shell.analyze(junk)
    if action is RuleAction.ALLOW:
        assert analysis.unanalyzable is None
        assert not analysis.dynamic
        assert all(c.name != "rm" for c in analysis.commands), junk


# -- bounded: huge and deep lines are decided without parsing -------------------------


def _no_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> Any:
        raise AssertionError("the parser must not be called")

    monkeypatch.setattr(shell, "_parser", refuse)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(["long", "dollar", "subshell", "backtick-ish"]),
    size=st.integers(1, 4),
)
def test_huge_and_deep_lines_are_never_allowed(shape: str, size: int) -> None:
    if shape == "long":
        line = "echo a; " * (131072 * size // 4)  # up to 1 MB
    elif shape == "dollar":
        line = "echo $(" * (2500 * size) + "rm -rf x" + ")" * (2500 * size)  # to 10,000
    elif shape == "subshell":
        line = "( " * (5000 * size) + "ls" + " )" * (5000 * size)  # to 20,000
    else:
        line = "ls; " + "{ " * (MAX := shell.MAX_DEPTH + size) + "ls; " + "}; " * MAX
    with pytest.MonkeyPatch.context() as patch:
        _no_parser(patch)
        for rules in (DENY_RM, ALLOW_LS, PermissionRules(allow=["Bash(*)"])):
            assert rules.decide("Bash", {"command": line})[0] is not RuleAction.ALLOW
        assert DENY_RM.decide("Bash", {"command": line})[0] is RuleAction.DENY
        assert shell.analyze(line).unanalyzable is not None


def test_a_line_at_the_limits_is_still_analyzed() -> None:
    line = "ls; " * (shell.MAX_COMMAND_BYTES // 4 - 1)
    assert len(line.encode()) <= shell.MAX_COMMAND_BYTES
    assert ALLOW_LS.decide("Bash", {"command": line})[0] is RuleAction.ASK  # bare ls
    deep = "( " * (shell.MAX_DEPTH - 10) + "ls -la" + " )" * (shell.MAX_DEPTH - 10)
    assert ALLOW_LS.decide("Bash", {"command": deep})[0] is RuleAction.ALLOW


async def test_a_long_command_is_decided_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    from trio_agent import ToolContext
    from trio_agent.tools import Bash, Workspace

    threads: list[str] = []
    decide = PermissionRules.decide

    def spy(self: PermissionRules, name: str, input: Any) -> Any:
        threads.append(threading.current_thread().name)
        return decide(self, name, input)

    monkeypatch.setattr(PermissionRules, "decide", spy)
    tool = Bash(Workspace(os.getcwd()))
    ctx = ToolContext("t", "Bash")
    await DENY_RM(tool, {"command": "ls"}, ctx)
    await DENY_RM(tool, {"command": "ls; " * 5000}, ctx)
    assert threads[0] == threading.main_thread().name
    assert threads[1] != threading.main_thread().name
