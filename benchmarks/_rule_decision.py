"""Permission rule decision time (issue 23): how long ``PermissionRules.decide`` takes for
a Bash command of 1 KiB, of 64 KiB (the analysis limit) and nested 200 deep, and for
lines past the limits (1 MB, 10,000 nested ``$(``), which are refused before parsing."""

from __future__ import annotations

import time

from ._config import Config
from ._report import Series


def _lines() -> dict[str, str]:
    piece = "git diff --stat -- src | grep -c x && "
    return {
        "1 KiB": (piece * 30)[:1021] + "ls",
        "64 KiB": "echo " + "'abcdefghijklmn' " * 3850,
        "depth 200": "( " * 199 + "ls -la" + " )" * 199,
        "1 MB (over the limit)": "echo a; " * 131072,
        "10,000 nested $( (over)": "echo $(" * 10000 + ")" * 10000,
    }


def bench_rule_decision(config: Config) -> list[Series]:
    import trio_agent._loop._rules as rules_module
    from trio_agent import PermissionRules

    rules = PermissionRules(allow=["Bash(*)"], deny=["Bash(rm *)"])
    rows: list[Series] = []
    repeat = max(config.repeat, 5)
    for label, line in _lines().items():
        row = Series("rule_decision", "trio_agent", f"decide() on a {label} Bash command", "ms")
        for _ in range(repeat):
            rules_module._analyze.cache_clear()  # pyright: ignore[reportPrivateUsage]
            start = time.perf_counter()
            rules.decide("Bash", {"command": line})
            row.samples.append((time.perf_counter() - start) * 1e3)
        rows.append(row)
    return rows
