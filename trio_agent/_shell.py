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
SHELLS = _names("sh bash rbash dash zsh ksh mksh ash fish csh tcsh")
#: Programs that run a command this analysis does not follow: always dynamic.
RUNNERS = _names(
    ". source flock strace ltrace chroot runuser script unshare nsenter pkexec sg "
    "newgrp valgrind gdb entr fakeroot proot firejail bwrap systemd-run taskset "
    "chrt numactl prlimit cgexec torsocks proxychains proxychains4 unbuffer "
    "xvfb-run dbus-run-session daemonize start-stop-daemon enable hash coproc "
    "mapfile readarray let fc bind complete compgen tmux screen byobu dtach abduco at "
    "batch setpriv capsh sshpass expect"
)
#: Assignments that change what a command runs (a prefix ends in ``*``).
DANGEROUS_VARIABLES = sorted(
    _names(
        "PATH IFS ENV BASH_ENV SHELLOPTS BASHOPTS PS4 PROMPT_COMMAND CDPATH LD_* "
        "DYLD_* BASH_FUNC_* GIT_* PAGER MANPAGER EDITOR VISUAL SSH_ASKPASS LESSOPEN "
        "LESSCLOSE PERL5OPT PERL5LIB PYTHONSTARTUP PYTHONPATH NODE_OPTIONS RUBYOPT "
        # Variables that make a program load options, code or a command from a file.
        "RIPGREP_CONFIG_PATH LESS LESSKEY* LESSKEYIN* SYSTEMD_PAGER SYSTEMD_EDITOR "
        "SUDO_EDITOR SUDO_ASKPASS BROWSER GCONV_PATH PYTHONHOME PERLLIB PERL5DB RUBYLIB "
        "NODE_PATH JAVA_TOOL_OPTIONS _JAVA_OPTIONS BASH_LOADABLES_PATH ZDOTDIR FPATH "
        "LUA_INIT* TAR_OPTIONS"
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
#: In arithmetic, what bash may read as a variable (whose value is evaluated in turn).
_ARITH_NAME = re.compile(r"(?:^|[^0-9A-Za-z_])[A-Za-z_]|\[")
_ARITH_EXPANDED = _names(
    "variable_name raw_string string ansi_c_string translated_string simple_expansion "
    "expansion command_substitution process_substitution"
)
#: A substring offset or length with no name in it (bash evaluates it arithmetically).
_PLAIN_ARITHMETIC = re.compile(r"[\s0-9:+\-*/%()]*")
#: ``${!name*}``, ``${!name@}``, ``${!name[@]}``: names or keys, not an indirection.
_LISTING = re.compile(r"\$\{![A-Za-z_][A-Za-z0-9_]*(?:[@*]|\[[@*]\])\}")
_BRACE_CHARS = re.compile(r"[{}]")


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
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_HEX = frozenset("0123456789abcdefABCDEF")
_OCTAL = frozenset("01234567")


def _digits(body: str, i: int, allowed: frozenset[str], most: int) -> int:
    """Where the run of at most *most* *allowed* characters from *i* ends."""
    j = i
    while j < len(body) and j - i < most and body[j] in allowed:
        j += 1
    return j


def _ansi_c(body: str) -> str | None:
    """The value of ``$'body'`` as bash 5.2 reads it, or None when it depends on the
    locale or is not plain text (a character over 0x7f from an escape).

    Bash's strings end at a NUL: what follows ``\\0``, ``\\x00``, ``\\c@``... is dropped.
    """
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        char = body[i]
        if char != "\\" or i + 1 >= n:
            out.append(char)
            i += 1
            continue
        escape = body[i + 1]
        i += 2
        code: int | None = None
        if escape in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[escape])
            continue
        if escape in _OCTAL:
            j = _digits(body, i, _OCTAL, 2)
            code = int(body[i - 1 : j], 8) & 0xFF
            i = j
        elif escape == "x" and i < n and body[i] == "{":
            # \x{HHH...}: any number of digits, the value's low byte; the } is optional.
            j = _digits(body, i + 1, _HEX, n)
            code = int(body[i + 1 : j], 16) & 0xFF if j > i + 1 else 0
            i = j + 1 if j < n and body[j] == "}" else j
        elif escape in "xuU":
            j = _digits(body, i, _HEX, {"x": 2, "u": 4, "U": 8}[escape])
            if j == i:
                out.append("\\" + escape)
                continue
            code = int(body[i:j], 16)
            i = j
        elif escape == "c" and i < n:
            control = body[i]
            i += 1
            if control == "\\" and i < n and body[i] == "\\":
                i += 1
            code = 0x7F if control == "?" else ord(control.upper()) & 0x1F
            if ord(control) > 0x7F:
                return None
        else:
            out.append("\\" + escape)
            continue
        if code == 0:
            break  # the string ends there
        if code > 0x7F:
            return None  # a raw byte, or a character bash encodes by the locale
        out.append(chr(code))
    return "".join(out)


def _brace(text: str) -> bool:
    """Whether *text* may hold a brace expansion: ``{`` and then ``,`` or ``..``
    before the next brace, which is ``}``. One linear scan (a regex backtracked)."""
    if "{" not in text:
        return False
    opened = -1
    for match in _BRACE_CHARS.finditer(text):
        at = match.start()
        if text[at] == "{":
            opened = at
        elif opened >= 0:
            inside = text[opened + 1 : at]
            if "," in inside or ".." in inside:
                return True
            opened = -1
    return False


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
    return value, special or _brace(text)


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
        return _Word("".join(values), special or _brace(text))
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
            elif kind in ("declaration_command", "unset_command"):
                self.declaration(node, data)
            elif kind == "redirected_statement":
                self.redirected(node)
            elif kind == "expansion":
                self.expansion(node, data)
            elif kind == "unary_expression":
                self.unary_test(node, data)
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
        # A quoted string or a substitution there is expanded, then evaluated:
        # b['a[$(rm y)]']=1 runs rm.
        stack = list(node.children)
        while stack:
            child = stack.pop()
            if child.type in _ARITH_EXPANDED or (
                child.type == "word" and _ARITH_NAME.search(_text(child, data))
            ):
                if node.type == "subscript" and child == node.children[0]:
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
        """``declare``, ``typeset``, ``local``, ``export``, ``readonly``, ``unset``."""
        builtin = _text(node.children[0], data) if node.children else ""
        args: list[str | None] = []
        for child in node.children[1:]:
            if child.type == "variable_assignment":
                continue  # visited by the walk (its subscript too)
            if child.type == "variable_name":
                args.append(_text(child, data))
            elif child.is_named:
                args.append(_word(child, data).value)
        if _names_dynamic(builtin, args):
            self.dynamic_command(node, data, "a declaration that changes what runs")

    def redirected(self, node: tree_sitter.Node) -> None:
        # The words after a redirection's target are arguments of its simple command
        # (read with it); a compound command has none: bash would not parse it.
        body = node.child_by_field_name("body")
        if body is not None and body.type == "command":
            return
        for child in node.children:
            if child.type.endswith("_redirect") and _extra_words(child):
                raise _Unanalyzable("words after the redirection of a compound command")

    def expansion(self, node: tree_sitter.Node, data: bytes) -> None:
        text = _text(node, data)
        children = node.children
        if len(children) > 1 and children[1].type == "!" and not _LISTING.fullmatch(text):
            # ${!x} expands the variable x names, and x may name 'a[$(rm y)]'.
            self.dynamic_command(node, data, "an indirect expansion")
        elif text.endswith("@P}"):
            self.dynamic_command(node, data, "a prompt expansion runs substitutions")
        else:
            for child in children:
                if child.type == ":":
                    rest = data[child.end_byte : node.end_byte - 1].decode("utf-8", "replace")
                    if not _PLAIN_ARITHMETIC.fullmatch(rest):
                        self.dynamic_command(node, data, "a substring of an expression")
                    break

    def unary_test(self, node: tree_sitter.Node, data: bytes) -> None:
        # [[ -v NAME ]] evaluates NAME's subscript.
        children = node.children
        if len(children) == 2 and _text(children[0], data) in ("-v", "-R"):
            value = _word(children[1], data).value
            if value is None or not _IDENT.fullmatch(value):
                self.dynamic_command(node, data, "a test of a subscripted name")

    def redirect(self, node: tree_sitter.Node, data: bytes) -> None:
        operator = ""
        target: str | None = None
        seen = False
        for child in node.children:
            if child.type == "file_descriptor":
                continue
            if not child.is_named:
                if not seen:
                    operator += _text(child, data)
            elif not seen:
                # Only the first word is the target; the next ones are arguments of
                # the command (see _extra_words).
                target = _word(child, data).value
                seen = True
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
        # Bash's argv is the words with the redirections taken out wherever they are:
        # in ``W >/dev/null a b`` the parser gives the redirection the destinations
        # /dev/null a b, where bash writes to /dev/null and runs W a b.
        nodes: list[tree_sitter.Node] = []
        redirects = [c for c in node.children if c.type.endswith("_redirect")]
        parent = node.parent
        if parent is not None and parent.type == "redirected_statement":
            body = parent.child_by_field_name("body")
            if body is not None and body == node:
                redirects += [c for c in parent.children if c.type.endswith("_redirect")]
        for child in node.children:
            if child.type == "variable_assignment" or child.type.endswith("_redirect"):
                continue  # visited by the walk
            if child.type == "command_name":
                child = child.children[0] if child.children else child
            if child.is_named:
                nodes.append(child)
        for redirect in redirects:
            nodes.extend(_extra_words(redirect))
        nodes.sort(key=lambda n: n.start_byte)
        words = [_word(child, data) for child in nodes]
        texts = [_text(child, data) for child in nodes]
        if texts and texts[0] in _RESERVED:
            # A reserved word where a command name should be: the parser misread a
            # compound command (``! { rm x; }``).
            raise _Unanalyzable(f"the reserved word {texts[0]!r} used as a command")
        text = _text(node, data)
        _Command(self, text, words, texts, level, privileged).resolve()


def _extra_words(redirect: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The words the parser put in a redirection after its target: arguments."""
    extra: list[tree_sitter.Node] = []
    if redirect.type == "heredoc_redirect":
        children = redirect.children
        start = next((k for k, c in enumerate(children) if c.type == "heredoc_start"), None)
        for child in children[len(children) if start is None else start + 1 :]:
            if child.type in _WORDISH:
                extra.append(child)
            elif child.type in ("file_redirect", "herestring_redirect"):
                extra.extend(_extra_words(child))
            else:
                break  # the body, or the rest of a pipeline or list
        return extra
    destinations = [c for c in redirect.children if c.is_named and c.type != "file_descriptor"]
    return destinations[1:]


#: Builtins that take variable names, with their getopt strings: a name with a
#: subscript is evaluated (``read 'a[$(rm y)]'`` runs rm), and a name may be one
#: that changes what runs (``printf -v PS4 ...``).
_NAME_OPTIONS = {"printf": "v:", "read": "ersa:d:i:n:N:p:t:u:", "wait": "fnp:"}
_NAME_VALUES = {"printf": "v", "read": "a", "wait": "p"}
_DECLARATIONS = _names("declare typeset local export readonly")
#: Builtins whose names are checked (:func:`_names_dynamic`).
NAME_BUILTINS = _DECLARATIONS | _NAME_OPTIONS.keys() | _names("unset getopts test [")
_SUBSCRIPT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[0-9]+\])?\+?")


def _bad_name(name: str | None, *, assigned: bool = True) -> bool:
    """A name argument that bash may evaluate, or whose assignment changes what runs."""
    if name is None or not _SUBSCRIPT.fullmatch(name):
        return True
    return assigned and _dangerous(name.split("[", 1)[0].rstrip("+"))


def _getopt(args: list[str | None], optstring: str) -> tuple[dict[str, list[str | None]], int]:
    """A builtin's options (each letter's values) and where its operands start."""
    values: dict[str, list[str | None]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg is None or arg == "--":
            return values, i + (arg == "--")
        if not arg.startswith("-") or arg == "-":
            break
        j = 1
        while j < len(arg):
            letter = arg[j]
            at = optstring.find(letter)
            if at >= 0 and optstring[at + 1 : at + 2] == ":":
                if j + 1 < len(arg):
                    values.setdefault(letter, []).append(arg[j + 1 :])
                else:
                    i += 1
                    values.setdefault(letter, []).append(args[i] if i < len(args) else None)
                break
            values.setdefault(letter, [])
            j += 1
        i += 1
    return values, i


def _names_dynamic(builtin: str, args: list[str | None]) -> bool:
    """Whether a builtin of :data:`NAME_BUILTINS` given *args* (None: not a literal)
    may run what the analysis cannot see."""
    if builtin in ("test", "["):
        return any(
            a in ("-v", "-R") and (b is None or not _IDENT.fullmatch(b))
            for a, b in itertools.pairwise(args)
        )
    if builtin == "getopts":
        return len(args) > 1 and _bad_name(args[1])
    if builtin in _NAME_OPTIONS:
        options, operands = _getopt(args, _NAME_OPTIONS[builtin])
        names = options.get(_NAME_VALUES[builtin], [])
        if builtin == "read":
            names = names + args[operands:]
        return any(_bad_name(n) for n in names)
    if builtin == "unset":
        return any(a is None or ("[" in a and not _SUBSCRIPT.fullmatch(a)) for a in args)
    for arg in args:
        if arg is None:
            return True
        if arg[:1] in ("-", "+") and len(arg) > 1:
            # declare -n makes a nameref, -i evaluates every later assignment.
            if builtin in ("declare", "typeset", "local") and ("n" in arg or "i" in arg):
                return True
            continue
        name, eq, value = arg.partition("=")
        if _bad_name(name) or (eq and value.startswith("(")):
            return True  # a quoted compound assignment evaluates its subscripts
    return False


def _git_grep_pager(arg: str | None) -> bool:
    """``git grep -O[CMD]`` (in any cluster) or ``--open-files-in-pager`` abbreviated:
    runs CMD."""
    if arg is None or not arg.startswith("-"):
        return False
    if arg.startswith("--"):
        key = arg[2:].partition("=")[0]
        return bool(key) and "open-files-in-pager".startswith(key)
    return "O" in arg


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
# DOTALL: without it a key of many "command." and a newline backtracked quadratically.
_GIT_EXEC_KEY = re.compile(
    r"(?i)^(alias\..*|.*(command|pager|editor|program|helper|hook|textconv|external|"
    r"fsmonitor|askpass|proxy|cmd|tool|uploadpack|receivepack)s?(\..*)?|filter\..*|"
    r"core\.sshcommand)$",
    re.DOTALL,
)
#: Long options of git subcommands that name a command to run (getopt abbreviates).
_GIT_EXEC_OPTIONS = _names("upload-pack receive-pack exec")
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
            if name == "command" and self.command_looks_up(i):
                return i  # command -v only looks the name up
            self.wrappers.append(name)
            self.starts.append(i)
            i = self.options(name, i + 1)
            if name in PRIVILEGED:
                i = self.env_rest(i, options=False)  # sudo FOO=1 cmd sets FOO for cmd
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

    def command_looks_up(self, i: int) -> bool:
        """Whether ``command``'s own options (before its command word) hold -v or -V."""
        for word in self.words[i + 1 :]:
            value = word.value
            if value is None or not re.fullmatch(r"-[pvV]+", value):
                return False
            if "v" in value or "V" in value:
                return True
        return False

    def env_rest(self, i: int, *, options: bool = True) -> int:
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
        if options and i < len(self.words) and self.literal(i).startswith("-"):
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
        # su reads its options with getopt_long: -c may be repeated (the last one
        # runs; all are analyzed), attached (-cCMD), in a cluster (-lc CMD) or
        # abbreviated (--comm=CMD); what follows -- goes to the shell.
        j = i + 1
        ran = False
        while j < len(self.words):
            word = self.literal(j)
            line: str | None = None
            attached = False
            if word == "--":
                raise _Dynamic  # su user -- -c CMD: the shell reads those
            if word.startswith("--"):
                key, eq, rest = word[2:].partition("=")
                if key and any(o.startswith(key) for o in ("command", "session-command")):
                    line, attached = rest, bool(eq)
                elif key and any(
                    o.startswith(key)
                    for o in ("shell", "group", "supp-group", "whitelist-environment")
                ):
                    raise _Dynamic
            elif m := re.fullmatch(r"-([a-zA-Z]*?)c(.*)", word, re.DOTALL):
                if set(m.group(1)) - set("flmpP"):
                    raise _Dynamic
                line, attached = m.group(2), bool(m.group(2))
            elif re.match(r"-[a-zA-Z]*[sgGw]", word):
                raise _Dynamic
            if line is not None:
                if not attached:
                    j += 1
                    if j >= len(self.words):
                        raise _Dynamic
                    line = self.literal(j)
                self.inner(line)
                ran = True
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
        for word in self.words[j:]:
            value = word.value or ""
            key = value[2:].partition("=")[0] if value.startswith("--") else ""
            if value.lower().startswith("ext::") or (
                len(key) > 1 and any(o.startswith(key) for o in _GIT_EXEC_OPTIONS)
            ):
                raise _Dynamic  # a command to run, or a URL that runs one
        sub = self.words[j].value if j < len(self.words) else None
        rest = [w.value for w in self.words[j + 1 :]]
        if (
            sub in ("filter-branch", "mergetool", "difftool")
            or (sub == "bisect" and "run" in rest)
            or (sub == "submodule" and "foreach" in rest)
            or (sub == "rebase" and any(r and re.match(r"-[a-zA-Z]*x", r) for r in rest))
            or (sub == "grep" and any(_git_grep_pager(r) for r in rest))
        ):
            raise _Dynamic  # runs a command line of its arguments
        if j < len(self.words) and self.literal(j) == "config":
            args = [w.value for w in self.words[j + 1 :]]
            if any(a is None for a in args):
                raise _Dynamic
            values = [a for a in args if a is not None and not a.startswith("-")]
            if any(v.lower().startswith("protocol.") for v in values):
                raise _Dynamic
            for key, value in itertools.pairwise(values):
                if _GIT_EXEC_KEY.match(key):
                    self.inner(value.removeprefix("!"))
            for value in values:
                if value.startswith("!"):
                    self.inner(value[1:])

    def git_config(self, setting: str) -> None:
        key, _, value = setting.partition("=")
        if key.lower().startswith("protocol."):
            raise _Dynamic  # protocol.ext.allow lets an ext:: URL run a command
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

    def run_names(self, i: int) -> None:
        args = [w.value if not w.special else None for w in self.words[i + 1 :]]
        if _names_dynamic(_name(self.literal(i)), args):
            raise _Dynamic

    def run_sort(self, i: int) -> None:
        for word in self.words[i + 1 :]:
            value = word.value or ""
            key = value[2:].partition("=")[0] if value.startswith("--") else ""
            if key and "compress-program".startswith(key):
                raise _Dynamic  # sort runs the program to compress its temporary files

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
        "sort": run_sort,
    }
    runners.update(dict.fromkeys(NAME_BUILTINS, run_names))
