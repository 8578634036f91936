"""Claude Code's command hooks, run by ``trio-agent run`` and ``chat``.

The ``hooks`` of ``~/.claude/settings.json``, ``<workspace>/.claude/settings.json`` and
``<workspace>/.claude/settings.local.json`` (in that order, each event's lists
joined) become a :class:`~trio_agent.Hooks`, so a hook script written for Claude
Code works unchanged::

    {"hooks": {"PreToolUse": [{"matcher": "Bash",
                               "hooks": [{"type": "command",
                                          "command": ".claude/hooks/no-rm.sh",
                                          "timeout": 10}]}]}}

Each command runs with ``bash -c`` (``sh -c`` without bash) in the workspace, with
``CLAUDE_PROJECT_DIR`` set, the event's JSON on stdin (Claude Code's fields:
``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, and the event's
own: ``tool_name``, ``tool_input``, ``tool_use_id``, ``tool_response``, ``error``,
``prompt``, ``stop_hook_active``, ``trigger``), for at most its ``timeout`` seconds
(60 by default; an abort kills it too). What it answers, as Claude Code reads it:

- exit code 2 blocks: the tool call is denied (PreToolUse), the prompt refused
  (UserPromptSubmit), the end of the turn refused (Stop, SubagentStop), with stderr
  as the reason; after a tool (PostToolUse, PostToolUseFailure) stderr is added to
  the result the model reads;
- exit code 0 with JSON on stdout: ``hookSpecificOutput.permissionDecision``
  (``allow`` / ``deny`` / ``ask``, with ``permissionDecisionReason`` and
  ``updatedInput``), ``decision: "block"`` with ``reason``, ``continue: false`` with
  ``stopReason`` (read as a block), ``hookSpecificOutput.additionalContext``; plain
  stdout of a UserPromptSubmit hook is context added to the prompt;
- any other exit code is a non-blocking error: a warning on stderr, and the turn
  goes on.

``matcher`` is a tool-name pattern for the tool events (a regular expression that
must match the whole name; ``""``, ``"*"`` or none: every tool).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sys
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

import attrs
import trio

from .._hooks import Ask, Hooks, StopHookResult, ToolCall
from .._messages import Message, TextBlock, UserMessage
from .._permissions import Deny
from .._tools import ToolOutput

__all__ = [
    "CommandHook",
    "claude_code_hooks",
    "load_settings_hooks",
    "project_hook_files",
    "project_settings",
]

#: Seconds a hook command may run unless its ``timeout`` says otherwise (Claude Code's).
DEFAULT_TIMEOUT: Final = 60.0
#: The events read, and the hooks they become.
EVENTS: Final = (
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "PreCompact",
    "Stop",
    "SubagentStop",
)
_TOOL_EVENTS: Final = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})


@attrs.frozen
class CommandHook:
    """One ``{"type": "command", "command": ..., "timeout": ...}`` of an event."""

    event: str
    command: str
    matcher: str | None = None
    timeout: float = DEFAULT_TIMEOUT

    def matches(self, tool_name: str) -> bool:
        if self.event not in _TOOL_EVENTS or self.matcher in (None, "", "*"):
            return True
        try:
            return re.fullmatch(self.matcher, tool_name) is not None
        except re.error:
            return self.matcher == tool_name


@attrs.frozen
class _Answer:
    """What a command said: its exit code, stdout's JSON (if it was JSON), the texts."""

    code: int | None  # None: it timed out
    data: Mapping[str, Any] | None
    stdout: str
    stderr: str

    @property
    def blocked(self) -> str | None:
        """The reason when the command blocks (exit 2, ``decision: block``,
        ``continue: false``), else None."""
        if self.code == 2:
            return self.stderr.strip() or "blocked by a hook"
        data = self.data
        if self.code != 0 or data is None:
            return None
        if data.get("decision") == "block":
            return str(data.get("reason") or "blocked by a hook")
        if data.get("continue") is False:
            return str(data.get("stopReason") or "stopped by a hook")
        return None

    @property
    def specific(self) -> Mapping[str, Any]:
        if self.code != 0 or self.data is None:
            return {}
        value = self.data.get("hookSpecificOutput")
        return value if isinstance(value, Mapping) else {}  # pyright: ignore[reportUnknownVariableType]

    @property
    def context(self) -> str | None:
        text = self.specific.get("additionalContext")
        return text if isinstance(text, str) and text else None


async def _kill_group(process: trio.Process) -> None:
    """Cancelled (its timeout, an abort): kill the command and whatever it started."""
    with contextlib.suppress(ProcessLookupError):  # it had just ended
        os.killpg(process.pid, signal.SIGKILL)


def _shell() -> list[str]:
    bash = shutil.which("bash")
    return [bash, "-c"] if bash else ["/bin/sh", "-c"]


@attrs.define(eq=False)
class _Runner:
    project_dir: str
    session_id: str
    transcript_path: str | None
    hooks: dict[str, list[CommandHook]]

    def _base(self, event: str) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path or "",
            "cwd": self.project_dir,
            "hook_event_name": event,
            "permission_mode": "default",
        }

    async def _run(self, hook: CommandHook, payload: Mapping[str, Any]) -> _Answer:
        env = {**os.environ, "CLAUDE_PROJECT_DIR": self.project_dir}
        data = json.dumps(payload, ensure_ascii=False, default=str).encode()
        result = None
        with trio.move_on_after(hook.timeout):
            result = await trio.run_process(
                [*_shell(), hook.command],
                stdin=data,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=self.project_dir,
                env=env,
                start_new_session=True,
                deliver_cancel=_kill_group,
            )
        if result is None:
            _warn(hook, f"timed out after {hook.timeout:g} s")
            return _Answer(None, None, "", "")
        out = result.stdout.decode(errors="replace")
        err = result.stderr.decode(errors="replace")
        code = result.returncode
        if code not in (0, 2):
            _warn(hook, f"exited {code}: {err.strip()[:500]}")
        parsed: Mapping[str, Any] | None = None
        if code == 0 and out.strip().startswith("{"):
            try:
                value = json.loads(out)
            except ValueError:
                value = None
            parsed = value if isinstance(value, dict) else None  # pyright: ignore[reportUnknownVariableType]
        return _Answer(code, parsed, out, err)

    async def _each(self, event: str, payload: Mapping[str, Any], tool: str = "") -> list[_Answer]:
        answers: list[_Answer] = []
        for hook in self.hooks.get(event, ()):
            if hook.matches(tool):
                answers.append(await self._run(hook, {**self._base(event), **payload}))
        return answers

    # -- the Hooks callables ---------------------------------------------------------

    async def pre_tool_use(self, call: ToolCall) -> Any:
        payload = {"tool_name": call.name, "tool_input": dict(call.input), "tool_use_id": call.id}
        updated: Mapping[str, Any] | None = None
        for answer in await self._each("PreToolUse", payload, call.name):
            specific = answer.specific
            decision = specific.get("permissionDecision")
            reason = str(specific.get("permissionDecisionReason") or "")
            if decision == "deny":
                return Deny(reason or "denied by a hook")
            if (blocked := answer.blocked) is not None:
                return Deny(blocked)
            if decision == "ask":
                return Ask(reason) if reason else Ask()
            new = specific.get("updatedInput")
            if isinstance(new, Mapping):
                updated = new  # pyright: ignore[reportUnknownVariableType]
                payload = {**payload, "tool_input": dict(updated)}
        return updated

    async def _after(self, event: str, call: ToolCall, result: Any, field: str) -> Any:
        text = _text(result.content)
        payload = {
            "tool_name": call.name,
            "tool_input": dict(call.input),
            "tool_use_id": call.id,
            field: text,
        }
        notes: list[str] = []
        for answer in await self._each(event, payload, call.name):
            if (blocked := answer.blocked) is not None:
                notes.append(blocked)
            if (context := answer.context) is not None:
                notes.append(context)
        if not notes:
            return None
        feedback = "\n\n".join(notes)
        content = result.content
        if isinstance(content, str):
            return ToolOutput(f"{content}\n\n{feedback}", is_error=result.is_error)
        return ToolOutput([*content, TextBlock(feedback)], is_error=result.is_error)

    async def post_tool_use(self, call: ToolCall, result: Any) -> Any:
        return await self._after("PostToolUse", call, result, "tool_response")

    async def post_tool_failure(self, call: ToolCall, result: Any) -> Any:
        return await self._after("PostToolUseFailure", call, result, "error")

    async def user_prompt_submit(self, prompt: UserMessage) -> Deny | str | None:
        added: list[str] = []
        for answer in await self._each("UserPromptSubmit", {"prompt": _text(prompt.content)}):
            if (blocked := answer.blocked) is not None:
                return Deny(blocked)
            if (context := answer.context) is not None:
                added.append(context)
            elif answer.code == 0 and answer.data is None and answer.stdout.strip():
                added.append(answer.stdout.strip())
        return "\n\n".join(added) or None

    async def pre_compact(self, history: tuple[Message, ...]) -> None:
        await self._each("PreCompact", {"trigger": "auto", "custom_instructions": ""})

    async def _stop(self, event: str, payload: Mapping[str, Any]) -> StopHookResult | None:
        reasons = [b for a in await self._each(event, payload) if (b := a.blocked) is not None]
        return StopHookResult(block=True, message="\n\n".join(reasons)) if reasons else None

    async def stop(
        self, messages: tuple[Message, ...], *, stop_hook_active: bool
    ) -> StopHookResult | None:
        return await self._stop("Stop", {"stop_hook_active": stop_hook_active})

    async def subagent_stop(
        self, agent: str, messages: tuple[Message, ...], *, stop_hook_active: bool
    ) -> StopHookResult | None:
        payload = {"stop_hook_active": stop_hook_active, "agent_type": agent}
        return await self._stop("SubagentStop", payload)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(getattr(b, "text", "") for b in content if getattr(b, "text", None))


def _warn(hook: CommandHook, what: str) -> None:
    sys.stderr.write(f"trio-agent: the {hook.event} hook {hook.command!r} {what}\n")


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data: Any = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"trio-agent: {path}: not read ({exc}); its hooks are left out\n")
        return {}
    hooks = _get(data, "hooks")
    return cast("dict[str, Any]", hooks) if isinstance(hooks, dict) else {}


def _get(value: object, key: str, default: Any = None) -> Any:
    """*value*[*key*] when *value* is a JSON object, else *default*."""
    if not isinstance(value, dict):
        return None
    return cast("dict[str, Any]", value).get(key, default)


def _timeout(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1e6:
        return float(value)
    return DEFAULT_TIMEOUT


def load_settings_hooks(paths: Sequence[str]) -> dict[str, list[CommandHook]]:
    """The command hooks of the settings files at *paths*, by event, in order."""
    found: dict[str, list[CommandHook]] = {}
    for path in paths:
        for event, groups in _read(path).items():
            if event not in EVENTS or not isinstance(groups, list):
                continue
            for group in cast("list[object]", groups):
                matcher = _get(group, "matcher")
                for hook in _get(group, "hooks") or ():
                    if _get(hook, "type", "command") != "command":
                        continue
                    command = _get(hook, "command")
                    if not isinstance(command, str) or not command.strip():
                        continue
                    found.setdefault(event, []).append(
                        CommandHook(
                            event,
                            command,
                            matcher if isinstance(matcher, str) else None,
                            _timeout(_get(hook, "timeout")),
                        )
                    )
    return found


def project_settings(project_dir: str) -> list[str]:
    """The project's own settings files (commands a cloned repository brings)."""
    project_dir = os.path.abspath(project_dir)
    return [
        os.path.join(project_dir, ".claude", "settings.json"),
        os.path.join(project_dir, ".claude", "settings.local.json"),
    ]


def project_hook_files(project_dir: str) -> list[str]:
    """Those of :func:`project_settings` that set at least one command hook."""
    return [path for path in project_settings(project_dir) if load_settings_hooks([path])]


def claude_code_hooks(
    project_dir: str,
    *,
    transcript_path: str | None = None,
    home: str | None = None,
    project: bool = True,
) -> Hooks | None:
    """The :class:`~trio_agent.Hooks` of Claude Code's settings for *project_dir*
    (and the user's, under *home*: ``~`` by default), or None when none are set.

    With ``project=False`` only the user's own settings are read: the project's
    files are shell commands that came with the repository (the CLI runs them only
    with ``--project-hooks``, as Claude Code runs them only in a trusted folder)."""
    project_dir = os.path.abspath(project_dir)
    home = home if home is not None else os.path.expanduser("~")
    paths = [os.path.join(home, ".claude", "settings.json")]
    if project:
        paths += project_settings(project_dir)
    found = load_settings_hooks(paths)
    if not found:
        return None
    runner = _Runner(project_dir, str(uuid.uuid4()), transcript_path, found)
    has = found.__contains__
    return Hooks(
        pre_tool_use=runner.pre_tool_use if has("PreToolUse") else None,
        post_tool_use=runner.post_tool_use if has("PostToolUse") else None,
        post_tool_failure=runner.post_tool_failure if has("PostToolUseFailure") else None,
        user_prompt_submit=runner.user_prompt_submit if has("UserPromptSubmit") else None,
        pre_compact=runner.pre_compact if has("PreCompact") else None,
        stop=runner.stop if has("Stop") else None,
        subagent_stop=runner.subagent_stop if has("SubagentStop") else None,
    )
