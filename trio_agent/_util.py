"""What the public faces share: their names report the face, moved names warn.

:func:`fixup_module_metadata` makes every name a face exports report that face as its
module (``trio_agent.Session.__module__ == "trio_agent"``, a traceback prints
``trio_agent.AuthenticationError``), as trio's ``trio._util.fixup_module_metadata``
does. :func:`deprecate_attributes` keeps a moved name working, with a
``DeprecationWarning``, as trio's ``_deprecate.deprecate_attributes`` does.

Each face calls them last, after its imports::

    fixup_module_metadata(__name__, globals())
"""

from __future__ import annotations

import importlib
import inspect
import math
import sys
import types
import typing
import warnings
from collections.abc import Mapping

__all__ = ["deprecate_attributes", "finite", "fixup_module_metadata"]

_PACKAGE = "trio_agent"


def _is_private(module: object) -> bool:
    """Whether *module* names a private module of trio_agent (a part starts with ``_``)."""
    if not isinstance(module, str) or not module.startswith(_PACKAGE + "."):
        return False
    return any(part.startswith("_") for part in module.split(".")[1:])


def _freeze_annotations(cls: type) -> None:
    """Resolve *cls*'s own string annotations while its defining module still is
    ``cls.__module__``.

    ``typing.get_type_hints(cls)`` (and so ``attrs.resolve_types``, the ``@tool``
    schema of an attrs parameter) evaluates string annotations in
    ``sys.modules[cls.__module__]``; once that is the face, the names the private
    module imported for its annotations (``Sequence``, ``Any``, its private helpers)
    are not there. A class whose hints do not resolve now is left as it is (they did
    not resolve before either).
    """
    own = inspect.get_annotations(cls)
    if not any(isinstance(value, str) for value in own.values()):
        return
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:
        return
    cls.__annotations__ = {name: hints.get(name, value) for name, value in own.items()}


def fixup_module_metadata(module_name: str, namespace: Mapping[str, object]) -> None:
    """Make each name in ``namespace["__all__"]`` report *module_name* as its module.

    A class or function defined in a private module of trio_agent gets
    ``__module__ = module_name`` (and ``__name__``/``__qualname__`` = the exported
    name); so do the methods, properties and nested classes defined in a class's
    body, recursively. Pickling still works: the face exports the name. Values that
    are not classes or functions (type aliases, constants) are left alone, and so is
    anything defined in a public module already.
    """
    seen: set[int] = set()

    def fix(obj: object, qualname: str, name: str) -> None:
        if isinstance(obj, (classmethod, staticmethod)):
            fix(obj.__func__, qualname, name)
            return
        if isinstance(obj, property):
            for accessor in (obj.fget, obj.fset, obj.fdel):
                if accessor is not None:
                    fix(accessor, qualname, name)
            return
        if not isinstance(obj, (type, types.FunctionType)) or id(obj) in seen:
            return
        seen.add(id(obj))
        if not _is_private(obj.__module__):
            return
        old_qualname = obj.__qualname__
        if isinstance(obj, type):
            _freeze_annotations(obj)
        obj.__module__ = module_name
        obj.__name__ = name
        obj.__qualname__ = qualname
        if isinstance(obj, type):
            for attr, value in list(vars(obj).items()):
                # Only what the class body defined: an attribute bound to a function
                # defined elsewhere keeps that function's names.
                inner: object = value
                if isinstance(value, (classmethod, staticmethod)):
                    inner = typing.cast("object", value.__func__)
                elif isinstance(value, property):
                    inner = value.fget
                if getattr(inner, "__qualname__", None) == f"{old_qualname}.{attr}":
                    fix(value, f"{qualname}.{attr}", attr)

    exported = namespace.get("__all__", ())
    assert isinstance(exported, (list, tuple)), f"{module_name}.__all__ is not a list"
    for name in typing.cast("list[str] | tuple[str, ...]", exported):
        if not name.startswith("_"):
            fix(namespace[name], name, name)


def deprecate_attributes(module_name: str, moved: Mapping[str, str]) -> None:
    """Keep each ``module_name.NAME`` of *moved* working, warning that it moved.

    *moved* maps a name to the module it now lives in. Getting the old name returns
    that module's object and warns ``DeprecationWarning``, pointing at the caller's
    line. Installed as the module's ``__getattr__`` at run time, as trio does, so
    type checkers report the old names as missing (and still catch typos).
    """

    def __getattr__(name: str) -> object:
        new = moved.get(name)
        if new is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(new), name)
        warnings.warn(
            f"{module_name}.{name} is deprecated: use {new}.{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    vars(sys.modules[module_name])["__getattr__"] = __getattr__


def require_extra(face: str, extra: str, *modules: str) -> None:
    """Import *modules* (what the optional *face* needs), or raise a
    ModuleNotFoundError that names the extra to install, as the first thing *face*
    does: a core-only install says ``pip install 'trio-agent[EXTRA]'``."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                f"No module named {exc.name or module!r}: {face} needs "
                f"pip install 'trio-agent[{extra}]'",
                name=exc.name,
            ) from exc


def finite(value: object) -> float | None:
    """*value* as a finite float, or None: not a number, a bool, NaN, an infinity, or
    an integer past a float's range (JSON has no limit: ``10**400`` is valid JSON)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
