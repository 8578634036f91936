"""Which Bash commands are read-only, and so may run beside other read-only calls.

A command line is read-only when the analysis of :mod:`trio_agent._shell` can see
everything it runs (nothing dynamic, nothing unanalyzable, no function defined) and
every simple command in it, substitutions and here-documents included, is on the
allowlist below with flags that neither write nor run another program; and when every
redirection reads, duplicates a descriptor, or writes to ``/dev/null``. Anything else
(an unknown command, ``>``, ``tee``, ``rm``, ``sort -o``, ``find -delete``,
``git diff --output``, a wrapper such as ``sudo`` or ``xargs``) is not.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Callable

from .._shell import SimpleCommand, analyze

__all__ = ["READ_ONLY_COMMANDS", "is_read_only"]


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Commands with no flag that writes a file or runs a program: any arguments.
_ANY_ARGUMENTS = _set(
    "cat head tail wc ls pwd echo printf true false basename dirname realpath "
    "readlink stat du df which type id whoami uname printenv nl cut tr comm "
    "diff cmp md5sum sha1sum sha256sum sha512sum b2sum cksum grep egrep fgrep test [ "
    "seq sleep column fold expand unexpand rev tac od hexdump strings cd jq wait"
)
#: Wrappers that change nothing about what the command does to files.
_HARMLESS_WRAPPERS = frozenset({"command", "time", "nice", "timeout", "stdbuf"})
#: git subcommands that only read (with their writing flags refused below).
_GIT_READERS = _set(
    "status log diff show rev-parse ls-files ls-tree blame describe shortlog "
    "cat-file grep show-ref rev-list merge-base"
)
_GIT_LISTERS = {
    "branch": _set("-a -r -v -vv --list --all --remotes --show-current --no-color --verbose"),
    "tag": _set("-l --list -n"),
    "remote": _set("-v --verbose"),
    "stash": frozenset({"list"}),
    "config": _set("--get --get-all --list -l --show-origin --global --local"),
}
_FIND_WRITES = re.compile(r"^-(exec|execdir|ok|okdir|delete|fprint|fprint0|fprintf|fls)$")
_DESCRIPTOR = re.compile(r"^(\d+|-)$")


def _literal(argv: tuple[str | None, ...]) -> list[str] | None:
    if any(a is None for a in argv):
        return None
    return [a for a in argv if a is not None]


def _long_option(arg: str, dangerous: tuple[str, ...]) -> bool:
    """Whether *arg* is one of the *dangerous* long options as GNU getopt reads it: a
    unique prefix is the option (``--out=f`` is ``--output=f``); an ambiguous one is
    counted too."""
    if not arg.startswith("--") or arg == "--":
        return False
    key = arg[2:].partition("=")[0]
    return bool(key) and any(d.startswith(key) or key.startswith(d) for d in dangerous)


def _short_option(arg: str, letters: str, with_value: str) -> bool:
    """Whether the cluster *arg* (``-rno FILE``) holds one of *letters*; a letter of
    *with_value* takes the rest of the cluster as its value."""
    if not arg.startswith("-") or arg.startswith("--"):
        return False
    for letter in arg[1:]:
        if letter in letters:
            return True
        if letter in with_value:
            return False
    return False


def _refuses(args: list[str] | None, letters: str, with_value: str, *long: str) -> bool:
    """Whether some argument may be a dangerous option (the value of an option that
    takes one is checked too: failing closed)."""
    return args is None or any(
        _short_option(a, letters, with_value) or _long_option(a, long) for a in args
    )


def _sort(args: list[str] | None) -> bool:
    return not _refuses(args, "o", "kStT", "output", "compress-program")


def _tree(args: list[str] | None) -> bool:
    return not _refuses(args, "o", "LPIHT", "output")


def _date(args: list[str] | None) -> bool:
    return not _refuses(args, "s", "dfrI", "set")


def _find(args: list[str] | None) -> bool:
    return args is not None and not any(_FIND_WRITES.match(a) for a in args)


def _rg(args: list[str] | None) -> bool:
    return not _refuses(args, "", "", "pre")


def _git(args: list[str] | None) -> bool:
    if args is None:
        return False
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] in ("-C",):
            i += 2
        elif args[i] in ("--no-pager", "-P", "--no-optional-locks"):
            i += 1
        else:
            return False  # -c, --exec-path, --git-dir...: not modelled
    if i >= len(args):
        return False
    sub, rest = args[i], args[i + 1 :]
    # git's parse-options abbreviates long options too (--open=CMD); -O[CMD] may
    # end any cluster of git grep's flags (-nO'CMD').
    if _refuses(rest, "O", "", "output", "ext-diff", "open-files-in-pager"):
        return False
    if sub in _GIT_READERS:
        return True
    flags = _GIT_LISTERS.get(sub)
    if flags is None:
        return False
    if sub == "stash" and not rest:
        return False  # git stash is git stash push
    if sub == "config":
        return bool(rest) and rest[0] in flags and all(a in flags or a == rest[-1] for a in rest)
    return all(a in flags for a in rest)


#: Commands whose arguments are checked: the check gets the literal arguments (None if
#: one is not a literal) and says whether they only read.
_CHECKED: dict[str, Callable[[list[str] | None], bool]] = {
    "sort": _sort,
    "tree": _tree,
    "date": _date,
    "find": _find,
    "rg": _rg,
    "git": _git,
}
#: Every command the classifier may call read-only.
READ_ONLY_COMMANDS = frozenset(_ANY_ARGUMENTS | _CHECKED.keys())
_SYSTEM_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin"})
#: A longer command is never called read-only (the executor asks on the event loop).
MAX_READ_ONLY_CHARS = 4096


def _command_reads(command: SimpleCommand) -> bool:
    if command.dynamic or not command.argv or command.argv[0] is None:
        return False
    if not set(command.wrappers) <= _HARMLESS_WRAPPERS:
        return False
    word = command.argv[0]
    if "/" in word and posixpath.dirname(word) not in _SYSTEM_DIRS:
        return False  # ./ls is not ls
    name = posixpath.basename(word)
    if name == "command":
        return command.argv[1:2] in (("-v",), ("-V",))
    if name in _ANY_ARGUMENTS:
        return True
    check = _CHECKED.get(name)
    return check is not None and check(_literal(command.argv[1:]))


@functools.lru_cache(maxsize=128)
def is_read_only(command: str) -> bool:
    """Whether *command* provably only reads (see the module).

    Example::

        is_read_only("grep -rn TODO . | head -20")  # True
        is_read_only("ls > listing")                # False
    """
    if len(command) > MAX_READ_ONLY_CHARS:
        return False  # decided on the event loop: no long analysis there
    analysis = analyze(command)
    if analysis.unanalyzable is not None or analysis.dynamic or analysis.functions:
        return False
    if not analysis.commands:
        return False
    for redirect in analysis.redirects:
        op, target = redirect.operator, redirect.target
        if op in ("<", "<<", "<<<", "<<-"):
            continue
        if op in (">&", "<&") and target is not None and _DESCRIPTOR.match(target):
            continue
        if target == "/dev/null" and op in (">", ">>", "&>", "&>>", ">|", ">&"):
            continue
        return False
    return all(_command_reads(c) for c in analysis.commands)
