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


def _no_output(args: list[str] | None, *long: str) -> bool:
    """No ``-o FILE`` (alone or in a cluster of short flags) and none of *long*."""
    return args is not None and not any(
        re.match(r"^-[a-zA-Z]*o", a) or a.startswith(("--output", *long)) for a in args
    )


def _sort(args: list[str] | None) -> bool:
    return _no_output(args, "--compress-program")


def _tree(args: list[str] | None) -> bool:
    return _no_output(args)


def _date(args: list[str] | None) -> bool:
    return args is not None and not any(a.startswith(("-s", "--set")) for a in args)


def _find(args: list[str] | None) -> bool:
    return args is not None and not any(_FIND_WRITES.match(a) for a in args)


def _rg(args: list[str] | None) -> bool:
    return args is not None and not any(a.startswith("--pre") for a in args)


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
    if any(a.startswith(("--output", "--ext-diff", "-O", "--open-files-in-pager")) for a in rest):
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
