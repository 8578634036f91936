"""The MCP conformance suite's client scenarios, run in the suite's own harness
against tests/mcp/conformance/client.py (trio_agent.mcp as a program uses it).

One run of every client scenario (the harness runs them side by side), judged by
the harness against tests/mcp/conformance/expected-failures.yml: any other failure,
or an entry there that passes, fails the run. As the SDK's own CI does, a scenario
that fails in the crowded run is run once more alone: some of the harness's checks
time the client in real time (the SSE reconnection delay), and 26 clients starting
at once on a loaded 2-core machine can miss them; a failure that repeats alone is
real. The test also checks that every scenario ran and that the client really ran.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

CONFORMANCE_DIR = Path(__file__).with_name("conformance")

# "✓ auth/metadata-default: 13 passed, 0 failed" in the suite summary.
_SUMMARY = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed", re.M)
_SCENARIO = re.compile(r"^  - (\S+) \[([^\]]*)\]$", re.M)
_COMMAND = f"{sys.executable} {CONFORMANCE_DIR / 'client.py'}"


def _expected_failures() -> set[str]:
    text = (CONFORMANCE_DIR / "expected-failures.yml").read_text()
    return set(re.findall(r"^  - (\S+)$", text, re.M))


def _failed_checks(results: Path, scenario: str) -> str:
    """The failed checks of *scenario*'s runs under *results*, for the message."""
    lines: list[str] = []
    for checks in sorted(results.glob(f"{scenario}-*/checks.json")):
        for check in json.loads(checks.read_text()):
            if check.get("status") in ("FAILURE", "WARNING"):
                lines.append(
                    f"{scenario}: {check.get('id')} {check.get('status')}: "
                    f"{check.get('errorMessage') or check.get('description')}"
                )
        stderr = checks.with_name("stderr.txt")
        if stderr.exists():
            lines.append(stderr.read_text()[-1500:])
    return "\n".join(lines)


def _run(harness: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(harness), "client", "--command", _COMMAND, "--timeout", "150000", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )


@pytest.mark.slow
def test_client_scenarios_pass_in_the_harness(
    conformance_harness: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    harness, env = conformance_harness
    listed = subprocess.run(
        [str(harness), "list", "--client"], env=env, capture_output=True, text=True, check=True
    ).stdout
    scenarios = dict(_SCENARIO.findall(listed))
    assert len(scenarios) >= 20, listed
    draft = {name for name, tags in scenarios.items() if "draft" in tags}
    expected = _expected_failures()
    assert not expected & draft, "a draft scenario need not be listed"

    results = tmp_path / "results"
    baseline = str(CONFORMANCE_DIR / "expected-failures.yml")
    run = _run(harness, env, "--suite", "all", "--expected-failures", baseline, "-o", str(results))
    out = run.stdout + run.stderr
    summary = {name: (mark, int(ok)) for mark, name, ok, _bad in _SUMMARY.findall(out)}
    assert set(summary) == set(scenarios), out[-3000:]
    failed = {name for name, (mark, _) in summary.items() if mark == "✗"}
    assert expected <= failed, f"stale entries: {expected - failed}"
    for scenario in sorted(failed - expected):  # crowded out, or real: run it alone
        solo = _run(harness, env, "--scenario", scenario, "-o", str(tmp_path / "solo"))
        assert solo.returncode == 0, (
            _failed_checks(tmp_path / "solo", scenario) + solo.stdout[-2000:]
        )
    if failed == expected:
        assert run.returncode == 0, out[-3000:]
    passed = {name for name, (mark, ok) in summary.items() if mark == "✓" and ok > 0}
    assert passed | (failed - expected) == set(scenarios) - expected, summary
    # The client ran: its own output (the tool it called) is in the results.
    (tools_call,) = results.glob("tools_call-*")
    assert "add_numbers:" in (tools_call / "stderr.txt").read_text()
