"""The public faces: what each exports, and that its names report it as their module.

The way trio's own ``test_exports.py`` checks trio: every name of every face's
``__all__`` exists, is public, and (for classes and functions) says it lives in the
face it is exported from, so ``repr``, tracebacks and pickles name the public path
(``trio_agent.AuthenticationError``, never ``trio_agent._exceptions``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import pickle
import traceback
import types
import typing
import warnings

import attrs
import pytest

import trio_agent
import trio_agent.lowlevel

#: Every public face; those of an extra are checked when the extra is installed.
FACES = [
    "trio_agent",
    "trio_agent.lowlevel",
    "trio_agent.tools",
    "trio_agent.testing",
    "trio_agent.testing.strategies",
    "trio_agent.mcp",
    "trio_agent.durable",
    "trio_agent.otel",
    "trio_agent.aio",
]
#: The faces that only gather names defined elsewhere (the others, strategies and
#: otel, are modules of their own that also import what they use).
REEXPORTING_FACES = [
    "trio_agent",
    "trio_agent.lowlevel",
    "trio_agent.tools",
    "trio_agent.testing",
    "trio_agent.mcp",
    "trio_agent.durable",
    "trio_agent.aio",
]

#: Names that moved from ``trio_agent`` to ``trio_agent.lowlevel`` (issue 21).
MOVED = [
    "AccumulatorStatistics",
    "MessageAccumulator",
    "RecoverableModelClient",
    "RetryObserver",
    "StreamEvent",
    "StreamItem",
    "StreamResult",
    "StreamStatistics",
    "TranscriptWriter",
    "block_from_api",
    "message_from_api",
]

PACKAGE = pathlib.Path(trio_agent.__file__).parent


def face(name: str) -> types.ModuleType:
    """The face *name*; the test extra installs every extra, so none is skipped."""
    return importlib.import_module(name)


def is_private_module(name: object) -> bool:
    return (
        isinstance(name, str)
        and name.startswith("trio_agent.")
        and any(part.startswith("_") for part in name.split(".")[1:])
    )


def exported(module: types.ModuleType) -> list[tuple[str, object]]:
    return [(name, getattr(module, name)) for name in module.__all__]


def classes_and_functions(module: types.ModuleType) -> list[tuple[str, object]]:
    return [
        (name, value)
        for name, value in exported(module)
        if inspect.isclass(value) or inspect.isfunction(value)
    ]


@pytest.mark.parametrize("name", FACES)
def test_all_is_sorted_public_and_exists(name: str) -> None:
    module = face(name)
    assert module.__all__ == sorted(set(module.__all__))
    for symbol in module.__all__:
        assert not symbol.startswith("_"), symbol
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a deprecated name is not exported
            assert hasattr(module, symbol), symbol


@pytest.mark.parametrize("name", FACES)
def test_dir_lists_all(name: str) -> None:
    module = face(name)
    assert set(module.__all__) <= set(dir(module))


@pytest.mark.parametrize("name", FACES)
def test_public_names_report_their_face(name: str) -> None:
    module = face(name)
    for symbol, value in classes_and_functions(module):
        assert (value.__module__, value.__qualname__) == (name, symbol), symbol
        assert value.__name__ == symbol
        if inspect.isclass(value):
            # the methods its body defined, too (an attribute bound to an outside
            # function keeps that function's names)
            for attr, member in vars(value).items():
                func = getattr(member, "__func__", member)
                if isinstance(member, property):
                    func = member.fget
                if inspect.isfunction(func) and func.__qualname__.startswith(f"{symbol}."):
                    assert func.__module__ == name, f"{symbol}.{attr}"


@pytest.mark.parametrize("name", REEXPORTING_FACES)
def test_no_private_module_object_is_public_but_unexported(name: str) -> None:
    """A public-looking name of a re-exporting face (an ``__init__``, ``lowlevel``)
    bound to a class or function of a private module is exported: else it is a
    forgotten export, or an import to spell ``_x``."""
    module = face(name)
    for symbol, value in vars(module).items():
        if symbol.startswith("_") or not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if is_private_module(value.__module__):
            assert symbol in module.__all__, f"{name}.{symbol} from {value.__module__}"


@pytest.mark.parametrize("name", FACES)
def test_no_face_reexports_a_public_name_under_a_private_name(name: str) -> None:
    """``from ._x import Thing as _Thing`` in a face hides a private module's public name
    behind a private one; a face's private helpers are its own, or private names."""
    module = face(name)
    for symbol, value in vars(module).items():
        if not symbol.startswith("_") or symbol.startswith("__"):
            continue
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue  # submodules (trio_agent._model, ...) are where packages keep them
        if value.__module__ == name:
            continue  # the face's own helper
        assert value.__name__.startswith("_"), (
            f"{name}.{symbol} is {value.__module__}.{value.__name__}"
        )


def test_the_top_level_exports_every_public_name_it_has() -> None:
    public = {
        name
        for name in dir(trio_agent)
        if not name.startswith("_") and not isinstance(getattr(trio_agent, name), types.ModuleType)
    }
    assert public - set(trio_agent.__all__) == set()


def test_each_class_and_function_has_one_public_home() -> None:
    homes: dict[int, list[str]] = {}
    for name in FACES:
        module = face(name)
        for symbol, value in classes_and_functions(module):
            homes.setdefault(id(value), []).append(f"{name}.{symbol}")
    assert [where for where in homes.values() if len(where) > 1] == []


# -- what fixing the module changes, and what it must not break -----------------------


def test_tracebacks_and_reprs_name_the_public_path() -> None:
    error = trio_agent.AuthenticationError("no API key", status_code=None)
    assert traceback.format_exception_only(error) == [
        "trio_agent.AuthenticationError: no API key\n"
    ]
    assert trio_agent.Session.__module__ == "trio_agent"
    assert repr(trio_agent.TextBlock) == "<class 'trio_agent.TextBlock'>"
    assert trio_agent.Session.submit.__module__ == "trio_agent"
    assert trio_agent.Session.submit.__qualname__ == "Session.submit"
    assert trio_agent.lowlevel.MessageAccumulator.__module__ == "trio_agent.lowlevel"


@pytest.mark.parametrize(
    "value",
    [
        trio_agent.ToolDefinitionError("bad schema"),
        trio_agent.StopHookResult(block=True, message="go on"),
        trio_agent.TurnEndReason.COMPLETED,
        trio_agent.AbortReason.USER_INTERRUPTED,
        trio_agent.Deny("no"),
        trio_agent.lowlevel.StreamEvent("ping", {"type": "ping"}),
        trio_agent.lowlevel.StreamStatistics(events=2, pings=1),
    ],
    ids=lambda value: type(value).__name__,
)
def test_values_pickle_by_their_public_path(value: object) -> None:
    data = pickle.dumps(value)
    assert b"trio_agent._" not in data
    again = pickle.loads(data)
    assert type(again) is type(value)
    if not isinstance(value, BaseException):
        assert again == value


def test_functions_and_classes_pickle_by_reference() -> None:
    for thing in (trio_agent.query, trio_agent.Session, trio_agent.lowlevel.message_from_api):
        assert pickle.loads(pickle.dumps(thing)) is thing


@pytest.mark.parametrize("name", FACES)
def test_type_hints_of_classes_still_resolve(name: str) -> None:
    """``typing.get_type_hints(cls)`` reads a class's string annotations in
    ``sys.modules[cls.__module__]``, now the face: they were resolved before the move,
    so names only the private module imported (``Sequence``, ``Any``) still resolve.
    (A function's hints resolve in its ``__globals__``, which the move leaves alone.)"""
    module = face(name)
    for symbol, value in classes_and_functions(module):
        if not inspect.isclass(value):
            continue
        typing.get_type_hints(value, include_extras=True)
        if attrs.has(value):
            attrs.resolve_types(value)
            for field in attrs.fields(value):
                assert not isinstance(field.type, str), f"{symbol}.{field.name}"


def test_a_tool_taking_a_public_attrs_class_still_gets_its_schema() -> None:
    @trio_agent.tool
    async def decide(verdict: trio_agent.StopHookResult) -> str:
        """Decide."""
        return str(verdict.block)

    schema = decide.input_schema["properties"]["verdict"]
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"block", "message"}


# -- moved and removed names ----------------------------------------------------------


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_name_still_works_with_a_deprecation_warning(name: str) -> None:
    assert name in trio_agent.lowlevel.__all__
    assert name not in trio_agent.__all__
    assert name not in dir(trio_agent)
    with pytest.warns(
        DeprecationWarning, match=rf"trio_agent\.{name} .* trio_agent\.lowlevel\.{name}"
    ) as caught:
        value = getattr(trio_agent, name)
    assert value is getattr(trio_agent.lowlevel, name)
    assert caught[0].filename == __file__  # it points at the caller's line


def test_a_moved_name_imports_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="trio_agent.lowlevel.MessageAccumulator") as caught:
        from trio_agent import MessageAccumulator
    assert MessageAccumulator is trio_agent.lowlevel.MessageAccumulator
    assert caught[0].filename == __file__


@pytest.mark.parametrize("name", ["JsonlSessionStore", "SessionStore", "NoSuchThing"])
def test_removed_and_unknown_names_are_attribute_errors(name: str) -> None:
    with pytest.raises(AttributeError, match=f"module 'trio_agent' has no attribute '{name}'"):
        getattr(trio_agent, name)


# -- one definition of a default ------------------------------------------------------


def test_one_default_max_result_chars() -> None:
    """``DEFAULT_MAX_RESULT_CHARS`` is assigned in ``_options.py`` only; the others import it."""
    from trio_agent import _options

    mcp = face("trio_agent.mcp")
    assert mcp.DEFAULT_MAX_RESULT_CHARS == _options.DEFAULT_MAX_RESULT_CHARS
    assigned = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            if any(isinstance(t, ast.Name) and t.id == "DEFAULT_MAX_RESULT_CHARS" for t in targets):
                assigned.append(path.relative_to(PACKAGE).as_posix())
    assert assigned == ["_options.py"]
