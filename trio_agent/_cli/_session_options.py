"""The options ``run`` and ``chat`` share, and the session they describe.

:func:`add_session_options` adds them to a subcommand's parser (model, API,
workspace, transcript with ``--continue`` / ``--resume``, ``--allow`` / ``--deny``
permission rules, ``--max-tokens``, ``--json``); :func:`open_session` builds the
:class:`~trio_agent.Session` they describe. An existing transcript is continued
only when asked to (``--continue``, or ``--resume FILE``); never is a second
conversation appended to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import IO, Any, Final

from .._loop import PermissionRules
from .._models import DEFAULT_MODEL as _DEFAULT_MODEL
from .._options import TurnOptions
from .._session import Session, read_transcript
from .._tools import Tool
from ._args import positive_int
from ._errors import CommandError
from ._hooks import claude_code_hooks, project_hook_files
from ._provider import PROVIDERS

__all__ = [
    "DEFAULT_MODEL",
    "add_session_options",
    "open_session",
    "permission_rules",
    "split_rules",
]

#: The model ``run``, ``chat`` and ``stream`` use unless told otherwise:
#: :data:`trio_agent.DEFAULT_MODEL`, defined once in ``trio_agent/_models.py``.
DEFAULT_MODEL: Final = _DEFAULT_MODEL


def split_rules(values: Sequence[str] | None) -> list[str]:
    """``["Read,Grep", "Bash(git a,b)"]`` -> ``["Read", "Grep", "Bash(git a,b)"]``.

    Rules are separated by commas (or spaces) outside parentheses; each flag may
    be given several times.
    """
    rules: list[str] = []
    for value in values or ():
        depth = 0
        current: list[str] = []
        for ch in value:
            if ch == "(":
                depth += 1
            elif ch == ")" and depth > 0:
                depth -= 1
            if depth == 0 and (ch == "," or ch.isspace()):
                rules.append("".join(current))
                current = []
            else:
                current.append(ch)
        rules.append("".join(current))
    return [r for r in rules if r]


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """Add the options of a session against the API to *parser*."""
    parser.add_argument(
        "--model",
        default=None,
        help=f"the model (default: the transcript's when continuing, else {DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--provider",
        choices=PROVIDERS,
        default=None,
        help="the model provider (default: by the model's prefix, e.g. openai:gpt-5, "
        "else anthropic)",
    )
    parser.add_argument(
        "--base-url",
        default=None,
        help="the API's base URL (default: $ANTHROPIC_BASE_URL or $OPENAI_BASE_URL, else "
        "the provider's)",
    )
    parser.add_argument("--workspace", default=".", help="the directory the tools work in")
    parser.add_argument(
        "--transcript",
        metavar="FILE",
        default=None,
        help="record the conversation in this JSONL file (default: none); "
        "an existing one needs --continue",
    )
    parser.add_argument(
        "--continue",
        dest="continue_",
        action="store_true",
        help="continue the conversation in the --transcript file",
    )
    parser.add_argument(
        "--resume",
        metavar="FILE",
        default=None,
        help="pick up the conversation of this transcript, also after a crash "
        "(unfinished tool calls are answered as interrupted)",
    )
    parser.add_argument(
        "--allow",
        metavar="RULES",
        action="append",
        help="run these tools without asking, e.g. 'Read,Grep' or 'Bash(git *)' "
        "(default: Read, Glob, Grep, WebFetch; Write, Edit and Bash are asked)",
    )
    parser.add_argument(
        "--deny",
        metavar="RULES",
        action="append",
        help="never run these tools, e.g. 'Bash(rm *),WebFetch' (default: none)",
    )
    parser.add_argument(
        "--max-tokens",
        type=positive_int,
        default=None,
        help="output tokens per model call (default: 8192, raised up to the model's cap "
        "when an answer is cut by max_tokens)",
    )
    parser.add_argument(
        "--project-hooks",
        action="store_true",
        help="also run the command hooks of the workspace's .claude/settings.json and "
        "settings.local.json (default: only ~/.claude/settings.json's)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON event per line (each has a 'type')"
    )


def permission_rules(args: argparse.Namespace, ask: Any) -> PermissionRules:
    """The default rules with ``--allow`` / ``--deny`` on top, for the files of
    ``--workspace``; asking calls *ask*.

    A tool named in ``--allow`` is no longer asked by default: its calls that match
    the given rules run, the others are asked (no rule matches them).

    Raises:
        PermissionRuleError: a malformed rule.
    """
    default = PermissionRules.default()
    allow = [*map(str, default.allow), *split_rules(args.allow)]
    deny = split_rules(args.deny)
    allowed_tools = {rule.tool for rule in PermissionRules(allow=split_rules(args.allow)).allow}
    ask_rules = [str(r) for r in default.ask if r.tool not in allowed_tools]
    # File rules are resolved against the workspace the tools work in, not the
    # directory the command was started from.
    return PermissionRules(
        allow=allow, ask=ask_rules, deny=deny, ask_callback=ask, root=args.workspace
    )


#: The record types of a transcript's lines (``trio_agent/_session/_transcript.py``).
_RECORD_TYPES: Final = frozenset({"header", "user", "assistant", "history", "pending"})


def _looks_like_a_transcript(path: str) -> bool:
    """Whether *path*'s first line is a transcript record (a JSON object with a
    record ``type``): else it is some other file, never to be written to. A
    transcript that is corrupt further on still looks like one (and reading it
    says where it is corrupt)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20)
        record = json.loads(first)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(record, dict) and record.get("type") in _RECORD_TYPES


def open_session(
    args: argparse.Namespace,
    client: Any,
    tools: Sequence[Tool],
    *,
    can_use_tool: Any,
    err: IO[str],
) -> Session:
    """The session of a ``run`` or ``chat`` command.

    With ``--resume FILE`` (or ``--transcript FILE --continue`` on an existing
    file) the conversation of FILE goes on, repaired if the last session crashed;
    what was found is said on *err*.

    Raises:
        CommandError: the transcript exists but neither ``--continue`` nor
            ``--resume`` was given; ``--resume`` names no file; the file is not a
            transcript; the options contradict each other.
        TranscriptError: the transcript is corrupt.
    """
    path: str | None = args.resume or args.transcript
    if args.resume and args.transcript and args.resume != args.transcript:
        raise CommandError("--resume FILE already names the transcript; drop --transcript")
    if args.continue_ and path is None:
        raise CommandError("--continue needs --transcript FILE (or use --resume FILE)")
    existing = path is not None and os.path.exists(path) and os.path.getsize(path) > 0
    if args.resume and not existing:
        raise CommandError(f"--resume: no transcript at {args.resume}")
    # Claude Code's command hooks (.claude/settings.json), as Claude Code runs them:
    # the user's always, the project's (commands a cloned repository brings) only
    # with --project-hooks.
    workspace = getattr(args, "workspace", ".")
    trusted = bool(getattr(args, "project_hooks", False))
    if not trusted and (skipped := project_hook_files(workspace)):
        names = ", ".join(os.path.relpath(p, workspace) for p in skipped)
        print(
            f"trio-agent: not running the hooks in {names} (shell commands from the "
            "project); pass --project-hooks to run them",
            file=sys.stderr,
        )
    hooks = claude_code_hooks(workspace, transcript_path=path, project=trusted)
    common: dict[str, Any] = {
        "max_tokens": args.max_tokens,
        "options": TurnOptions(can_use_tool=can_use_tool, hooks=hooks),
    }
    if path is None or not existing:
        return Session(
            client,
            tools,
            model=args.model or DEFAULT_MODEL,
            transcript_path=path,
            **common,
        )
    if not _looks_like_a_transcript(path):
        raise CommandError(f"{path} is not a trio-agent transcript; it was left untouched")
    if not (args.resume or args.continue_):
        raise CommandError(
            f"{path} already holds a conversation\n"
            f"add --continue to go on with it (or --resume {path}), or choose another file"
        )
    found = read_transcript(path)
    if found.model is None and not found.messages:
        raise CommandError(f"{path} is not a trio-agent transcript; it was left untouched")
    if args.model:
        common["model"] = args.model
    session = Session.resume(path, client, tools, **common)
    notes = [f"{len(found.messages)} messages"]
    if found.repaired_tool_use_ids:
        n = len(found.repaired_tool_use_ids)
        notes.append(f"{n} unfinished tool call{'s' if n > 1 else ''} answered as interrupted")
    if found.torn_line:
        notes.append("a torn last line dropped")
    err.write(f"trio-agent: continuing {path} ({'; '.join(notes)}; model {session.model})\n")
    return session
