"""Bypasses of the Bash analysis found by an adversarial audit, attacked for real.

Each spelling in the lists below really does what it hides: a control run under
``bash -c`` in a scratch directory (with a fake ``rm``/``touch`` first on ``PATH`` that
only leaves a marker) shows it, then the rules or the read-only classifier must not
let it through. Hypothesis then composes each family: wrappers x redirection
placements, builtins that take variable names x name spellings, and ANSI-C escapes
(compared byte for byte with what bash makes of them).
"""

from __future__ import annotations

import pathlib
import re
import shlex
import subprocess
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agent._shell as shell
from trio_agent import PermissionRules
from trio_agent._loop._rules import RuleAction
from trio_agent.tools._readonly import is_read_only

DENY = PermissionRules(allow=["Bash(*)"], deny=["Bash(rm *)", "Bash(rm)"])
ALLOW = PermissionRules(allow=["Bash(git status*)", "Bash(ls *)"])
FAKE = '#!/bin/sh\necho "$0 $*" >> "$MARKER"\n'
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A PATH directory whose ``rm`` and ``touch`` only write to $MARKER."""
    path = tmp_path_factory.mktemp("bin")
    for name in ("rm", "touch"):
        (path / name).write_text(FAKE)
        (path / name).chmod(0o755)
    return path


def run(command: str, cwd: pathlib.Path, fake_bin: pathlib.Path, **env: str) -> str:
    """Run *command* in bash in *cwd*; what the fake ``rm``/``touch`` were asked to do."""
    marker = cwd / ".marker"
    marker.unlink(missing_ok=True)
    subprocess.run(
        ["/bin/bash", "-c", command],
        cwd=cwd,
        env={
            "PATH": f"{fake_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": "/nonexistent",
            "LC_ALL": "C",
            "MARKER": str(marker),
            **env,
        },
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=20,
        check=False,
    )
    return marker.read_text() if marker.exists() else ""


def tree(base: pathlib.Path) -> pathlib.Path:
    base.mkdir(parents=True, exist_ok=True)
    (base / "x").mkdir(exist_ok=True)
    (base / "src").mkdir(exist_ok=True)
    (base / "src" / "a.py").write_text("import os\nTODO = 1\n")
    (base / "notes.md").write_text("# notes\nTODO: more\n")
    return base


def snapshot(base: pathlib.Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(base)): (p.read_bytes() if p.is_file() else None)
        for p in base.rglob("*")
        if ".git" not in p.relative_to(base).parts and p.name != ".marker"
    }


def decide(rules: PermissionRules, command: str) -> RuleAction:
    return rules.decide("Bash", {"command": command})[0]


# -- the audit's spellings ----------------------------------------------------------------

#: Each runs the fake rm (or touch) in bash; (spelling, whether the control can run it
#: here: su, sudo, doas and tmux need a user or a server this sandbox does not give).
HIDDEN_RM = [
    # 1. words after a redirection's target
    ("env >/dev/null rm -rf x", True),
    ("command 2>/dev/null rm -rf x", True),
    ("timeout 5 >/dev/null rm -rf x", True),
    ("eval >/dev/null 'rm -rf x'", True),
    ("trap 2>/dev/null 'rm -rf x' EXIT", True),
    ("find x -maxdepth 0 >/dev/null -exec rm -rf x \\;", True),
    ("echo x | xargs >/dev/null rm -rf x", True),
    ("env &>/dev/null rm -rf x", True),
    ("nice 2>&1 rm -rf x", True),
    ("env <<<hi >/dev/null rm -rf x", True),
    ("env <<EOF rm -rf x\nhi\nEOF", True),
    ("cat <<EOF >/dev/null && env >/dev/null rm -rf x\nhi\nEOF", True),
    # 2. subscripts evaluated in names, indirections, prompts, substrings
    ("read 'a[$(rm -rf x)]' <<< 1", True),
    ("test -v 'a[$(rm -rf x)]'", True),
    ("[ -v 'a[$(rm -rf x)]' ]", True),
    ("[[ -v 'a[$(rm -rf x)]' ]]", True),
    ("printf -v 'a[$(rm -rf x)]' 1", True),
    ("printf -v'a[$(rm -rf x)]' 1", True),
    ("sleep 0 & wait -n -p 'a[$(rm -rf x)]'", True),
    ("x='a[$(rm -rf x)]'; ls ${!x}", True),
    ("x='$(rm -rf x)'; ls \"${x@P}\"", True),
    ("x='a[$(rm -rf x)]'; y=abc; ls ${y:x}", True),
    ("x='a[$(rm -rf x)]'; y=abc; ls ${y:0:x}", True),
    ("x='a[$(rm -rf x)]'; y=abc; ls \"${y:x:1}\"", True),
    ("x='a[$(rm -rf x)]'; a=(1); ls ${a[@]:x}", True),
    ("declare -n r='a[$(rm -rf x)]'; ls $r", True),
    ("declare -i n; n='a[$(rm -rf x)]'", True),
    ("declare 'a[$(rm -rf x)]'=1", True),
    ("f() { local 'a[$(rm -rf x)]'=1; }; f", True),
    ("declare -a 'b=([$(rm -rf x)]=1)'", True),
    ("a=(1 2); unset 'a[$(rm -rf x)]'", True),
    ("b['a[$(rm -rf x)]']=1; ls", True),
    ("builtin printf -v 'a[$(rm -rf x)]' 1", True),
    # 4. ANSI-C strings: NUL ends the string, \x{HH}
    ("$'rm\\0' -rf x", True),
    ("rm$'\\0' -rf x", True),
    ("$'rm\\c@' -rf x", True),
    ("$'rm\\x00junk' -rf x", True),
    ("$'rm\\u0000' -rf x", True),
    ("command $'rm\\0' -rf x", True),
    ("$'\\x{72}\\x{6d}' -rf x", True),
    ("$'rm\\x{}' -rf x", True),
    ("$'rm\\400' -rf x", True),
    # 5. dangerous variables set without an assignment
    ("printf -v PS4 %s '$(rm -rf x)'; set -x; true", True),
    ("read -r PS4 <<< '$(rm -rf x)'; set -x; :", True),
    ("declare -n v=PS4; v='$(rm -rf x)'; set -x; :", True),
    ("declare 'PS4=$(rm -rf x)'; set -x; :", True),
    ("getopts a PS4 -a; PS4='$(rm -rf x)'; set -x; :", True),
    # 6. runners the analysis did not model
    ("rbash -c 'rm -rf x'", True),
    ("command rm -rf x -v", True),
    ("sudo FOO=1 rm -rf x", False),
    ("doas FOO=1 rm -rf x", False),
    ("su -c true -c'rm -rf x'", False),
    ("su -lc 'rm -rf x'", False),
    ("su --comm='rm -rf x'", False),
    ("su root -- -c 'rm -rf x'", False),
    ("tmux -L a new-session -d 'rm -rf x'", False),
    ("git -c protocol.ext.allow=always ls-remote 'ext::sh -c rm% -rf% x'", True),
    ("git ls-remote --upload-pack='rm -rf x' .", True),
    ("git ls-remote --upload='rm -rf x' .", True),
    ("git -c remote.o.uploadpack='rm -rf x' ls-remote o", False),
    # 7. (deny side) programs sort and git grep run
    ("git grep --open-files='rm -rf x;' -e TODO", True),
    ("git grep -nO'rm -rf x;' -e TODO", True),
    ("RIPGREP_CONFIG_PATH=/dev/stdin rg TODO . <<< --pre=rm", False),
]


@pytest.mark.parametrize(("command", "control"), HIDDEN_RM)
def test_a_hidden_rm_is_never_allowed(
    command: str, control: bool, tmp_path: pathlib.Path, fake_bin: pathlib.Path
) -> None:
    base = tree(tmp_path)
    if control:
        if command.startswith("git"):
            subprocess.run(["git", "init", "-q", str(base)], check=True)
            subprocess.run(["git", "-C", str(base), "add", "-A"], check=True)
        ran = run(command, base, fake_bin)
        assert re.search(r"/rm\b", ran), f"the control run did not run rm: {ran!r}"
    assert decide(DENY, command) is not RuleAction.ALLOW
    assert decide(ALLOW, command.replace("rm -rf x", "touch pwned")) is not RuleAction.ALLOW


#: Each changes a file; (spelling, the git repository it needs).
WRITES = [
    ("cat > notes.md /dev/null", False),
    ("ls > pwned /dev/null", False),
    ("ls >>pwned /dev/null", False),
    ("cat <<EOF > notes.md /dev/null\nhi\nEOF", False),
    ("find . -name notes.md >/dev/null -delete -o -name /dev/null", False),
    ("sort --out=notes.md src/a.py", False),
    ("sort --o=notes.md src/a.py", False),
    ("sort --outp=notes.md src/a.py", False),
    ("sort -ro notes.md src/a.py", False),
    ("date -us 2000-01-01 >/dev/null; touch pwned", False),  # never run: see below
    ("git grep --open-files='touch pwned;' -e TODO", True),
    ("git grep --open='touch pwned;' -e TODO", True),
    ("git grep -nO'touch pwned;' TODO", True),
    ("git grep -iO'touch pwned;' TODO", True),
    ("git diff --output=pwned", True),
    ("printf -v PS4 %s '$(touch pwned)'; set -x; true", False),
]


@pytest.mark.parametrize(("command", "repo"), WRITES)
def test_what_writes_is_not_read_only(
    command: str, repo: bool, tmp_path: pathlib.Path, fake_bin: pathlib.Path
) -> None:
    base = tree(tmp_path)
    if repo:
        subprocess.run(["git", "init", "-q", str(base)], check=True)
        subprocess.run(["git", "-C", str(base), "add", "-A"], check=True)
        subprocess.run(
            [
                "git",
                "-C",
                str(base),
                "-c",
                "user.name=a",
                "-c",
                "user.email=a@b",
                "commit",
                "-qm",
                "i",
            ],
            check=True,
        )
        (base / "src" / "a.py").write_text("changed\n")
    if not command.startswith("date -"):
        # The control (never for date: run as root it would set the clock).
        before = snapshot(base)
        touched = run(command, base, fake_bin)
        assert touched or before != snapshot(base), "the control run changed nothing"
    assert not is_read_only(command)


# -- legitimate commands keep working ---------------------------------------------------

STILL_READ_ONLY = [
    "ls -la src",
    "git status",
    "git log --oneline -5",
    "git diff --stat",
    "git grep -n TODO",
    "sort -rn src/a.py",
    "sort --reverse --unique src/a.py",
    "date +%s",
    "date -u",
    "date -d '-1 days'",
    "rg -n TODO",
    "tree -L 2",
    "cat notes.md 2>/dev/null",
    "ls >/dev/null 2>&1",
    "cat <<<hi",
    "echo ${x:-d} ${y: -1} ${z:1:2} ${#w} ${!pre*} ${!arr[@]} ${v@Q}",
    "test -v HOME && echo set",
    "[[ -v HOME ]] && echo set",
    "command -v git",
    "printf '%s\\n' a b",
]


@pytest.mark.parametrize("command", STILL_READ_ONLY)
def test_read_only_commands_stay_read_only(command: str) -> None:
    assert is_read_only(command)


STILL_ALLOWED = [
    "ls -la",
    "ls src >/dev/null 2>&1",
    "ls 2>/dev/null src",
    "git status --short",
    "read -r line <<< hi; ls $line",
    "printf -v out %s 1; ls $out",
    "declare -a arr=(1 2); ls ${arr[0]}",
    "export FOO=bar; ls",
    "f() { local x=1; ls $x; }; f",
    "ls $'src\\x2f' $'\\u0061'",
]


@pytest.mark.parametrize("command", STILL_ALLOWED)
def test_the_rules_still_allow_plain_commands(command: str) -> None:
    allow = PermissionRules(
        allow=[
            "Bash(ls *)",
            "Bash(ls)",
            "Bash(git status*)",
            "Bash(read *)",
            "Bash(printf *)",
            "Bash(declare *)",
            "Bash(export *)",
            "Bash(f)",
        ]
    )
    assert decide(allow, command) is RuleAction.ALLOW


def test_argv_is_bash_argv_with_the_redirections_taken_out() -> None:
    analysis = shell.analyze("printf '%s,' a >f b 2>g c <in d")
    assert analysis.commands[0].argv == ("printf", "%s,", "a", "b", "c", "d")
    assert [r.target for r in analysis.redirects] == ["f", "g", "in"]


def test_words_after_a_compound_commands_redirection_are_unanalyzable() -> None:
    # bash: syntax error; tree-sitter accepts it.
    assert shell.analyze("{ :; } >x rm -rf y").unanalyzable is not None


# -- generated families -------------------------------------------------------------------

WRAPPERS = ["", "command", "env", "env -i", "nice", "timeout 5", "exec", "nohup", "stdbuf -o0"]
REDIRECTIONS = [
    ">/dev/null",
    "2>/dev/null",
    ">>/dev/null",
    "</dev/null",
    "2>&1",
    "&>/dev/null",
    "<<<hi",
]


@st.composite
def redirected_rm(draw: st.DrawFn) -> tuple[str, list[str]]:
    words = [*draw(st.sampled_from(WRAPPERS)).split(), "rm", "-rf", "x"]
    for redirection in draw(st.lists(st.sampled_from(REDIRECTIONS), min_size=1, max_size=3)):
        words.insert(draw(st.integers(0, len(words))), redirection)
    return " ".join(words), words


@SETTINGS
@given(redirected_rm())
def test_no_redirection_placement_hides_a_command(case: tuple[str, list[str]]) -> None:
    command, _ = case
    assert decide(DENY, command) is not RuleAction.ALLOW


@st.composite
def redirected_printf(draw: st.DrawFn) -> str:
    words = [
        "printf",
        "'<%s>'",
        *draw(st.lists(st.sampled_from("ab") | st.just("'c d'"), max_size=4)),
    ]
    redirections = st.sampled_from([">out", ">>out", "2>/dev/null", "<<<hi", "</dev/null"])
    # Always one write to out: bash's argv is printed there for every example.
    for redirection in [">out", *draw(st.lists(redirections, max_size=2))]:
        words.insert(draw(st.integers(0, len(words))), redirection)
    return " ".join(words)


@settings(SETTINGS, max_examples=40)
@given(redirected_printf())
def test_argv_matches_bash(tmp_path_factory: pytest.TempPathFactory, command: str) -> None:
    """The analysis' argv is the argv bash gives printf (which prints it to out)."""
    base = tmp_path_factory.mktemp("argv")
    subprocess.run(
        ["/bin/bash", "-c", command],
        cwd=base,
        check=False,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    printed = (base / "out").read_text() if (base / "out").exists() else None
    analysis = shell.analyze(command)
    assert printed is not None, command  # bash ran the command
    if analysis.unanalyzable is not None:
        # (>o >o printf x: no command node at all) a parse the analysis refuses: it
        # fails closed, never allowed by a pattern.
        assert decide(PermissionRules(allow=["Bash(printf *)"]), command) is RuleAction.ASK
        return
    argv = analysis.commands[0].argv
    args = argv[2:]
    assert printed == ("".join(f"<{a}>" for a in args) if args else "<>")


PAYLOADS = ["a[$(rm -rf x)]", "a[`rm -rf x`]", "x[$(rm -rf x)+1]", "$(rm -rf x)"]
NAME_USES = [
    "test -v {q}",
    "[ -v {q} ]",
    "[[ -v {q} ]]",
    "printf -v {q} 1",
    "printf -v{q} 1",
    "read {q} <<< 1",
    "read -r -a b {q} <<< '1 2'",
    "sleep 0 & wait -n -p {q}",
    "declare {q}=1",
    "typeset {q}=1",
    "f() {{ local {q}=1; }}; f",
    "a=(1 2); unset {q}",
    "v={q}; ls ${{!v}}",
    'v={q}; ls "${{v@P}}"',
    "v={q}; y=abc; ls ${{y:v}}",
    "v={q}; y=abc; ls ${{y:0:v}}",
    "v={q}; a=(1); ls ${{a[@]:v}}",
    "declare -n r={q}; ls $r",
    "declare -i n; n={q}",
    "b[{q}]=1; ls",
    "v={q}; echo $((v))",
    "v={q}; [[ v -eq 1 ]]",
    "command printf -v {q} 1",
    "builtin read {q} <<< 1",
]


def quoted(value: str, style: int) -> str:
    if style == 0:
        return shlex.quote(value)
    if style == 1:
        return '"' + value.replace("$", "\\$").replace("`", "\\`") + '"'
    return "$'" + value.replace("'", "\\'") + "'"


@SETTINGS
@given(st.sampled_from(NAME_USES), st.sampled_from(PAYLOADS), st.integers(0, 2))
def test_no_name_spelling_runs_a_hidden_command(
    tmp_path_factory: pytest.TempPathFactory, use: str, payload: str, style: int
) -> None:
    command = use.format(q=quoted(payload, style))
    action = decide(DENY, command)
    if action is RuleAction.ALLOW:
        # Allowed: then it must really not run rm (fake rm: it only leaves a marker).
        base = tree(tmp_path_factory.mktemp("names"))
        bin_dir = tmp_path_factory.getbasetemp() / "bin0"
        if not bin_dir.exists():
            bin_dir.mkdir()
            (bin_dir / "rm").write_text(FAKE)
            (bin_dir / "rm").chmod(0o755)
        assert "rm" not in run(command, base, bin_dir), command


ESCAPE_PIECES = [
    "\\0",
    "\\00",
    "\\x",
    "\\x0",
    "\\x{",
    "}",
    "\\c",
    "\\u",
    "\\U",
    "\\c@",
    "\\c?",
    "\\\\",
    "\\'",
    '\\"',
    "\\?",
    "\\a",
    "\\e",
    "\\E",
    "\\n",
    "\\z",
    "\\8",
    "\\4",
    "\\x{7",
    "\\x{72}",
    "\\u00",
    "7",
    "2",
    "6",
    "d",
    "f",
    "F",
    "g",
    "r",
    "m",
    "{",
    " ",
    "@",
]


@settings(SETTINGS, max_examples=120)
@given(st.lists(st.sampled_from(ESCAPE_PIECES), max_size=8), st.sampled_from(["C", "C.UTF-8"]))
def test_ansi_c_strings_are_read_as_bash_reads_them(pieces: list[str], locale: str) -> None:
    body = "".join(pieces)
    if re.search(r"(^|[^\\])(\\\\)*\\$", body):
        body += "x"  # a lone backslash at the end would escape the closing quote
    value = shell._ansi_c(body)  # pyright: ignore[reportPrivateUsage]
    out = subprocess.run(
        ["/bin/bash", "-c", f"printf '%s' $'{body}'"],
        env={"LC_ALL": locale, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=True,
    ).stdout
    if value is None:
        return  # the analysis does not claim a value: the word is not a literal
    assert value.encode("utf-8") == out, (body, value, out)


# -- bounded work -------------------------------------------------------------------------

ADVERSARIAL = [
    "ls {" + "," * 60000,
    "ls {" + ".," * 30000,
    "ls '{" + "," * 60000 + "'",
    "ls {a" + ",a" * 30000,
    "git -c '" + "command." * 7000 + "\nx=1' status",
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ADVERSARIAL)
def test_adversarial_lines_are_analyzed(command: str) -> None:
    # Quadratic backtracking took seconds here, and hours at MAX_PARSED_BYTES; the
    # generous timeout only keeps a regression from hanging the suite.
    analysis = shell.analyze(command)
    assert analysis.unanalyzable is None
    assert any(c.argv[:1] in (("ls",), ("git",)) for c in analysis.commands)


@SETTINGS
@given(st.text(alphabet="{},.a\\'", max_size=12))
def test_the_brace_scan_is_the_old_pattern(text: str) -> None:
    old = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
    assert shell._brace(text) == bool(old.search(text))  # pyright: ignore[reportPrivateUsage]


def test_the_brace_scan_looks_at_each_brace_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work proportional to the input: the scan visits each brace once, and each
    stretch between two braces is searched once."""
    seen: list[int] = []
    real = shell._BRACE_CHARS  # pyright: ignore[reportPrivateUsage]

    class Counting:
        def finditer(self, text: str) -> Iterator[re.Match[str]]:
            for match in real.finditer(text):
                seen.append(match.start())
                yield match

    monkeypatch.setattr(shell, "_BRACE_CHARS", Counting())
    text = "{" + "," * 100000
    assert not shell._brace(text)  # pyright: ignore[reportPrivateUsage]
    assert seen == [0]


def test_the_dangerous_variables_include_config_paths() -> None:
    for name in ("RIPGREP_CONFIG_PATH", "LESSKEYIN", "GCONV_PATH", "TAR_OPTIONS"):
        assert shell.analyze(f"{name}=/dev/stdin true").dynamic
