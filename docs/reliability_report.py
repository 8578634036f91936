"""Run the fault-matrix and security tests and write docs/RELIABILITY.md from the run.

    python docs/reliability_report.py            # from the repository root

Every figure in the report comes from this run: test outcomes, hypothesis examples
(parsed from ``--hypothesis-show-statistics``), leak checks and leaks found
(``trio_agent.testing._leaks.STATISTICS``), histories and tool_use ids checked for
pairing (``tests/faults_support.FIGURES``).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
F = "tests/test_faults_"

#: (row, case, test functions: "file::name" — parametrized variants are summed)
ROWS: list[tuple[str, str, list[str]]] = [
    (
        "1",
        "429 retry-after (s, ms, date, garbage, >60 s), none; 500/529/408/409; x-should-retry: exact schedules, typed error",
        [
            F + "http.py::test_exact_retry_schedule_then_success_or_the_typed_error",
            "tests/test_client.py::test_429_retry_after",
            "tests/test_client.py::test_retry_after_http_date",
            "tests/test_client.py::test_x_should_retry",
            "tests/test_retry.py::test_retry_after",
        ],
    ),
    (
        "2",
        "400/401/403/404/413 (also non-JSON 413): no retry, typed, request id",
        [F + "http.py::test_4xx_is_not_retried_and_carries_the_request_id"],
    ),
    (
        "3",
        "a 200 that is JSON or HTML",
        [F + "http.py::test_a_200_that_is_not_sse_is_a_protocol_error"],
    ),
    (
        "4",
        "reset / timeout before headers: retried, no tool started",
        [F + "http.py::test_reset_or_timeout_before_headers_is_retried_and_starts_no_tool"],
    ),
    (
        "5",
        "every byte split, CR/LF/CRLF/mixed, BOM, U+2028/2029/0085 in JSON",
        [
            F + "stream.py::test_every_single_split_position",
            F + "stream.py::test_mixed_endings_and_any_splits_give_the_clean_events",
            F + "stream.py::test_line_separators_inside_json_strings_are_not_line_breaks",
            "tests/test_client_scripted.py::test_any_message_any_framing_streams_exactly",
        ],
    ),
    (
        "6",
        "comments, unknown fields/events/deltas/blocks/stop reasons, 10k pings",
        [
            F + "stream.py::test_comments_unknown_things_and_10k_pings",
            F + "stream.py::test_unknown_block_type_is_kept_opaque",
            F + "stream.py::test_events_with_empty_data_are_not_dispatched",
        ],
    ),
    (
        "7",
        "in-stream error after text and a finished tool_use",
        [
            F + "turn.py::test_error_event_after_text_and_a_finished_tool_use",
            F + "turn.py::test_error_after_a_started_tool_keeps_text_and_pair_in_history",
        ],
    ),
    (
        "8",
        "disconnect mid-event, no message_stop, idle, stall, 1 byte/s drip",
        [
            F + "stream.py::test_disconnect_at_any_byte_is_truncated_and_keeps_what_arrived",
            F + "stream.py::test_drip_one_byte_per_second",
            F + "stream.py::test_idle_and_no_message_stop",
            "tests/test_client_scripted.py::test_pings_during_a_stall_keep_it_alive_but_count_as_stall",
        ],
    ),
    (
        "9",
        "malformed data, cut/invalid partial_json, unstopped block, bad indices, 2nd message_start",
        [
            F + "stream.py::test_protocol_violations_are_typed_and_close_the_stream",
            F + "stream.py::test_malformed_data_is_a_protocol_error",
            F + "stream.py::test_cut_or_invalid_partial_json_marks_the_block_invalid",
            "tests/test_accumulate.py::test_protocol_violations",
        ],
    ),
    (
        "10",
        "8 MiB line, huge partial_json, 100k nesting, 5000 digits, duplicate keys, NaN",
        [
            F + "stream.py::test_deep_nesting_is_a_limit_error_not_a_recursion_error",
            F + "stream.py::test_huge_numbers_nan_and_duplicate_keys",
            F + "stream.py::test_huge_partial_json_is_a_limit_error_before_it_is_kept",
            F + "stream.py::test_8_mib_line_is_a_limit_error_in_bounded_memory",
            F + "stream.py::test_event_over_the_limit_is_typed",
        ],
    ),
    (
        "11",
        "refusal / error after a side-effecting tool_use: queued tool never starts",
        [
            F + "turn.py::test_error_after_a_queued_side_effect_never_starts_it",
            F + "turn.py::test_refusal_after_a_queued_side_effect_never_starts_it",
        ],
    ),
    (
        "12",
        "cancellation at every step of a turn; KeyboardInterrupt",
        [
            F + "turn.py::test_cancellation_at_every_checkpoint_of_a_turn",
            F + "turn.py::test_keyboard_interrupt_kills_the_subprocess_and_reraises",
            F + "turn.py::test_abort_at_any_time_keeps_the_session_paired",
            "tests/test_loop_abort.py::test_abort_at_every_event",
            "tests/test_loop_abort.py::test_abort_at_any_time",
        ],
    ),
    (
        "13",
        "tool raises / hangs shielded / returns garbage / progress after finishing",
        [
            F + "turn.py::test_shielded_tool_delays_the_abort_but_loses_nothing",
            "tests/test_executor.py::test_progress_after_the_result_is_dropped",
        ],
    ),
    (
        "14",
        "permission callback raises / hangs; consumer stops reading",
        [
            F + "turn.py::test_permission_callback_that_hangs_then_aborted",
            F + "turn.py::test_permission_callback_that_raises_denies",
            F + "turn.py::test_a_consumer_that_stops_reading_does_not_stall_the_tools",
            "tests/test_executor.py::test_a_consumer_that_stops_reading_does_not_block",
        ],
    ),
    (
        "15",
        "transcript crash mid-write resumes to a valid history",
        [
            "tests/test_transcript.py::test_crash_at_every_byte_of_the_last_line",
            "tests/test_transcript.py::test_any_crash_point_resumes_to_a_valid_prefix",
            F + "turn.py::test_hostile_transcript_line_is_a_transcript_error",
        ],
    ),
    (
        "S1",
        "permission gate first; deny wins; unknown tools never run",
        [
            "tests/test_security.py::test_only_allowed_known_tools_ever_run",
            "tests/test_security.py::test_permission_is_asked_before_the_tool_runs",
            "tests/test_rules.py::test_precedence_matches_a_simple_model",
        ],
    ),
    (
        "S2",
        "workspace confinement (.., absolute, symlink out, NUL)",
        [
            "tests/tools/test_file_tools_confinement.py::test_file_tools_never_touch_anything_outside",
            "tests/test_builtin_workspace.py::test_rejected",
            "tests/test_builtin_workspace.py::test_symlink_escapes",
            "tests/test_builtin_files.py::test_write_escapes_have_no_side_effect",
        ],
    ),
    (
        "S3",
        "Bash: verbatim, timeout, cap, group kill",
        [
            "tests/test_security.py::test_bash_command_reaches_bash_verbatim",
            "tests/test_security.py::test_bash_timeout_leaves_no_process",
            "tests/test_builtin_bash.py::test_output_cap_keeps_the_tail",
            "tests/test_builtin_bash.py::test_cancel_kills_the_process_tree",
        ],
    ),
    (
        "S4",
        "secrets: sentinel key in no log, repr, exception, transcript, CLI output",
        [
            "tests/test_security.py::test_sentinel_key_never_appears_anywhere",
            "tests/test_security.py::test_sentinel_key_not_in_cli_output",
            "tests/test_client.py::test_api_key_never_leaks",
        ],
    ),
    (
        "S5",
        "WebFetch SSRF: loopback/private/link-local/multicast in any spelling, redirect hops, DNS rebinding",
        [
            "tests/tools/test_webfetch_ssrf.py::test_every_spelling_of_the_local_server_is_refused_and_never_reached",
            "tests/tools/test_webfetch_ssrf.py::test_private_link_local_multicast_in_any_spelling_are_refused",
            "tests/tools/test_webfetch_ssrf.py::test_ipv6_forms_of_an_ipv4_address_are_judged_as_that_address",
            "tests/tools/test_webfetch_ssrf.py::test_redirect_to_a_private_address_is_refused_on_that_hop",
            "tests/tools/test_webfetch_ssrf.py::test_a_client_you_pass_still_gets_every_hop_checked",
            "tests/tools/test_webfetch_ssrf.py::test_dns_rebinding_cannot_switch_the_address_after_the_check",
            "tests/tools/test_webfetch_ssrf.py::test_every_answer_of_a_lookup_is_checked",
        ],
    ),
    (
        "S6",
        "Bash orphans: setsid, set -m, double fork, daemon, SIGTERM ignored; after return, timeout, cancellation, agent killed",
        [
            "tests/tools/test_bash_orphans.py::test_no_escaper_survives_the_tools_return",
            "tests/tools/test_bash_orphans.py::test_no_escaper_survives_a_timeout",
            "tests/tools/test_bash_orphans.py::test_no_escaper_survives_cancellation",
            "tests/tools/test_bash_orphans.py::test_no_escaper_survives_the_agent_being_killed",
            "tests/tools/test_bash_orphans.py::test_runner_keeps_exit_codes_signals_and_sigpipe",
        ],
    ),
    (
        "S7",
        "file races: directory swapped for a symlink between check and use / hammered; FIFO swapped in",
        [
            "tests/tools/test_files_race.py::test_directory_swapped_between_check_and_use",
            "tests/tools/test_files_race.py::test_file_swapped_for_a_fifo_after_the_check_does_not_block",
            "tests/tools/test_files_race.py::test_hammered_swaps_never_read_or_write_outside",
        ],
    ),
    (
        "S8",
        "Grep/Glob: ripgrep killed on cancellation, catastrophic regex, Glob cancelled per directory",
        [
            "tests/tools/test_search_cancel.py::test_cancellation_kills_ripgrep_at_once",
            "tests/tools/test_search_cancel.py::test_a_catastrophic_pattern_for_backtracking_is_linear",
            "tests/tools/test_search_cancel.py::test_glob_checks_for_cancellation_in_every_directory",
            "tests/tools/test_search_cancel.py::test_glob_with_many_double_stars_is_not_exponential",
        ],
    ),
    (
        "S9",
        "rule parsing: Bash(prefix*) needs every simple command allowed; unparseable asked; resolved file paths",
        [
            "tests/loop/test_rules_mean_it.py::test_an_allowed_prefix_does_not_allow_what_follows",
            "tests/loop/test_rules_mean_it.py::test_allowed_iff_every_simple_command_is",
            "tests/loop/test_rules_mean_it.py::test_a_command_that_does_not_parse_is_asked",
            "tests/loop/test_rules_mean_it.py::test_the_attack_never_runs_through_the_real_gate",
            "tests/loop/test_rules_mean_it.py::test_file_rules_match_every_spelling_of_the_path",
            "tests/loop/test_rules_mean_it.py::test_file_allow_rules_match_only_the_resolved_path",
        ],
    ),
    ("L", "the leak helper finds each kind of leak", ["tests/test_leaks.py"]),
]

_PASSING = re.compile(r"(\d+) passing")


class Collector:
    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.examples: dict[str, int] = defaultdict(int)
        self.leaks: dict[str, int] = defaultdict(int)
        self._before = 0

    def pytest_runtest_setup(self, item: Any) -> None:
        from trio_agent.testing._leaks import STATISTICS

        self._before = STATISTICS.leaks

    def pytest_runtest_teardown(self, item: Any) -> None:
        from trio_agent.testing._leaks import STATISTICS

        self.leaks[item.nodeid] = STATISTICS.leaks - self._before

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        report = (yield).get_result()
        stats = getattr(item, "hypothesis_statistics", None)
        if report.when == "teardown" and stats:
            self.examples[item.nodeid] = sum(int(n) for n in _PASSING.findall(stats))
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
            self.outcomes[item.nodeid] = outcome


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def main() -> int:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))
    files = sorted({t.split("::")[0] for _, _, tests in ROWS for t in tests})
    collector = Collector()
    code = pytest.main(
        ["-q", "-p", "no:cacheprovider", "--hypothesis-show-statistics", "-o", "addopts=", *files],
        plugins=[collector],
    )
    from faults_support import FIGURES  # same module objects as the tests used

    from trio_agent.testing._leaks import STATISTICS

    planted = sum(n for t, n in collector.leaks.items() if t.startswith("tests/test_leaks.py"))
    unplanted = STATISTICS.leaks - planted
    lines = [
        "# Reliability and security report",
        "",
        "Generated by `python docs/reliability_report.py` from a real run of the tests below",
        "(issue #6). Each row names its tests; *examples* are hypothesis examples run",
        "(parametrized variants and plain tests count as their runs).",
        "",
        "| # | case | tests | runs | examples | outcome |",
        "|---|------|-------|-----:|---------:|---------|",
    ]
    total_examples = covered = 0
    xfails: list[str] = []
    for row, case, tests in ROWS:
        runs = examples = 0
        outcomes: set[str] = set()
        for test in tests:
            matched = [
                n for n in collector.outcomes if _base(n) == test or n.startswith(test + "::")
            ]
            runs += len(matched)
            examples += sum(collector.examples.get(n, 0) for n in matched)
            outcomes.update(collector.outcomes[n] for n in matched)
            xfails += [n for n in matched if collector.outcomes[n] == "xfailed"]
            if not matched:
                outcomes.add("MISSING")
        total_examples += examples
        ok = outcomes <= {"passed", "xfailed"}
        covered += ok
        names = "<br>".join(f"`{t.split('::')[-1]}`" for t in tests)
        shown = "passed" if outcomes == {"passed"} else ", ".join(sorted(outcomes))
        lines.append(f"| {row} | {case} | {names} | {runs} | {examples} | {shown} |")
    lines += [
        "",
        "## Figures",
        "",
        f"- cases covered: {covered} of {len(ROWS)} (15 matrix rows, 9 security rows, the leak helper)",
        f"- tests run: {len(collector.outcomes)}; hypothesis examples run: {total_examples}",
        f"- leak checks run: {STATISTICS.checks}; leaks found: {unplanted}"
        f" (plus {planted} planted on purpose by tests/test_leaks.py, and found)",
        f"- histories checked for pairing: {FIGURES.histories_checked}"
        f" ({FIGURES.tool_uses_checked} tool_use blocks); unpaired tool_use ids:"
        f" {FIGURES.unpaired_tool_use_ids}",
        f"- pytest exit status: {int(code)}",
        "",
        "A leak check that finds something raises `LeakError`, so a leak outside",
        "tests/test_leaks.py would also have failed its test.",
        "",
        "## Known bugs, pinned as strict xfails",
        "",
        *([f"- `{n}`" for n in sorted(set(xfails))] or ["None."]),
        "",
    ]
    (ROOT / "docs" / "RELIABILITY.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
