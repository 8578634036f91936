"""The Bash tool's runner on Linux: a child subreaper that leaves no descendant behind.

Run as a script (``python -I -S _reaper.py GRACE PARENT BASH -c COMMAND``), with the standard
library only, so that it starts in a few milliseconds. It makes itself a child
subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): every descendant that loses its parent
(a double fork, ``setsid``, ``set -m`` job control, ``nohup``, ``disown``) is
re-parented to it instead of to init. When bash exits, or when the runner gets
SIGTERM (the tool is stopping: it then gives bash *GRACE* seconds), it SIGKILLs every
child it has, reaps one, and starts over, until it has no child left; then it exits
with bash's status (a signal is re-raised on itself). What a descendant cannot escape
is its ancestry: the only way out of the sweep is to kill the runner first with
SIGKILL, which the tool does only after the runner had its time. If the agent's
process (PARENT) dies, the runner gets SIGTERM (``PR_SET_PDEATHSIG``) and sweeps too.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


class _Stop(Exception):
    pass


def _on_term(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once is enough
    raise _Stop


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def become_subreaper(parent: int) -> None:
    """Make this process a child subreaper (Linux 3.4+) that gets SIGTERM when
    *parent* dies; OSError if it cannot."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the line above
        raise _Stop


def children(pid: int) -> list[int]:
    """The pids whose parent is *pid* (from ``/proc``; zombies included)."""
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(name))
    return found


def sweep(bash: int, status: int | None) -> int | None:
    """SIGKILL every child until none is left; returns bash's wait status if it
    was reaped here."""
    me = os.getpid()
    while True:
        for pid in children(me):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            pid, code = os.waitpid(-1, 0)
        except ChildProcessError:
            return status
        if pid == bash:
            status = code


def wait_for(bash: int, grace: float | None) -> int | None:
    """Reap children (re-parented orphans too) until bash is reaped; with *grace*,
    give up after that many seconds. Returns bash's wait status, or None."""
    deadline = None if grace is None else time.monotonic() + grace
    while True:
        flags = 0 if deadline is None else os.WNOHANG
        try:
            pid, code = os.waitpid(-1, flags)
        except ChildProcessError:
            return None
        if pid == bash:
            return code
        if pid == 0:
            assert deadline is not None
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)


def main(argv: list[str]) -> int:
    grace, parent = float(argv[1]), int(argv[2])
    signal.signal(signal.SIGTERM, _on_term)
    status: int | None = None
    bash = -1
    try:
        become_subreaper(parent)
        # As subprocess does: the signals Python ignores are default again for bash.
        bash = os.posix_spawn(
            argv[3], argv[3:], os.environ, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ)
        )
        status = wait_for(bash, None)
    except _Stop:
        status = wait_for(bash, grace) if bash > 0 else None
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    status = sweep(bash, status)
    if status is None:
        return 128 + signal.SIGKILL
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # bash dumped it already
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
