"""``python -m benchmarks list | run [NAMES...] [--quick] [--json PATH] [--svg PATH]
[--markdown PATH] [--repeat N] | verify [NAMES...] [--against JSON] [--tolerance 0.1]``."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ._config import Benchmark, Config
from ._guard import BENCHMARK_TIMEOUT, QUICK_BENCHMARK_TIMEOUT, watchdog
from ._markdown import from_json, source_state, write_markdown
from ._report import Series, text_table, to_json, to_svg
from ._verify import DEFAULT_REFERENCE, verify

# The registry (every benchmark module) and the child processes' modules are imported
# where they are used: `serve` and the children import only what they run, so a
# child's peak RSS (a figure of `scale` and `scale_10k`) holds nothing else.


def _registry() -> Mapping[str, Benchmark]:
    from ._registry import BY_NAME

    return BY_NAME


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {
            name: _version(name)
            for name in ("trio", "httpx", "httpx-sse", "anthropic", "pydantic-ai-slim", "attrs")
        },
    }


def run_benchmarks(names: Sequence[str], config: Config) -> tuple[list[Series], int]:
    """Run *names* in order; a benchmark that fails becomes a skipped row. Returns
    the rows and the number of failed benchmarks. The server is stopped at the end."""
    registry = _registry()
    results: list[Series] = []
    failures = 0
    try:
        for n, name in enumerate(names, 1):
            bench = registry[name]
            t0 = time.perf_counter()
            print(
                f"[{n}/{len(names)}] {name}: {bench.description} ...", file=sys.stderr, flush=True
            )
            limit = QUICK_BENCHMARK_TIMEOUT if config.quick else BENCHMARK_TIMEOUT
            try:
                with watchdog(limit):
                    series = bench.run(config)
            except Exception as exc:  # one broken benchmark must not hide the others
                failures += 1
                traceback.print_exc(file=sys.stderr)
                series = [
                    Series(name, "-", "-", "-", skipped=f"failed: {type(exc).__name__}: {exc}")
                ]
            results.extend(series)
            print(
                f"[{n}/{len(names)}] {name}: done in {time.perf_counter() - t0:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        # Also on KeyboardInterrupt: the server process must not outlive the run.
        for closer in reversed(config.closers):
            try:
                closer()
            except Exception:
                traceback.print_exc(file=sys.stderr)
    return results, failures


def _verify(args: argparse.Namespace) -> int:
    known = _registry()
    unknown = [n for n in args.names if n not in known]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}", file=sys.stderr)
        return 2

    def run(names: Sequence[str], quick: bool, repeat: int) -> list[Series]:
        return run_benchmarks([n for n in names if n in known], Config(quick=quick, repeat=repeat))[
            0
        ]

    return verify(
        run,
        reference_path=Path(args.against),
        names=args.names,
        tolerance=args.tolerance,
        repeat=args.repeat,
    )


def _compile_library() -> None:
    """Write trio_agent's bytecode (``__pycache__``), as installing its wheel does.

    From a source checkout, Python writes it on first import, unless
    ``PYTHONDONTWRITEBYTECODE`` is set (as on some CI images): then every process a
    benchmark starts (the CLI runs, the scale children) compiles each module it
    imports again, which a user's installed copy never does.
    """
    import compileall

    import trio_agent

    compileall.compile_dir(Path(trio_agent.__file__).parent, quiet=2)


def _run(args: argparse.Namespace) -> int:
    registry = _registry()
    names: Sequence[str] = args.names or list(registry)
    unknown = [n for n in names if n not in registry]
    if unknown:
        print(
            f"unknown benchmark(s): {', '.join(unknown)}; see `python -m benchmarks list`",
            file=sys.stderr,
        )
        return 2
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 5)
    if repeat < 1:
        print("--repeat must be >= 1", file=sys.stderr)
        return 2
    config = Config(quick=args.quick, repeat=repeat)
    _compile_library()
    started = time.perf_counter()
    results, failures = run_benchmarks(names, config)
    failures += sum(len(s.errors) for s in results)
    print(text_table(results))
    meta = {
        "command": " ".join(["python -m benchmarks", *sys.argv[1:]]),
        "quick": args.quick,
        "repeat": repeat,
        "total_seconds": time.perf_counter() - started,
        "machine": machine(),
        "failures": failures,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "source": source_state(),
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(to_json(results, meta))
    if args.svg:
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(to_svg(config.timelines))
    if args.markdown:
        write_markdown(args.markdown, results, meta)
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{list,run,verify,report}")
    sub.add_parser("list", help="list the benchmarks")
    run = sub.add_parser("run", help="run benchmarks (all by default)")
    run.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    run.add_argument(
        "--quick", action="store_true", help="small N, one repeat: about 2 minutes on 2 cores"
    )
    run.add_argument("--json", metavar="PATH", help="write every sample as JSON")
    run.add_argument("--svg", metavar="PATH", help="write the end-to-end timelines as SVG")
    run.add_argument(
        "--markdown",
        metavar="PATH",
        help="write RESULTS.md-style markdown (keeps an existing file's analysis section)",
    )
    run.add_argument("--repeat", type=int, metavar="N", help="repeats (default 5, quick 1)")
    check = sub.add_parser(
        "verify", help="re-run a stored run's benchmarks and say which ratios hold (within 10%%)"
    )
    check.add_argument("names", nargs="*", help="benchmarks to verify (default: all stored)")
    check.add_argument(
        "--against", metavar="JSON", default=str(DEFAULT_REFERENCE), help="the stored run"
    )
    check.add_argument("--tolerance", type=float, default=0.10, help="relative (default 0.10)")
    check.add_argument("--repeat", type=int, metavar="N", help="repeats (default 3, quick 1)")
    report = sub.add_parser("report", help="write the markdown of a run from its --json file")
    report.add_argument("json_path", metavar="JSON")
    report.add_argument("--markdown", metavar="PATH", required=True)
    serve = sub.add_parser("serve", help=argparse.SUPPRESS)
    serve.add_argument("--port", type=int, default=0)
    pipeline_serve = sub.add_parser("pipeline-serve", help=argparse.SUPPRESS)
    pipeline_serve.add_argument("--quick", action="store_true")
    child = sub.add_parser("scale-child", help=argparse.SUPPRESS)
    child.add_argument("child_args", nargs="+")
    durable_child = sub.add_parser("durable-child", help=argparse.SUPPRESS)
    durable_child.add_argument("child_args", nargs=4)
    # argparse lists a subcommand with help=SUPPRESS as "==SUPPRESS==": drop the
    # internal ones from --help (they still parse).
    sub._choices_actions = [  # pyright: ignore[reportPrivateUsage]
        a
        for a in sub._choices_actions  # pyright: ignore[reportPrivateUsage]
        if a.help is not argparse.SUPPRESS
    ]
    args = parser.parse_args(argv)
    if args.command == "durable-child":
        from ._durable import durable_child

        return durable_child(args.child_args)
    if args.command == "scale-child":
        from ._scale import child_main

        return child_main(args.child_args)
    if args.command == "pipeline-serve":
        from ._pipeline import serve_pipeline

        serve_pipeline(args.quick)
        return 0
    if args.command == "verify":
        return _verify(args)
    if args.command == "list":
        for bench in _registry().values():
            print(f"{bench.name:24} {bench.description}")
        return 0
    if args.command == "report":
        from_json(args.json_path, args.markdown)
        return 0
    if args.command == "serve":
        from ._server import serve_forever

        serve_forever(args.port)
        return 0
    return _run(args)
