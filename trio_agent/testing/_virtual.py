"""run_virtual: one ``trio.run`` in virtual time, under a leak check."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio
import trio.testing

from ._leaks import LeakCheck

T = TypeVar("T")


def run_virtual(main: Callable[[], Awaitable[T]], *, check: LeakCheck | None = None) -> T:
    """Run ``main()`` with ``trio.run`` on a fresh autojumping ``MockClock``; return its value.

    Meant for hypothesis ``@given`` bodies (one fresh clock per example). The run is
    watched by *check* (default: ``LeakCheck(processes=False)``), which raises
    :class:`LeakError` if the run leaves tasks, sockets or streams behind.

    Example::

        @given(st.integers(0, 5))
        def test_retries(n: int) -> None:
            assert run_virtual(lambda: fetch_with_retries(n)) == "ok"
    """
    check = check if check is not None else LeakCheck(processes=False)
    box: list[T] = []

    async def wrapper() -> None:
        box.append(await main())

    with check:
        trio.run(wrapper, clock=trio.testing.MockClock(autojump_threshold=0), instruments=[check])
    return box[0]
