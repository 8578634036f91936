"""trio_agent.aio as a public face (the checks tests/test_exports.py makes of the
others): its __all__, the names reporting it as their module, and that importing it
imports no web framework and starts nothing."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing

import attrs

import trio_agent.aio as aio


def test_all_is_sorted_and_every_name_reports_the_face() -> None:
    assert aio.__all__ == sorted(set(aio.__all__))
    for symbol in aio.__all__:
        value = getattr(aio, symbol)
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        assert (value.__module__, value.__qualname__) == ("trio_agent.aio", symbol)
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                func = member.fget if isinstance(member, property) else member
                func = getattr(func, "__func__", func)
                if inspect.isfunction(func) and func.__qualname__.startswith(f"{symbol}."):
                    assert func.__module__ == "trio_agent.aio", f"{symbol}.{attr}"


def test_no_private_class_or_function_is_public_but_unexported() -> None:
    for symbol, value in vars(aio).items():
        if symbol.startswith("_") or not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        assert symbol in aio.__all__, symbol


def test_importing_it_imports_no_framework_and_starts_no_run() -> None:
    code = (
        "import sys, threading, trio_agent.aio\n"
        "assert not {'fastapi', 'starlette', 'uvicorn', 'anyio'} & set(sys.modules), sys.modules\n"
        "assert threading.active_count() == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_type_hints_of_its_classes_resolve() -> None:
    for symbol in aio.__all__:
        value = getattr(aio, symbol)
        if inspect.isclass(value):
            typing.get_type_hints(value, include_extras=True)
            if attrs.has(value):
                attrs.resolve_types(value)
                assert not any(isinstance(f.type, str) for f in attrs.fields(value)), symbol
