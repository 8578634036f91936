"""Splitting a bash command line into the simple commands it would run.

Parsed with tree-sitter-bash (the parser Claude Code uses): every simple command is
found wherever it sits, after ``;``, ``&&``, ``||``, ``|`` or a newline, in a
subshell, a ``$(...)`` or backtick substitution, a process substitution ``<(...)``,
a function body, a loop or a condition. A command line that does not parse cleanly
gives None: permission rules then ask, they never allow it.
"""

from __future__ import annotations

import functools

import tree_sitter
import tree_sitter_bash

__all__ = ["simple_commands"]

#: Node types that run something on their own.
_SIMPLE = frozenset({"command", "declaration_command", "unset_command", "test_command"})
#: A variable assignment is a statement of its own unless a command holds it.
_HOLDERS = frozenset({"command", "declaration_command"})


@functools.cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def _broken(node: tree_sitter.Node) -> bool:
    return node.has_error or node.is_missing


def simple_commands(command: str) -> tuple[str, ...] | None:
    """The text of every simple command in *command*, in source order, or None if it
    does not parse (a syntax error, or a part the parser had to invent).

    Example::

        simple_commands("git status; touch pwned")  # ('git status', 'touch pwned')
        simple_commands("echo $(id)")               # ('echo $(id)', 'id')
    """
    data = command.encode("utf-8", "surrogatepass")
    root = _parser().parse(data).root_node
    if _broken(root):
        return None
    found: list[str] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing or node.type == "ERROR":
            return None
        holder = node.parent
        standalone_assignment = node.type == "variable_assignment" and (
            holder is None or holder.type not in _HOLDERS
        )
        if node.type in _SIMPLE or standalone_assignment:
            found.append(data[node.start_byte : node.end_byte].decode("utf-8", "replace"))
        stack.extend(reversed(node.children))
    return tuple(found)
