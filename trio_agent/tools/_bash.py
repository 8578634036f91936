"""The Bash tool: run a shell command in its own process group.

The command is passed as one argument to ``/bin/bash -c``: the runtime never puts
it inside another shell string. stdout and stderr are merged and reported line by
line as progress. Whatever ends the run (exit, timeout, cancellation), the whole
process group is stopped, SIGTERM then SIGKILL, under a shield.

Nothing outlives the tool. On Linux bash runs under a small runner (``_reaper.py``)
that is a child subreaper: descendants that leave the process group (``setsid``,
``set -m``, a double fork) are re-parented to it, and it SIGKILLs and reaps every one
of them before it exits, which the tool awaits. Elsewhere (macOS, the BSDs) only the
process group is killed: a descendant that calls ``setsid`` escapes.
"""

from __future__ import annotations

import codecs
import math
import os
import pathlib
import posixpath
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

import trio

from .._shell import analyze
from .._tools import Tool, ToolContext, ToolOutput
from ._files import tool_error
from ._readonly import MAX_READ_ONLY_CHARS, is_read_only
from ._workspace import Workspace

__all__ = ["Bash", "OutputBuffer"]

BASH = "/bin/bash"
#: Environment variables not passed to commands by default: the model must not be
#: able to print the runtime's credentials into the conversation.
SECRET_VARIABLES = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"})
#: Longest timeout the model may ask for, in seconds (Claude Code: 600000 ms).
MAX_TIMEOUT = 600.0
#: Claude Code's result of a command that printed nothing.
NO_OUTPUT = "(Bash completed with no output)"
#: The exit code Claude Code reports for a command stopped by its timeout.
TIMEOUT_EXIT_CODE = 143
#: Commands whose exit code 1 is an answer, not a failure (as in Claude Code):
#: no match, files differ, a false condition.
#: (Claude Code also counts ``[``, which the shell analysis sees as a test, not a command.)
EXIT_1_IS_AN_ANSWER = frozenset({"grep", "rg", "find", "diff", "test"})
#: How long SIGTERM has to work before SIGKILL.
KILL_GRACE = 0.5
#: How long the runner may take, after SIGTERM, to give bash KILL_GRACE and kill
#: and reap every descendant, before the group gets SIGKILL.
RUNNER_GRACE = 2 * KILL_GRACE + 1.0
#: How long to wait for the end of output once the group is stopped (without the
#: runner, a process that left the group with ``setsid`` may hold the pipe open).
DRAIN_TIMEOUT = 1.0
#: The subreaper runner (Linux): a stdlib-only script.
REAPER = pathlib.Path(__file__).with_name("_reaper.py")

_CHUNK = 65536

#: Claude Code's description of the ``description`` input, word for word.
DESCRIPTION_HELP = """Clear, concise description of what this command does in active voice. \
Never use words like "complex" or "risk" in the description - just describe what it does.

For simple commands (git, npm, standard CLI tools), keep it brief (5-10 words):
- ls → "List files in current directory"
- git status → "Show working tree status"
- npm install → "Install package dependencies"

For commands that are harder to parse at a glance (piped commands, obscure flags, etc.), \
add enough context to clarify what it does:
- find . -name "*.tmp" -exec rm {} \\; → "Find and delete all .tmp files recursively"
- git reset --hard origin/main → "Discard all local changes and match remote main"
- curl -s url | jq '.data[]' → "Fetch JSON from URL and extract data array elements\""""

_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command to execute"},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_TIMEOUT * 1000,
            "description": f"Optional timeout in milliseconds (max {MAX_TIMEOUT * 1000:.0f})",
        },
        "description": {"type": "string", "description": DESCRIPTION_HELP},
    },
    "required": ["command"],
    "additionalProperties": False,
}


class OutputBuffer:
    """Merged output: each complete line goes to *report*, the last *limit*
    characters are kept.

    Memory stays O(limit) whatever the command prints; a line longer than *limit*
    is reported in pieces of *limit* characters.
    """

    def __init__(self, limit: int, report: Callable[[str], None]) -> None:
        self._limit = limit
        self._report = report
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial: list[str] = []
        self._partial_size = 0
        self._kept: list[str] = []
        self._kept_size = 0
        #: Characters dropped from the front to respect the limit.
        self.dropped = 0

    def feed(self, data: bytes | bytearray) -> None:
        """Take the next bytes of output."""
        self._take(self._decoder.decode(data))

    def close(self) -> None:
        """The output has ended: report the last, unterminated line."""
        self._take(self._decoder.decode(b"", final=True))
        if self._partial:
            self._line("".join(self._partial))
            self._partial.clear()

    def text(self) -> str:
        """The kept tail of the output, with a note on what was dropped."""
        kept = "".join(self._kept)
        dropped = self.dropped
        if len(kept) > self._limit:
            dropped += len(kept) - self._limit
            kept = kept[len(kept) - self._limit :]
        if dropped:
            return f"[... {dropped} characters of earlier output dropped ...]\n{kept}"
        return kept

    def _take(self, text: str) -> None:
        if not text:
            return
        self._kept.append(text)
        self._kept_size += len(text)
        if self._kept_size > 2 * self._limit:
            # Amortized: the tail is rebuilt only once the buffer has doubled.
            kept = "".join(self._kept)
            cut = len(kept) - self._limit
            self.dropped += cut
            self._kept = [kept[cut:]]
            self._kept_size = self._limit
        *lines, rest = text.split("\n")
        if lines:
            self._line("".join(self._partial) + lines[0])
            for line in lines[1:]:
                self._line(line)
            self._partial = []
            self._partial_size = 0
        if rest:
            self._partial.append(rest)
            self._partial_size += len(rest)
            if self._partial_size > self._limit:
                # Report whole pieces now; keep 1..limit characters for the next data.
                joined = "".join(self._partial)
                keep = (len(joined) - 1) // self._limit * self._limit
                self._pieces(joined[:keep])
                self._partial = [joined[keep:]]
                self._partial_size = len(joined) - keep

    def _line(self, line: str) -> None:
        line = line.removesuffix("\r")
        if line:
            self._pieces(line)
        else:
            self._report(line)

    def _pieces(self, text: str) -> None:
        for start in range(0, len(text), self._limit):
            self._report(text[start : start + self._limit])


def _signal_group(pgid: int, sig: int) -> bool:
    """Send *sig* to the group; False if it no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def command_line(command: str) -> list[str]:
    """The argv that runs *command*: under the subreaper runner on Linux, bash alone
    elsewhere."""
    if sys.platform == "linux" and sys.executable and REAPER.is_file():
        runner = [sys.executable, "-I", "-S", str(REAPER), str(KILL_GRACE), str(os.getpid())]
        return [*runner, BASH, "-c", command]
    return [BASH, "-c", command]


class _ProcessGroup:
    """The command's process group (``start_new_session``: its id is the pid of the
    process started, the runner or bash)."""

    def __init__(self, process: trio.Process, grace: float) -> None:
        self.process = process
        self._grace = grace
        self._stopped = False

    async def stop(self) -> None:
        """SIGTERM the group, give it *grace* seconds to exit, SIGKILL whatever is
        left, and reap the leader. Idempotent: once stopped, the group id is never
        signalled again (it could be reused)."""
        if not self._stopped:
            pgid = self.process.pid
            if _signal_group(pgid, signal.SIGTERM) and self.process.returncode is None:
                with trio.move_on_after(self._grace):
                    await self.process.wait()
            _signal_group(pgid, signal.SIGKILL)
            self._stopped = True
        await self.process.wait()


async def _pump(stdout: trio.abc.ReceiveStream, output: OutputBuffer, eof: trio.Event) -> None:
    while data := await stdout.receive_some(_CHUNK):
        output.feed(data)
    output.close()
    eof.set()


async def _supervise(
    group: _ProcessGroup, stdout: trio.abc.ReceiveStream, output: OutputBuffer
) -> None:
    eof = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pump, stdout, output, eof)
        await group.process.wait()
        # bash has exited, but background jobs it started may still run (and hold
        # the pipe): they are stopped too, so that nothing outlives the tool.
        await group.stop()
        with trio.move_on_after(DRAIN_TIMEOUT):
            await eof.wait()
        nursery.cancel_scope.cancel()


def exit_code(returncode: int) -> int:
    """The shell's exit code of a process: ``128 + N`` for one killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def duration(ms: float) -> str:
    """A duration as Claude Code words it: ``45s``, ``2m 0s``, ``1h 0m 0s``."""
    if ms < 60_000:
        if ms == 0:
            return "0s"
        if ms < 1:
            return f"{ms / 1000:.1f}s"
        return f"{math.floor(ms / 1000)}s"
    days, hours = int(ms // 86_400_000), int(ms % 86_400_000 // 3_600_000)
    minutes, seconds = int(ms % 3_600_000 // 60_000), math.floor(ms % 60_000 / 1000 + 0.5)
    if seconds == 60:
        seconds, minutes = 0, minutes + 1
    if minutes == 60:
        minutes, hours = 0, hours + 1
    if hours == 24:
        hours, days = 0, days + 1
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m {seconds}s"
    return f"{minutes}m {seconds}s"


def clean_output(text: str) -> str:
    """The output as Claude Code shows it: leading blank lines and trailing
    whitespace removed."""
    return re.sub(r"^(?:[ \t\r\f\v]*\n)+", "", text).rstrip()


def failure(code: int, *parts: str) -> str:
    """Claude Code's text of a failed command: ``Exit code N`` and what it printed."""
    return "\n".join(p for p in (f"Exit code {code}", *parts) if p).strip()


def exit_1_is_an_answer(command: str) -> bool:
    """Whether *command*'s last simple command is one whose exit code 1 means "no"
    (``grep`` found nothing, ``diff`` found a difference, ``test`` was false)."""
    if len(command) > MAX_READ_ONLY_CHARS:
        return False
    analysis = analyze(command)
    if analysis.unanalyzable is not None or not analysis.commands:
        return False
    argv = analysis.commands[-1].argv
    return (
        bool(argv) and argv[0] is not None and posixpath.basename(argv[0]) in (EXIT_1_IS_AN_ANSWER)
    )


def _read_only_call(input: Mapping[str, Any]) -> bool:
    command = input.get("command")
    return isinstance(command, str) and is_read_only(command)


def _environment(env: Mapping[str, str] | None) -> dict[str, str]:
    if env is not None:
        return dict(env)
    return {k: v for k, v in os.environ.items() if k not in SECRET_VARIABLES}


def Bash(
    ws: Workspace,
    *,
    timeout: float = 120.0,
    output_limit: int = 30_000,
    env: Mapping[str, str] | None = None,
) -> Tool:
    """The Bash tool: ``{command, timeout?, description?}`` (Claude Code's inputs;
    ``timeout`` in milliseconds, at most 600000; *timeout* here is the default, in
    seconds).

    Runs ``/bin/bash -c command`` in the workspace root, in a new session (its own
    process group), with stdin from ``/dev/null`` and stderr merged into stdout.
    Each output line is reported with ``ctx.progress(line)``; the result keeps the
    last *output_limit* characters. The texts are Claude Code's: the output, or
    ``(Bash completed with no output)``; a non-zero exit is an error result
    ``Exit code N`` and the output (a signal N gives ``128 + N``; the timeout
    ``Exit code 143`` and ``Command timed out after ...``), except exit code 1 of
    ``grep``, ``rg``, ``find``, ``diff`` and ``test``, which is an answer.
    ``run_in_background`` is not offered: nothing a tool starts outlives it. On any
    end (cancellation included) the process group gets SIGTERM, then SIGKILL; on
    Linux every descendant, even one that left the group, is killed and reaped
    before the tool returns (see the module).

    Bash is not confined to the workspace (only its working directory is): it
    must run only with permission. *env* is the commands' whole environment; by
    default the runtime's own, without ``ANTHROPIC_API_KEY`` and
    ``ANTHROPIC_AUTH_TOKEN``.

    Its error cancels sibling tools; a user interrupt cancels it. A command that
    provably only reads (:func:`._readonly.is_read_only`: ``ls``, ``cat``, ``grep``,
    ``git status``... without writes or redirects to files) is concurrency-safe and
    runs beside other safe calls; any other command runs alone.
    """
    if not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if output_limit < 1:
        raise ValueError(f"output_limit must be positive, not {output_limit!r}")

    async def run(input: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        command: str = input["command"]
        seconds = float(input["timeout"]) / 1000 if "timeout" in input else timeout
        output = OutputBuffer(output_limit, ctx.progress)
        try:
            argv = command_line(command)
            process = await trio.lowlevel.open_process(
                argv,
                cwd=ws.root,
                env=_environment(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the command
            return tool_error(f"cannot start bash: {exc}")
        stdout = process.stdout
        assert stdout is not None
        group = _ProcessGroup(process, RUNNER_GRACE if argv[0] != BASH else KILL_GRACE)
        try:
            with trio.move_on_after(seconds) as deadline:
                await _supervise(group, stdout, output)
        finally:
            # Also on cancellation: stopping the group must not be cancelled itself.
            with trio.move_on_after(RUNNER_GRACE + DRAIN_TIMEOUT, shield=True):
                try:
                    await group.stop()
                finally:
                    await stdout.aclose()  # closes before its checkpoint
        text = clean_output(output.text())
        if deadline.cancelled_caught:
            why = f"Command timed out after {duration(seconds * 1000)}"
            return ToolOutput(failure(TIMEOUT_EXIT_CODE, why, text), is_error=True)
        code = process.returncode
        assert code is not None
        if code != 0 and not (code == 1 and exit_1_is_an_answer(command)):
            return ToolOutput(failure(exit_code(code), text), is_error=True)
        return ToolOutput(text or NO_OUTPUT)

    return Tool(
        "Bash",
        "Executes a given bash command with optional timeout, in the workspace directory.\n\n"
        "Usage notes:\n"
        f"  - You can specify an optional timeout in milliseconds (up to "
        f"{MAX_TIMEOUT * 1000:.0f}ms / {MAX_TIMEOUT / 60:g} minutes). If not specified, "
        f"commands will timeout after {timeout * 1000:.0f}ms ({duration(timeout * 1000)}).\n"
        "  - It is very helpful if you write a clear, concise description of what this "
        "command does.\n"
        f"  - stdout and stderr are merged; output longer than {output_limit} characters "
        "keeps its end.\n"
        "  - Each command runs in a fresh shell: no state (cd, variables) carries over, "
        "and nothing it starts outlives it (no background jobs).\n"
        "  - Avoid using Bash with the `find`, `grep`, `cat`, `head`, `tail`, `sed`, `awk`, "
        "or `echo` commands: use the dedicated Glob, Grep, Read, Edit and Write tools.",
        _SCHEMA,
        run,
        concurrency_safe=_read_only_call,
        interrupt_behavior="cancel",
        cancels_siblings_on_error=True,
    )
