"""What a bash command line runs: every simple command, as bash will run it.

Parsed with tree-sitter-bash (the parser Claude Code uses), then walked: every simple
command is found wherever it sits (after ``;``, ``&&``, ``||``, ``|``, ``&`` or a
newline, in a subshell, ``{ ...; }``, a function body, a loop, a condition, a
``$(...)``, a backtick substitution (re-parsed after its escapes are removed), a
process substitution, a here-string, or the body of a here-document whose delimiter
is unquoted). Each command is normalized as bash will run it:

- leading variable assignments are removed (an assignment to a variable that changes
  what runs, ``PATH``, ``LD_PRELOAD``, ``BASH_ENV``, ``GIT_SSH_COMMAND``..., makes it
  *dynamic*, see below);
- quotes and backslash escapes are removed from every literal word (``'rm'``, ``\\rm``,
  ``r"m"``, ``$'\\x72m'`` are ``rm``);
- transparent wrappers (:data:`WRAPPERS`: ``command``, ``builtin``, ``exec``, ``env``,
  ``nice``, ``nohup``, ``timeout``, ``stdbuf``, ``time``, ``setsid``, ``ionice``,
  ``xargs``, ``busybox``, ``sudo``, ``doas``) are removed with their options;
- the command word is also known by its basename (``/bin/rm`` is ``rm``).

Commands that run another command line (``eval``, ``sh|bash|zsh|dash|ksh -c``, ``su
-c``, ``sudo -s``, ``find -exec|-execdir|-ok|-okdir``, ``watch``, ``ssh
host cmd`` and its ``ProxyCommand``, ``git -c alias.x=!...``, ``git config`` of an
alias or a command-valued key, ``trap``, ``alias``, ``env -S``) have their inner
line analyzed when it is a literal. When it is not (``eval "$x"``, ``bash script.sh``,
``source f``, ``parallel``, a command word that is an expansion or a glob, an option a wrapper does
not know, an arithmetic expression naming a variable, which bash may evaluate into a
``$(...)``, or a program of :data:`RUNNERS`), the command is *dynamic*: it could run
anything. Permission rules never allow a dynamic command by a pattern and every deny
rule catches it (fail closed).

The analysis is bounded: a line over :data:`MAX_COMMAND_BYTES` or nested deeper than
:data:`MAX_DEPTH` is *unanalyzable*, decided by a linear scan before tree-sitter ever
sees it; so is a line holding more than :data:`MAX_COMMANDS` simple commands, or whose
inner lines add up to more than :data:`MAX_PARSED_BYTES`, or that does not parse cleanly, or whose parse may not be how bash reads it (a
backslash-newline joining two words).
"""

from __future__ import annotations

import functools
import itertools
import posixpath
import re
import threading
from collections.abc import Callable, Iterator

import attrs
import tree_sitter
import tree_sitter_bash

__all__ = [
    "MAX_COMMAND_BYTES",
    "MAX_COMMANDS",
    "MAX_DEPTH",
    "MAX_PARSED_BYTES",
    "RUNNERS",
    "WRAPPERS",
    "Analysis",
    "Redirect",
    "SimpleCommand",
    "analyze",
    "simple_commands",
]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: A command line longer than this (UTF-8 bytes) is not analyzed.
MAX_COMMAND_BYTES = 64 * 1024
#: Nesting deeper than this (subshells, substitutions, groups, inner lines) is not analyzed.
MAX_DEPTH = 200
#: More simple commands than this (in one line, inner lines included) are not analyzed.
MAX_COMMANDS = 1000
#: The most bytes parsed for one command line, inner lines (``eval``, ``sh -c``) included.
MAX_PARSED_BYTES = 4 * MAX_COMMAND_BYTES

#: Wrappers seen through: the command they run is matched, not them.
WRAPPERS = _names(
    "command builtin exec env nice nohup timeout stdbuf time setsid ionice xargs busybox sudo doas"
)
#: Wrappers that change who runs the command: their command is allowed only by a rule
#: that names the wrapper (``Bash(sudo apt *)``), while deny rules still see through.
PRIVILEGED = frozenset({"sudo", "doas"})
#: Shells: ``-c LINE`` is analyzed; any other use runs a script or stdin (dynamic).
SHELLS = _names("sh bash dash zsh ksh mksh ash fish csh tcsh")
#: Programs that run a command this analysis does not follow: always dynamic.
RUNNERS = _names(
    ". source flock strace ltrace chroot runuser script unshare nsenter pkexec sg "
    "newgrp valgrind gdb entr fakeroot proot firejail bwrap systemd-run taskset "
    "chrt numactl prlimit cgexec torsocks proxychains proxychains4 unbuffer "
    "xvfb-run dbus-run-session daemonize start-stop-daemon enable hash coproc "
    "mapfile readarray let fc bind complete compgen"
)
#: Assignments that change what a command runs (a prefix ends in ``*``).
DANGEROUS_VARIABLES = sorted(
    _names(
        "PATH IFS ENV BASH_ENV SHELLOPTS BASHOPTS PS4 PROMPT_COMMAND CDPATH LD_* "
        "DYLD_* BASH_FUNC_* GIT_* PAGER MANPAGER EDITOR VISUAL SSH_ASKPASS LESSOPEN "
        "LESSCLOSE PERL5OPT PERL5LIB PYTHONSTARTUP PYTHONPATH NODE_OPTIONS RUBYOPT"
    )
)

#: Standard directories: a command found there is its basename even for allow rules.
_SYSTEM_DIRS = _names("/bin /usr/bin /usr/local/bin /sbin /usr/sbin")
_NESTING = _names(
    "subshell command_substitution process_substitution compound_statement "
    "if_statement while_statement for_statement c_style_for_statement "
    "case_statement function_definition arithmetic_expansion expansion string "
    "negated_command"
)
_ARITHMETIC = frozenset({"arithmetic_expansion", "c_style_for_statement", "subscript"})
_ARITH_OPS = _names("-eq -ne -lt -le -gt -ge")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")


class _Unanalyzable(Exception):
    pass


@attrs.frozen
class Redirect:
    """One redirection: its operator (``>``, ``>>``, ``<``, ``&>``, ``>&``...) and its
    target, None when the target is not a literal."""

    operator: str
    target: str | None


@attrs.frozen
class SimpleCommand:
    """One command bash would run.

    Attributes:
        text: its source text.
        argv: its words once assignments and wrappers are removed, unquoted; None for
            a word that is not a literal (an expansion, a substitution, a glob).
        wrappers: the wrappers removed, outermost first.
        dynamic: what runs cannot be known (see the module).
        privileged: a wrapper of :data:`PRIVILEGED` runs it (or the line it is in).
        deny_texts: every spelling a deny or ask rule is matched against.
        allow_texts: the spellings an allow rule may match (one suffices); empty when
            no pattern can allow it.
    """

    text: str
    argv: tuple[str | None, ...]
    wrappers: tuple[str, ...] = ()
    dynamic: bool = False
    privileged: bool = False
    deny_texts: tuple[str, ...] = ()
    allow_texts: tuple[str, ...] = ()

    @property
    def name(self) -> str | None:
        """The command word's basename, or None."""
        if not self.argv or self.argv[0] is None:
            return None
        return posixpath.basename(self.argv[0]) or self.argv[0]


@attrs.frozen
class Analysis:
    """Everything a command line runs, or why it cannot be told.

    Attributes:
        commands: every simple command, in source order (inner lines after the
            command that runs them).
        redirects: every redirection of the line and of its inner lines.
        unanalyzable: why the line could not be analyzed (None: it was).
    """

    commands: tuple[SimpleCommand, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    unanalyzable: str | None = None
    #: Function definitions (their bodies' commands are in *commands*).
    functions: tuple[str, ...] = ()

    @property
    def dynamic(self) -> bool:
        """Whether some part could run a command this analysis cannot see."""
        return self.unanalyzable is not None or any(c.dynamic for c in self.commands)


@functools.cache
def _language() -> tree_sitter.Language:
    return tree_sitter.Language(tree_sitter_bash.language())


_local = threading.local()


def _parser() -> tree_sitter.Parser:
    """This thread's parser (a parser is not safe to share: long lines are decided in
    worker threads)."""
    parser: tree_sitter.Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = tree_sitter.Parser(_language())
    return parser


def _nesting_bound(text: str) -> int:
    """An upper bound of the nesting depth, in one linear scan (quotes ignored)."""
    depth = deepest = 0
    for char in text:
        if char in "({`":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")}" and depth:
            depth -= 1
    return deepest


def analyze(command: str) -> Analysis:
    """Analyze *command*; never raises, and is linear in its length.

    Example::

        analyze("FOO=1 timeout 5 /bin/rm -rf x").commands[0].argv  # ('/bin/rm', '-rf', 'x')
        analyze("eval \\"$x\\"").dynamic                               # True
    """
    walker = _Walker()
    try:
        walker.line(command, 0)
    except _Unanalyzable as exc:
        return Analysis(unanalyzable=str(exc))
    except RecursionError:  # pragma: no cover - the depth bound comes first
        return Analysis(unanalyzable="nested too deeply")
    return Analysis(tuple(walker.commands), tuple(walker.redirects), None, tuple(walker.functions))


def simple_commands(command: str) -> tuple[str, ...] | None:
    """The source text of every simple command in *command*, or None if it cannot be
    analyzed.

    Example::

        simple_commands("git status; touch pwned")  # ('git status', 'touch pwned')
    """
    analysis = analyze(command)
    if analysis.unanalyzable is not None:
        return None
    return tuple(c.text for c in analysis.commands)


# -- words ------------------------------------------------------------------------------

_ANSI = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c(.)|(.))",
    re.DOTALL,
)
_ANSI_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}


def _ansi_c(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        hexa, u4, u8, octal, ctrl, other = m.groups()
        try:
            if hexa or u4 or u8:
                return chr(int(hexa or u4 or u8, 16))
            if octal:
                return chr(int(octal, 8) & 0xFF)
        except (ValueError, OverflowError):
            return "\ufffd"
        if ctrl:
            return chr(ord(ctrl) & 0x1F)
        return _ANSI_SIMPLE.get(other, other if other in "\\'\"?" else "\\" + other)

    return _ANSI.sub(one, body)


def _unescape_unquoted(text: str) -> tuple[str, bool]:
    """A bare word's value, and whether it holds an unquoted glob or brace."""
    out: list[str] = []
    special = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        if char in "*?[":
            special = True
        out.append(char)
        i += 1
    value = "".join(out)
    if "{" in text and _BRACE.search(text):
        special = True
    return value, special


def _unescape_double(text: str) -> str:
    return re.sub(r"\\([$`\"\\\n])", lambda m: "" if m.group(1) == "\n" else m.group(1), text)


class _Word:
    """A word's literal value (None: not a literal) and whether it is a glob."""

    __slots__ = ("special", "value")

    def __init__(self, value: str | None, special: bool = False) -> None:
        self.value = value
        self.special = special


def _text(node: tree_sitter.Node, data: bytes) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _word(node: tree_sitter.Node, data: bytes) -> _Word:
    kind = node.type
    if kind in ("word", "number"):
        value, special = _unescape_unquoted(_text(node, data))
        return _Word(value, special)
    if kind == "raw_string":
        return _Word(_text(node, data)[1:-1])
    if kind == "ansi_c_string":
        return _Word(_ansi_c(_text(node, data)[2:-1]))
    if kind == "translated_string":
        return _word(node.children[-1], data) if node.children else _Word(None)
    if kind == "string":
        # Literal only when every child is content; the value is everything between the
        # quotes, not the children joined: tree-sitter leaves a newline inside the quotes
        # between two string_content nodes, and joining them dropped it ("true<NL>rm" read
        # as one word, truerm, where eval runs two commands).
        for child in node.children:
            if child.type not in ('"', "string_content"):
                return _Word(None)
        if node.end_byte - node.start_byte < 2 or data[node.end_byte - 1] != ord('"'):
            return _Word(None)
        inner = data[node.start_byte + 1 : node.end_byte - 1].decode("utf-8", "replace")
        return _Word(_unescape_double(inner))
    if kind == "concatenation":
        values: list[str] = []
        special = False
        for child in node.children:
            part = _word(child, data)
            if part.value is None:
                return _Word(None)
            values.append(part.value)
            special = special or part.special
        text = _text(node, data)
        return _Word("".join(values), special or ("{" in text and bool(_BRACE.search(text))))
    return _Word(None)


# -- the walk ---------------------------------------------------------------------------


def _dangerous(name: str) -> bool:
    return any(
        name.startswith(v[:-1]) if v.endswith("*") else name == v for v in DANGEROUS_VARIABLES
    )


def _continuations(data: bytes) -> Iterator[int]:
    start = 0
    while (i := data.find(b"\\\n", start)) >= 0:
        yield i
        start = i + 2


_WORDISH = _names(
    "word raw_string string ansi_c_string translated_string concatenation number "
    "simple_expansion expansion command_substitution process_substitution command_name "
    "arithmetic_expansion"
)
_RESERVED = _names(
    "{ } ( ) if then else elif fi do done case esac while until for in function select "
    "[[ ]] ! coproc"
)
_QUOTED_LEAVES = _names(
    "raw_string string_content comment heredoc_body heredoc_content ansi_c_string"
)


class _Walker:
    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.redirects: list[Redirect] = []
        self.functions: list[str] = []
        self.parsed = 0

    # A command line: bounds first, then the parse, then the walk.
    def line(self, text: str, depth: int, *, privileged: bool = False) -> None:
        data = text.encode("utf-8", "surrogatepass")
        if len(data) > MAX_COMMAND_BYTES:
            raise _Unanalyzable(f"longer than {MAX_COMMAND_BYTES} bytes")
        self.parsed += len(data)
        if self.parsed > MAX_PARSED_BYTES:
            raise _Unanalyzable(f"its inner command lines exceed {MAX_PARSED_BYTES} bytes")
        if depth + _nesting_bound(text) > MAX_DEPTH:
            raise _Unanalyzable(f"nested deeper than {MAX_DEPTH}")
        if "\0" in text:
            raise _Unanalyzable("it holds a NUL byte")
        root = _parser().parse(data).root_node
        if root.has_error or root.is_missing:
            raise _Unanalyzable("it does not parse")
        for at in _continuations(data):
            node = root.descendant_for_byte_range(at, at + 1)
            if node is not None and node.type in _QUOTED_LEAVES:
                continue
            before = data[at - 1 : at] if at else b" "
            after = data[at + 2 : at + 3] or b" "
            if not before.isspace() and not after.isspace() and before not in b";|&":
                raise _Unanalyzable("a backslash-newline joins two words")
        self.node(root, data, depth, privileged)

    def node(self, root: tree_sitter.Node, data: bytes, depth: int, privileged: bool) -> None:
        stack: list[tuple[tree_sitter.Node, int]] = [(root, depth)]
        while stack:
            node, level = stack.pop()
            kind = node.type
            if kind == "ERROR" or node.is_missing:
                raise _Unanalyzable("it does not parse")
            if kind in _NESTING:
                level += 1
                if level > MAX_DEPTH:
                    raise _Unanalyzable(f"nested deeper than {MAX_DEPTH}")
            if kind == "command":
                self.command(node, data, level, privileged)
            elif kind == "variable_assignment":
                self.assignment(node, data)
            elif kind == "declaration_command":
                self.declaration(node, data)
            elif kind == "function_definition":
                name = node.child_by_field_name("name")
                if name is not None:
                    self.functions.append(_text(name, data))
            elif kind in ("file_redirect", "herestring_redirect"):
                self.redirect(node, data)
            elif kind == "heredoc_redirect":
                self.heredoc(node, data, level, privileged)
                continue
            elif kind == "command_substitution" and _text(node, data).startswith("`"):
                self.backticks(_text(node, data)[1:-1], node, data, level, privileged)
                continue
            elif kind in _ARITHMETIC or (kind == "compound_statement" and _starts(node, "((")):
                self.arithmetic(node, data)
            elif kind == "test_operator" and _text(node, data) in _ARITH_OPS:
                self.dynamic_command(node, data, "an arithmetic test")
            children = node.children
            pairs = itertools.pairwise(children) if kind != "concatenation" else ()
            for left, right in pairs:
                if (
                    left.end_byte == right.start_byte
                    and left.type in _WORDISH
                    and right.type in _WORDISH
                ):
                    # Bash reads one word there; the parser saw two.
                    raise _Unanalyzable("two words the parser split without a space")
            stack.extend((child, level) for child in reversed(children))

    def dynamic_command(self, node: tree_sitter.Node, data: bytes, why: str) -> None:
        text = _text(node, data)
        self.add(SimpleCommand(text, (None,), dynamic=True, deny_texts=(text,)))

    def add(self, command: SimpleCommand) -> None:
        if len(self.commands) >= MAX_COMMANDS:
            raise _Unanalyzable(f"more than {MAX_COMMANDS} simple commands")
        self.commands.append(command)

    def arithmetic(self, node: tree_sitter.Node, data: bytes) -> None:
        # Bash evaluates a variable's value as an expression, which may hold a
        # $(...): x='a[$(rm y)]'; echo $((x)) runs rm.
        stack = list(node.children)
        while stack:
            child = stack.pop()
            if child.type == "variable_name" or (
                child.type == "word" and _IDENT.fullmatch(_text(child, data))
            ):
                if node.type == "subscript" and child is node.children[0]:
                    continue
                self.dynamic_command(node, data, "arithmetic on a variable")
                return
            stack.extend(child.children)

    def assignment(self, node: tree_sitter.Node, data: bytes) -> None:
        name = node.child_by_field_name("name")
        if name is None:
            name = node.children[0] if node.children else None
        if name is not None and _dangerous(_text(name, data).split("[", 1)[0]):
            self.dynamic_command(node, data, "an assignment to a variable that changes what runs")

    def declaration(self, node: tree_sitter.Node, data: bytes) -> None:
        for child in node.children[1:]:
            if child.type in ("word", "variable_name"):
                value = _word(child, data).value if child.type == "word" else _text(child, data)
                if value is None or _dangerous(value.split("=", 1)[0]):
                    self.dynamic_command(node, data, "a declaration that changes what runs")
                    return

    def redirect(self, node: tree_sitter.Node, data: bytes) -> None:
        operator = ""
        target: str | None = None
        for child in node.children:
            if child.type == "file_descriptor":
                continue
            if not child.is_named:
                operator += _text(child, data)
            else:
                target = _word(child, data).value
        self.redirects.append(Redirect(operator or "?", target))

    def heredoc(self, node: tree_sitter.Node, data: bytes, level: int, privileged: bool) -> None:
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        quoted = start is None or any(q in _text(start, data) for q in "'\"\\")
        strip_tabs = any(c.type == "<<-" for c in node.children)
        self.redirects.append(Redirect("<<", None))
        for child in node.children:
            if child.type in ("file_redirect", "herestring_redirect"):
                self.redirect(child, data)
            elif child.type == "heredoc_body":
                if not quoted:
                    self.heredoc_body(_text(child, data), strip_tabs, level, privileged)
            elif child.type not in ("heredoc_start", "heredoc_end") and child.is_named:
                self.node(child, data, level, privileged)

    def heredoc_body(self, body: str, strip_tabs: bool, level: int, privileged: bool) -> None:
        """The body of a here-document with an unquoted delimiter, which bash expands
        as a double-quoted string where ``"`` is a plain character. The parser's
        own reading of bodies is unreliable, so the body is read again as the
        double-quoted string it is equivalent to."""
        if strip_tabs:
            body = "\n".join(line.lstrip("\t") for line in body.split("\n"))
        if not any(t in body for t in ("$(", "${", "$[", "`")):
            return  # nothing in it runs
        if '"' in body:
            raise _Unanalyzable("a here-document that holds both quotes and substitutions")
        self.line(f': "{body}"', level + 1, privileged=privileged)

    def backticks(
        self, inner: str, node: tree_sitter.Node, data: bytes, level: int, privileged: bool
    ) -> None:
        # Inside backticks \\, \` and \$ are escapes: the inner line is re-read
        # without them (nested backticks are escaped ones).
        in_string = node.parent is not None and node.parent.type == "string"
        escapes = r"\\([\\`$\"])" if in_string else r"\\([\\`$])"
        self.line(re.sub(escapes, r"\1", inner), level + 1, privileged=privileged)

    # -- simple commands ----------------------------------------------------------------

    def command(self, node: tree_sitter.Node, data: bytes, level: int, privileged: bool) -> None:
        words: list[_Word] = []
        texts: list[str] = []
        for child in node.children:
            if child.type == "variable_assignment":
                continue  # visited by the walk
            if child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                continue
            if child.type == "command_name":
                child = child.children[0] if child.children else child
            if not child.is_named:
                continue
            words.append(_word(child, data))
            texts.append(_text(child, data))
        if texts and texts[0] in _RESERVED:
            # A reserved word where a command name should be: the parser misread a
            # compound command (``! { rm x; }``).
            raise _Unanalyzable(f"the reserved word {texts[0]!r} used as a command")
        text = _text(node, data)
        _Command(self, text, words, texts, level, privileged).resolve()


def _starts(node: tree_sitter.Node, token: str) -> bool:
    return bool(node.children) and node.children[0].type == token


def _name(value: str) -> str:
    return posixpath.basename(value) or value


_Argv = list[_Word]


class _Dynamic(Exception):
    pass


# Options of the wrappers: those taking a value (as the next word, or attached).
_VALUE_OPTIONS: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]] = {
    # name: (flags, short options with a value, long options with a value)
    "command": (frozenset("p"), frozenset(), frozenset()),
    "builtin": (frozenset(), frozenset(), frozenset()),
    "exec": (frozenset("cl"), frozenset("a"), frozenset()),
    "nice": (frozenset(), frozenset("n"), frozenset({"adjustment"})),
    "nohup": (frozenset(), frozenset(), frozenset()),
    "timeout": (
        frozenset("vf"),
        frozenset("ks"),
        _names("kill-after signal preserve-status foreground verbose"),
    ),
    "stdbuf": (frozenset(), frozenset("ioe"), frozenset({"input", "output", "error"})),
    "time": (frozenset("pvqa"), frozenset("fo"), frozenset({"format", "output"})),
    "setsid": (frozenset("cfw"), frozenset(), frozenset({"ctty", "fork", "wait"})),
    "ionice": (frozenset("t"), frozenset("cn"), frozenset({"class", "classdata"})),
    "xargs": (
        frozenset("0prtxo"),
        frozenset("adEILnPs"),
        _names(
            "arg-file delimiter eof replace max-lines max-args max-procs max-chars "
            "process-slot-var null no-run-if-empty verbose interactive exit open-tty "
            "show-limits"
        ),
    ),
    "busybox": (frozenset(), frozenset(), frozenset()),
    "sudo": (
        frozenset("AbEHkKnPSBN"),
        frozenset("ughpCDrtUTR"),
        _names(
            "user group host prompt close-from chdir role type other-user command-timeout "
            "chroot askpass background preserve-env set-home non-interactive stdin bell "
            "reset-timestamp remove-timestamp preserve-groups"
        ),
    ),
    "doas": (frozenset("n"), frozenset("uC"), frozenset()),
    "env": (
        frozenset("i0v"),
        frozenset("uC"),
        _names(
            "unset chdir ignore-environment null debug default-signal ignore-signal "
            "block-signal list-signal-handling"
        ),
    ),
}
#: Long options that take no value (the rest in _VALUE_OPTIONS' third set do).
_LONG_FLAGS = _names(
    "preserve-status foreground verbose fork wait ctty null no-run-if-empty "
    "interactive exit open-tty show-limits background preserve-env set-home "
    "non-interactive stdin bell reset-timestamp remove-timestamp preserve-groups "
    "ignore-environment debug default-signal ignore-signal block-signal "
    "list-signal-handling"
)
_GIT_EXEC_KEY = re.compile(
    r"(?i)^(alias\..*|.*(command|pager|editor|program|helper|hook|textconv|external|"
    r"fsmonitor|askpass|proxy|cmd|tool)s?(\..*)?|filter\..*|core\.sshcommand)$"
)
_SSH_VALUE = frozenset("bcDEeFIiJLlmOopQRSWwB")
_SSH_EXEC_OPTIONS = re.compile(
    r"(?i)^\s*(proxycommand|localcommand|knownhostscommand|remotecommand)\s*[= ]\s*(.*)$",
    re.DOTALL,
)


class _Command:
    """Resolves one simple command: peels wrappers, follows inner lines."""

    def __init__(
        self,
        walker: _Walker,
        text: str,
        words: list[_Word],
        texts: list[str],
        level: int,
        privileged: bool,
    ) -> None:
        self.walker = walker
        self.text = text
        self.words = words
        self.texts = texts
        self.level = level
        self.privileged = privileged
        self.wrappers: list[str] = []
        #: Each level of peeling: where the command starts in *words*.
        self.starts: list[int] = []

    def inner(self, line: str) -> None:
        self.walker.line(line, self.level + 1, privileged=self.privileged)

    def literal(self, i: int) -> str:
        word = self.words[i]
        if word.value is None or word.special:
            raise _Dynamic
        return word.value

    def joined(self, start: int) -> str:
        return " ".join(self.literal(i) for i in range(start, len(self.words)))

    def resolve(self) -> None:
        start = 0
        try:
            start = self.peel()
            dynamic = False
        except _Dynamic:
            dynamic = True
        self.record(start, dynamic)

    def record(self, start: int, dynamic: bool) -> None:
        argv = tuple(w.value if not w.special else None for w in self.words[start:])
        shown = [
            w.value if w.value is not None else t
            for w, t in zip(self.words, self.texts, strict=True)
        ]
        deny = [self.text]
        for s in dict.fromkeys([0, *self.starts, start]):
            spelled = " ".join(shown[s:])
            deny.append(spelled)
            first = self.words[s].value if s < len(self.words) else None
            if first:
                deny.append(_name(first) + spelled[len(first) :])
        privileged = self.privileged or any(w in PRIVILEGED for w in self.wrappers)
        allow: tuple[str, ...] = ()
        if dynamic or self.privileged:
            pass
        elif privileged:
            allow = (" ".join(shown),)
        else:
            spelled = " ".join(shown[start:])
            first = argv[0] if argv else None
            allow = (spelled,)
            if first and posixpath.dirname(first) in _SYSTEM_DIRS:
                allow = (spelled, _name(first) + spelled[len(first) :])
        self.walker.add(
            SimpleCommand(
                self.text,
                argv,
                tuple(self.wrappers),
                dynamic,
                privileged,
                tuple(dict.fromkeys(deny)),
                allow,
            )
        )

    # -- peeling ------------------------------------------------------------------------

    def peel(self) -> int:
        """The index of the command word once wrappers are removed; follows inner
        lines. Raises _Dynamic when what runs cannot be known."""
        i = 0
        while True:
            if i >= len(self.words):
                # Only a wrapper and its options (``env``, ``exec``): the wrapper runs.
                return self.starts[-1] if self.starts else 0
            name = _name(self.literal(i))
            if name in RUNNERS:
                raise _Dynamic
            if name in SHELLS:
                self.shell(i)
                return i
            runner = self.runners.get(name)
            if runner is not None:
                runner(self, i)
                return i
            if name not in WRAPPERS:
                return i
            if name == "command" and any(
                self.words[j].value in ("-v", "-V") for j in range(i + 1, len(self.words))
            ):
                return i  # command -v only looks the name up
            self.wrappers.append(name)
            self.starts.append(i)
            i = self.options(name, i + 1)
            if name == "env":
                i = self.env_rest(i)
            elif name == "xargs":
                self.xargs_input(self.starts[-1], i)
            elif name == "timeout":
                if i >= len(self.words):
                    return self.starts[-1]
                self.literal(i)  # the duration
                i += 1
            elif name == "sudo" and self.sudo_shell(i):
                return self.starts[-1]
            elif name == "doas" and self.doas_shell:
                self.doas_shell = False
                if i < len(self.words):
                    self.inner(self.joined(i))
                return self.starts[-1]

    doas_shell = False

    def options(self, name: str, i: int) -> int:
        flags, short_values, long_values = _VALUE_OPTIONS[name]
        self.sudo_s = False
        while i < len(self.words):
            word = self.literal(i)
            if word == "--":
                return i + 1
            if name == "nice" and re.fullmatch(r"-\d+", word):
                i += 1
                continue
            if name == "env" and (word == "-" or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word)):
                return i  # env's assignments are read by env_rest
            if name == "env" and (word.startswith("-S") or word.startswith("--split-string")):
                raise _Dynamic  # env -S splits a string of its own
            if not word.startswith("-") or word == "-":
                return i
            if word.startswith("--"):
                key, eq, _ = word[2:].partition("=")
                if key in _LONG_FLAGS:
                    i += 1
                elif key in long_values:
                    i += 1 if eq else 2
                else:
                    raise _Dynamic
                continue
            j = 1
            while j < len(word):
                letter = word[j]
                if name == "sudo" and letter in "si":
                    self.sudo_s = True
                elif name == "doas" and letter == "s":
                    self.doas_shell = True
                elif name == "sudo" and letter in "elvV":
                    raise _Dynamic  # edits, lists or validates: not modelled
                elif letter in short_values:
                    if j + 1 == len(word):
                        i += 1
                        if i >= len(self.words):
                            raise _Dynamic
                        self.literal(i)
                    break
                elif letter not in flags:
                    raise _Dynamic
                j += 1
            i += 1
        return i

    sudo_s = False

    def sudo_shell(self, i: int) -> bool:
        if not self.sudo_s:
            return False
        self.sudo_s = False
        if i < len(self.words):
            self.inner(self.joined(i))
            return True
        raise _Dynamic  # an interactive root shell

    def xargs_input(self, at: int, i: int) -> None:
        """xargs adds what it reads to its command: after the last word, or in place
        of the replace string (-I R, -i[R], --replace[=R]). Those words are not
        literals (see argv_command)."""
        replace: list[str] = []
        for j in range(at + 1, i):
            word = self.words[j].value or ""
            if word == "-I" and j + 1 < i:
                replace.append(self.words[j + 1].value or "")
            elif word.startswith("-I") and len(word) > 2:
                replace.append(word[2:])
            elif word.startswith("--replace"):
                replace.append(word.partition("=")[2] or "{}")
            elif word.startswith("-i"):
                replace.append(word[2:] or "{}")
        if replace:
            for j in range(i, len(self.words)):
                value = self.words[j].value
                if value is not None and any(r and r in value for r in replace):
                    self.words[j] = _Word(None)
        else:
            self.words.append(_Word(None))
            self.texts.append("<input>")

    def env_rest(self, i: int) -> int:
        while i < len(self.words):
            word = self.literal(i)
            if word == "-":
                i += 1
                continue
            name, eq, _ = word.partition("=")
            if not eq or not _IDENT.fullmatch(name):
                break
            if _dangerous(name):
                raise _Dynamic
            i += 1
        if i < len(self.words) and self.literal(i).startswith("-"):
            i = self.options("env", i)
            return self.env_rest(i)
        return i

    # -- command runners ----------------------------------------------------------------

    def shell(self, i: int) -> None:
        # Bash reads every option first (-c among them, -- ends them); with -c, the
        # first operand is the command line, the next ones $0, $1...
        j = i + 1
        line = False
        while j < len(self.words):
            word = self.literal(j)
            if word in ("--", "-"):
                j += 1
                break
            if word in ("-o", "+o", "-O", "+O"):
                j += 2
                continue
            if word.startswith("--"):
                if word in ("--norc", "--noprofile", "--login", "--posix", "--noediting"):
                    j += 1
                    continue
                raise _Dynamic
            if re.fullmatch(r"[-+][a-zA-Z]+", word):
                if "s" in word[1:] or "i" in word[1:]:
                    raise _Dynamic  # reads stdin
                line = line or "c" in word[1:]
                j += 1
                continue
            break
        if line and j < len(self.words):
            self.inner(self.literal(j))
            return
        raise _Dynamic  # a script file, or commands from stdin

    def run_eval(self, i: int) -> None:
        if i + 1 < len(self.words):
            self.inner(self.joined(i + 1))

    def run_trap(self, i: int) -> None:
        j = i + 1
        while j < len(self.words) and self.literal(j) in ("-l", "-p", "--"):
            j += 1
        if j < len(self.words) and j + 1 < len(self.words):
            action = self.literal(j)
            if action not in ("-", ""):
                self.inner(action)

    def run_alias(self, i: int) -> None:
        for j in range(i + 1, len(self.words)):
            _, eq, value = self.literal(j).partition("=")
            if eq:
                self.inner(value)

    def run_su(self, i: int) -> None:
        j = i + 1
        ran = False
        while j < len(self.words):
            word = self.literal(j)
            if word in ("-c", "--command", "--session-command"):
                if j + 1 >= len(self.words):
                    raise _Dynamic
                self.inner(self.literal(j + 1))
                ran = True
                j += 2
                continue
            if word.startswith("--command=") or word.startswith("--session-command="):
                self.inner(word.split("=", 1)[1])
                ran = True
            elif word in ("-s", "--shell", "-g", "--group", "-G", "--supp-group", "-w"):
                raise _Dynamic
            j += 1
        if not ran:
            raise _Dynamic  # an interactive shell

    def run_find(self, i: int) -> None:
        j = i + 1
        while j < len(self.words):
            word = self.literal(j)
            if word in ("-exec", "-execdir", "-ok", "-okdir"):
                end = j + 1
                while end < len(self.words) and self.literal(end) not in (";", "+"):
                    end += 1
                if end == j + 1:
                    raise _Dynamic
                self.argv_command(j + 1, end, "{}")
                j = end
            j += 1

    def argv_command(self, start: int, end: int, placeholder: str = "") -> None:
        # What find puts in place of {} (a path, which may name any program) is not a
        # literal: a command word, a -c line or a wrapper's argument made of it is
        # dynamic; a plain argument stays an argument.
        words = [
            _Word(None) if placeholder and w.value is not None and placeholder in w.value else w
            for w in self.words[start:end]
        ]
        sub = _Command(
            self.walker,
            " ".join(self.texts[start:end]),
            words,
            self.texts[start:end],
            self.level + 1,
            self.privileged,
        )
        sub.resolve()

    def run_git(self, i: int) -> None:
        j = i + 1
        while j < len(self.words):
            word = self.literal(j)
            if word == "-c":
                if j + 1 >= len(self.words):
                    raise _Dynamic
                self.git_config(self.literal(j + 1))
                j += 2
                continue
            if word in ("-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix"):
                j += 2
                continue
            if word.startswith("--exec-path") or word.startswith("--config-env"):
                raise _Dynamic
            if word.startswith("-"):
                j += 1
                continue
            break
        if j < len(self.words) and self.literal(j) == "config":
            args = [w.value for w in self.words[j + 1 :]]
            if any(a is None for a in args):
                raise _Dynamic
            values = [a for a in args if a is not None and not a.startswith("-")]
            for key, value in itertools.pairwise(values):
                if _GIT_EXEC_KEY.match(key):
                    self.inner(value.removeprefix("!"))
            for value in values:
                if value.startswith("!"):
                    self.inner(value[1:])

    def git_config(self, setting: str) -> None:
        key, _, value = setting.partition("=")
        if _GIT_EXEC_KEY.match(key):
            self.inner(value.removeprefix("!"))

    def run_ssh(self, i: int) -> None:
        j = i + 1
        while j < len(self.words):
            word = self.literal(j)
            if word == "--":
                j += 1
                break
            if not word.startswith("-"):
                break
            letters = word[1:]
            for k, letter in enumerate(letters):
                if letter in _SSH_VALUE:
                    value = letters[k + 1 :]
                    if not value:
                        j += 1
                        if j >= len(self.words):
                            raise _Dynamic
                        value = self.literal(j)
                    if letter == "o" and (m := _SSH_EXEC_OPTIONS.match(value)):
                        self.inner(m.group(2))
                    break
            j += 1
        if j + 1 < len(self.words):
            self.inner(self.joined(j + 1))

    def run_watch(self, i: int) -> None:
        j = i + 1
        argv = False
        while j < len(self.words):
            word = self.literal(j)
            if word in ("-n", "--interval", "-q", "--equexit"):
                j += 2
                continue
            if word in ("-x", "--exec"):
                argv = True
            elif not word.startswith("-"):
                break
            elif not re.fullmatch(r"-[bcdegtprw]+|--[a-z-]+(=.*)?|-n\d+(\.\d+)?", word):
                raise _Dynamic
            j += 1
        if j >= len(self.words):
            return
        if argv:
            self.argv_command(j, len(self.words))
        else:
            self.inner(self.joined(j))

    def run_parallel(self, i: int) -> None:
        raise _Dynamic  # {} and ::: arguments make its command line: not modelled

    runners: dict[str, Callable[[_Command, int], None]] = {  # noqa: RUF012
        "eval": run_eval,
        "trap": run_trap,
        "alias": run_alias,
        "su": run_su,
        "find": run_find,
        "git": run_git,
        "ssh": run_ssh,
        "watch": run_watch,
        "parallel": run_parallel,
    }
