"""``trio-agent --version`` imports none of the commands and none of the library (a
real interpreter); the package's lazy table of public names agrees with what type
checkers read."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import trio_agent

CODE = """
import sys
from trio_agent._cli import main
main(["--version"])
print(sorted(m for m in sys.modules if m.startswith("trio_agent")))
print(sorted(m for m in ("trio", "httpx", "attrs", "jsonschema") if m in sys.modules))
"""


def run_python(code: str) -> list[str]:
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


def test_version_imports_no_command_and_none_of_the_library() -> None:
    version, loaded, third_party = run_python(CODE)
    assert version == f"trio-agent {trio_agent.__version__}"
    assert loaded == str(
        [
            "trio_agent",
            "trio_agent._cli",
            "trio_agent._cli._errors",
            "trio_agent._cli._main",
            "trio_agent._exceptions",  # the errors _errors names
        ]
    )
    assert third_party == "[]"


def test_the_command_imports_httpx_without_its_command_line() -> None:
    """As the process's command (``main()`` without arguments), ``trio-agent run``
    imports httpx but not httpx's own command line (click, rich.syntax, pygments),
    which ``import httpx`` pulls in whenever click and rich are installed."""
    code = """
import atexit, importlib.util, sys
def report():  # the command ends the process itself: this runs at its exit
    wanted = ("httpx", "click", "pygments", "rich.syntax")
    print(sorted(m for m in wanted if m in sys.modules))
    print(sys.modules["httpx._main"].__doc__)
atexit.register(report)
# installed: what makes httpx import its command line
assert importlib.util.find_spec("click") and importlib.util.find_spec("rich")
sys.argv = ["trio-agent", "run", "--help"]
from trio_agent._cli import main
main()
"""
    *_, loaded, doc = run_python(code)
    assert loaded == "['httpx']"  # the command line's own modules are not loaded
    assert doc == "httpx's command line, loaded on first use."


def test_httpx_main_still_runs_the_real_command_line() -> None:
    code = """
import sys
from trio_agent._cli import _main
_main._defer_httpx_cli()
import httpx
print("click" in sys.modules)
try:
    httpx.main(["--help"])
except SystemExit as exc:
    print("exit", exc.code)
print("click" in sys.modules, sys.modules["httpx._main"].__doc__ is None)
"""
    lines = run_python(code)
    assert lines[0] == "False"
    assert any(line.startswith("Usage: httpx") for line in lines)
    assert lines[-2:] == ["exit 0", "True True"]  # the real module, loaded by the call


def test_a_public_name_imports_its_module_when_first_used() -> None:
    code = """
import sys
import trio_agent
print("trio_agent._exceptions" in sys.modules, "trio" in sys.modules)
error = trio_agent.AuthenticationError
print(error.__module__, "trio_agent._exceptions" in sys.modules, "trio_agent._model" in sys.modules)
print(type(trio_agent.lowlevel).__name__, "AuthenticationError" in vars(trio_agent))
"""
    before, after, lowlevel = run_python(code)
    assert before == "False False"
    # the name reports its face from the first use; the model layer is not imported
    assert after == "trio_agent True False"
    assert lowlevel == "module True"


def type_checking_imports() -> dict[str, str]:
    """``NAME -> .module`` of the imports under ``if _typing.TYPE_CHECKING:`` in
    trio_agent/__init__.py (what pyright reads)."""
    tree = ast.parse(pathlib.Path(trio_agent.__file__).read_text(encoding="utf-8"))
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "_typing.TYPE_CHECKING"
    ]
    names: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.unparse(node)
        for alias in node.names:
            assert alias.asname == alias.name, ast.unparse(node)  # a re-export
            names[alias.name] = "." * node.level + (node.module or "")
    return names


def test_the_lazy_table_is_what_type_checkers_read() -> None:
    """Each name of ``_EXPORTS`` has its import under TYPE_CHECKING, from the same
    module, and nothing else is imported there (but the ``lowlevel`` submodule)."""
    table: dict[str, str] = trio_agent._EXPORTS  # pyright: ignore[reportPrivateUsage]
    assert type_checking_imports() == {**table, "lowlevel": "."}
    assert trio_agent.__all__ == sorted(table)


def test_a_command_imports_no_other_command() -> None:
    """``trio-agent run --help`` builds the parser with ``run`` only: none of the
    other commands' modules is imported; ``trio-agent --help`` lists every command."""
    from trio_agent._cli._main import COMMANDS

    code = """
import contextlib, io, sys
from trio_agent._cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["run", "--help"])
print(sorted(m for m in sys.modules if m.startswith("trio_agent._cli.")))
help = io.StringIO()
with contextlib.redirect_stdout(help):
    main(["--help"])
print(help.getvalue().replace("\\n", " "))
"""
    loaded, listing = run_python(code)
    others = {module for name, (module, _) in COMMANDS.items() if name != "run"}
    imported = {name.removeprefix("trio_agent._cli") for name in ast.literal_eval(loaded)}
    assert "._agent" in imported
    assert imported & others == set()
    assert all(f" {name} " in listing for name in COMMANDS)


def test_the_version_printed_is_the_installed_distributions() -> None:
    import importlib.metadata

    assert importlib.metadata.version("trio-agent") == trio_agent.__version__
