"""Run the fault-matrix and security tests and write docs/RELIABILITY.md from the run.

    python docs/reliability_report.py            # from the repository root

Every figure in the report comes from this run: test outcomes, hypothesis examples
(parsed from ``--hypothesis-show-statistics``), leak checks and leaks found
(``trio_agent.testing._leaks.STATISTICS``), histories and tool_use ids checked for
pairing (``trio_agent.testing._history.STATISTICS``, counted by ``check_history``).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODEL = "tests/model/test_faults_"
LOOP = "tests/loop/test_faults_"

#: (row, case, test functions: "file::name" — parametrized variants are summed)
ROWS: list[tuple[str, str, list[str]]] = [
    (
        "1",
        "429 retry-after (s, ms, date, garbage, >60 s), none; 500/529/408/409; x-should-retry: exact schedules, typed error",
        [
            MODEL + "http.py::test_exact_retry_schedule_then_success_or_the_typed_error",
            "tests/model/test_client.py::test_429_retry_after",
            "tests/model/test_client.py::test_retry_after_http_date",
            "tests/model/test_client.py::test_x_should_retry",
            "tests/model/test_retry.py::test_retry_after",
        ],
    ),
    (
        "2",
        "400/401/403/404/413 (also non-JSON 413): no retry, typed, request id",
        [MODEL + "http.py::test_4xx_is_not_retried_and_carries_the_request_id"],
    ),
    (
        "3",
        "a 200 that is JSON or HTML",
        [MODEL + "http.py::test_a_200_that_is_not_sse_is_a_protocol_error"],
    ),
    (
        "4",
        "reset / timeout before headers: retried, no tool started",
        [MODEL + "http.py::test_reset_or_timeout_before_headers_is_retried_and_starts_no_tool"],
    ),
    (
        "5",
        "every byte split, CR/LF/CRLF/mixed, BOM, U+2028/2029/0085 in JSON",
        [
            MODEL + "stream.py::test_every_single_split_position",
            MODEL + "stream.py::test_mixed_endings_and_any_splits_give_the_clean_events",
            MODEL + "stream.py::test_line_separators_inside_json_strings_are_not_line_breaks",
            "tests/model/test_client_scripted.py::test_any_message_any_framing_streams_exactly",
        ],
    ),
    (
        "6",
        "comments, unknown fields/events/deltas/blocks/stop reasons, 10k pings",
        [
            MODEL + "stream.py::test_comments_unknown_things_and_10k_pings",
            MODEL + "stream.py::test_unknown_block_type_is_kept_opaque",
            MODEL + "stream.py::test_events_with_empty_data_are_not_dispatched",
        ],
    ),
    (
        "7",
        "in-stream error after text and a finished tool_use",
        [
            LOOP + "turn.py::test_error_event_after_text_and_a_finished_tool_use",
            LOOP + "turn.py::test_error_after_a_started_tool_keeps_text_and_pair_in_history",
        ],
    ),
    (
        "8",
        "disconnect mid-event, no message_stop, idle, stall, 1 byte/s drip",
        [
            MODEL + "stream.py::test_disconnect_at_any_byte_is_truncated_and_keeps_what_arrived",
            MODEL + "stream.py::test_drip_one_byte_per_second",
            MODEL + "stream.py::test_idle_and_no_message_stop",
            "tests/model/test_client_scripted.py::test_pings_during_a_stall_keep_it_alive_but_count_as_stall",
        ],
    ),
    (
        "9",
        "malformed data, cut/invalid partial_json, unstopped block, bad indices, 2nd message_start",
        [
            MODEL + "stream.py::test_protocol_violations_are_typed_and_close_the_stream",
            MODEL + "stream.py::test_malformed_data_is_a_protocol_error",
            MODEL + "stream.py::test_cut_or_invalid_partial_json_marks_the_block_invalid",
            "tests/model/test_accumulate.py::test_protocol_violations",
        ],
    ),
    (
        "10",
        "8 MiB line, huge partial_json, 100k nesting, 5000 digits, duplicate keys, NaN",
        [
            MODEL + "stream.py::test_deep_nesting_is_a_limit_error_not_a_recursion_error",
            MODEL + "stream.py::test_huge_numbers_nan_and_duplicate_keys",
            MODEL + "stream.py::test_huge_partial_json_is_a_limit_error_before_it_is_kept",
            MODEL + "stream.py::test_8_mib_line_is_a_limit_error_in_bounded_memory",
            MODEL + "stream.py::test_event_over_the_limit_is_typed",
        ],
    ),
    (
        "11",
        "refusal / error after a side-effecting tool_use: queued tool never starts",
        [
            LOOP + "turn.py::test_error_after_a_queued_side_effect_never_starts_it",
            LOOP + "turn.py::test_refusal_after_a_queued_side_effect_never_starts_it",
        ],
    ),
    (
        "12",
        "cancellation at every step of a turn; KeyboardInterrupt",
        [
            LOOP + "turn.py::test_cancellation_at_every_checkpoint_of_a_turn",
            LOOP + "turn.py::test_keyboard_interrupt_kills_the_subprocess_and_reraises",
            LOOP + "turn.py::test_abort_at_any_time_keeps_the_session_paired",
            "tests/loop/test_loop.py::test_abort_at_every_event",
            "tests/loop/test_loop.py::test_abort_at_any_time",
        ],
    ),
    (
        "13",
        "tool raises / hangs shielded / returns garbage / progress after finishing",
        [
            LOOP + "turn.py::test_shielded_tool_delays_the_abort_but_loses_nothing",
            "tests/executor/test_executor.py::test_progress_after_the_result_is_dropped",
        ],
    ),
    (
        "14",
        "permission callback raises / hangs; consumer stops reading",
        [
            LOOP + "turn.py::test_permission_callback_that_hangs_then_aborted",
            LOOP + "turn.py::test_permission_callback_that_raises_denies",
            LOOP + "turn.py::test_a_consumer_that_stops_reading_does_not_stall_the_tools",
            "tests/executor/test_executor.py::test_a_consumer_that_stops_reading_does_not_block",
        ],
    ),
    (
        "15",
        "transcript crash mid-write resumes to a valid history",
        [
            "tests/session/test_transcript.py::test_crash_at_every_byte_of_the_last_line",
            "tests/session/test_transcript.py::test_any_crash_point_resumes_to_a_valid_prefix",
            LOOP + "turn.py::test_hostile_transcript_line_is_a_transcript_error",
        ],
    ),
    (
        "S1",
        "permission gate first; deny wins; unknown tools never run",
        [
            "tests/test_security.py::test_only_allowed_known_tools_ever_run",
            "tests/test_security.py::test_permission_is_asked_before_the_tool_runs",
            "tests/loop/test_rules.py::test_precedence_matches_a_simple_model",
        ],
    ),
    (
        "S2",
        "workspace confinement (.., absolute, symlink out, NUL)",
        [
            "tests/tools/test_file_tools_confinement.py::test_file_tools_never_touch_anything_outside",
            "tests/tools/test_builtin_workspace.py::test_rejected",
            "tests/tools/test_builtin_workspace.py::test_symlink_escapes",
            "tests/tools/test_builtin_files.py::test_write_escapes_have_no_side_effect",
        ],
    ),
    (
        "S3",
        "Bash: verbatim, timeout, cap, group kill",
        [
            "tests/test_security.py::test_bash_command_reaches_bash_verbatim",
            "tests/test_security.py::test_bash_timeout_leaves_no_process",
            "tests/tools/test_builtin_bash.py::test_output_cap_keeps_the_tail",
            "tests/tools/test_builtin_bash.py::test_cancel_kills_the_process_tree",
        ],
    ),
    (
        "S4",
        "secrets: sentinel key in no log, repr, exception, transcript, CLI output",
        [
            "tests/test_security.py::test_sentinel_key_never_appears_anywhere",
            "tests/test_security.py::test_sentinel_key_not_in_cli_output",
            "tests/model/test_client.py::test_api_key_never_leaks",
        ],
    ),
    (
        "R1",
        "mid-stream failure (reset, truncation, idle, in-stream overloaded/api_error, stalls):"
        " tombstone, retry with backoff, then one non-streaming request; exact requests",
        [
            "tests/loop/test_recovery_midstream.py::test_a_mid_stream_failure_is_discarded_and_retried",
            "tests/loop/test_recovery_midstream.py::test_after_the_retries_one_non_streaming_request_whose_tools_run_after_it",
            "tests/loop/test_recovery_midstream.py::test_when_every_recovery_fails_the_turn_ends_with_the_last_error",
            "tests/loop/test_recovery_midstream.py::test_the_session_keeps_one_assistant_message_per_call",
            "tests/loop/test_stalls.py::test_max_stalls_aborts_and_retries",
            "tests/cli/test_cli_recovery.py::test_demo_fault_reset_recovers",
        ],
    ),
    (
        "R2",
        "read error / empty or cut body before any content: retried invisibly",
        [
            "tests/loop/test_recovery_midstream.py::test_a_body_cut_before_content_is_retried_invisibly",
            "tests/loop/test_recovery_midstream.py::test_an_empty_body_is_retried_invisibly",
        ],
    ),
    (
        "R3",
        "fallback after 3 consecutive overloaded answers counted inside the retry loop"
        " (3 requests to the primary with any policy); signatures stripped",
        [
            "tests/loop/test_fallback_counting.py::test_three_529_from_the_primary_then_the_fallback",
            "tests/loop/test_fallback_counting.py::test_an_in_stream_overloaded_error_counts_and_is_tombstoned",
            "tests/loop/test_fallback_counting.py::test_another_error_breaks_the_streak",
            "tests/loop/test_fallback_counting.py::test_thinking_signatures_are_left_out_for_the_fallback",
        ],
    ),
    (
        "R4",
        "max_tokens escalation within the model's cap; context window exceeded continues",
        [
            "tests/loop/test_max_tokens_caps.py::test_the_default_escalates_up_to_the_models_cap",
            "tests/loop/test_max_tokens_caps.py::test_max_tokens_never_passes_the_cap",
            "tests/loop/test_max_tokens_caps.py::test_context_window_exceeded_continues",
        ],
    ),
    (
        "R5",
        "compaction: model summary keeps pairs, reactive and auto; failure keeps the original error",
        [
            "tests/loop/test_compaction.py::test_prompt_too_long_is_summarised_by_the_model",
            "tests/loop/test_compaction.py::test_auto_compact_past_the_threshold",
            "tests/loop/test_compaction.py::test_a_failing_compactor_surfaces_the_original_error",
            "tests/loop/test_compaction.py::test_the_split_keeps_every_pair_and_the_alternation",
        ],
    ),
    (
        "R6",
        "any fault at any event of any call: valid history, every tool_use answered once",
        ["tests/loop/test_recovery_property.py"],
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
    (
        "E1",
        "hostile streams: any valid stream mutated (wrong JSON types, missing keys, extra "
        "nesting, swapped / repeated / dropped events): only TrioAgentError leaves "
        "client.stream(), naming the event; no leak",
        [
            "tests/model/test_hostile_streams.py::test_accumulator_raises_only_typed_errors",
            "tests/model/test_hostile_streams.py::"
            "test_client_stream_raises_only_typed_errors_and_leaks_nothing",
            "tests/model/test_hostile_streams.py::test_wrong_types_name_the_event",
            "tests/model/test_hostile_streams.py::"
            "test_loopback_server_stream_raises_only_typed_errors",
        ],
    ),
    (
        "E2",
        "nothing dropped: to_api() equals the official SDK's final message for its own "
        "recorded streams and generated ones (stop_details, container, caller, compaction, "
        "fallback, unknown fields)",
        ["tests/model/test_sdk_differential.py"],
    ),
    (
        "E3",
        "malformed answers end the turn (TurnEnd error, history valid, every tool_use "
        "answered): mutated streams, duplicate tool_use ids, tool_use in message_start, "
        "too-deep input",
        [
            "tests/loop/test_hostile_turns.py",
            "tests/model/test_hostile_streams.py::test_duplicate_tool_use_ids_are_a_protocol_error",
            "tests/model/test_hostile_streams.py::"
            "test_tool_use_in_message_start_content_is_a_protocol_error",
            "tests/model/test_hostile_streams.py::"
            "test_deep_tool_input_is_a_limit_error_never_a_recursion_error",
        ],
    ),
    (
        "E4",
        "hostile tools: __str__/__repr__ that raise (tool, can_use_tool), returns the API "
        "cannot take, results over the size cap",
        [
            "tests/executor/test_hostile_tools.py::"
            "test_tool_exception_whose_str_raises_is_an_error_result",
            "tests/executor/test_hostile_tools.py::"
            "test_permission_check_exception_whose_str_raises_is_a_denial",
            "tests/executor/test_hostile_tools.py::"
            "test_invalid_returns_are_error_results_naming_tool_and_type",
            "tests/executor/test_hostile_tools.py::test_result_blocks_the_api_accepts_are_kept",
            "tests/executor/test_hostile_tools.py::test_results_are_capped_with_a_note_of_the_cut",
            "tests/session/test_session_edges.py::"
            "test_capped_results_are_the_same_in_history_transcript_and_request",
            "tests/executor/test_hostile_tools.py::"
            "test_deep_input_added_directly_is_an_error_result_not_a_recursion_error",
        ],
    ),
    (
        "E5",
        "progress storms: memory flat, latest report kept (dropped counted), at once at "
        "normal rates",
        [
            "tests/executor/test_hostile_tools.py::"
            "test_progress_storms_keep_memory_flat_and_lose_nothing_silently",
            "tests/executor/test_hostile_tools.py::"
            "test_progress_is_delivered_at_once_to_a_waiting_reader",
        ],
    ),
    (
        "E6",
        "consumers leaving at every event (break, raise, KeyboardInterrupt, after an await): "
        "quiet end or the exception as itself; history and transcript valid",
        [
            "tests/loop/test_consumers_leaving.py",
            "tests/session/test_session_edges.py::test_leaving_submit_at_every_event",
        ],
    ),
    (
        "E7",
        "KeyboardInterrupt / SystemExit / BaseException from a tool: raised as itself; "
        "history, transcript and resume keep text, tool_uses, finished results",
        [
            "tests/session/test_session_edges.py::test_base_exception_from_a_tool_keeps_what_happened"
        ],
    ),
    (
        "E8",
        "garbled transcript records (wrong types, deep nesting, stray results, reused ids): "
        "TranscriptError naming the line, from read_transcript and Session.resume",
        ["tests/session/test_transcript_garbled.py"],
    ),
    (
        "S10",
        "deny rules follow what bash runs: assignments, quotes, escapes, paths, wrappers, "
        "eval / sh -c / find -exec / xargs, here-documents, substitutions; generated spellings",
        [
            "tests/security/test_rule_bypasses.py::test_a_denied_rm_is_never_run",
            "tests/security/test_rule_bypasses.py::test_an_allowed_ls_runs_nothing_else",
            "tests/security/test_rule_bypasses.py::test_no_spelling_of_rm_is_allowed",
            "tests/security/test_rule_bypasses.py::test_junk_is_never_allowed_unless_every_command_is",
            "tests/security/test_rule_bypasses.py::test_huge_and_deep_lines_are_never_allowed",
        ],
    ),
    (
        "S11",
        "path rules: every spelling of a rule and a path alike; Grep/Glob skip what Read may not see",
        [
            "tests/security/test_path_rules.py::test_every_spelling_of_a_rule_denies_every_spelling_of_a_path",
            "tests/security/test_path_rules.py::test_grep_and_glob_skip_what_read_may_not_see",
            "tests/cli/test_cli_read_deny.py::test_grep_and_glob_do_not_show_what_read_may_not",
        ],
    ),
    (
        "S12",
        "read-only Bash runs in parallel; what the classifier calls read-only changes no file",
        [
            "tests/security/test_readonly_bash.py::test_what_is_called_read_only_changes_nothing",
            "tests/security/test_readonly_bash.py::test_bash_is_concurrency_safe_exactly_for_read_only_commands",
        ],
    ),
    (
        "S13",
        "file rules and the file tools name the same file: generated trees of relative and "
        "absolute symlinks (.. after a symlinked directory), paths over PATH_MAX, loops, "
        "newlines, unencodable names, root aliases, the gitignore escape, Write/Edit deny",
        ["tests/security/test_path_audit.py"],
    ),
    (
        "S14",
        "an adversarial audit's 323 Bash spellings run for real: words after a redirection, "
        "subscripts evaluated as code, ANSI-C NULs, dangerous variables set without =, "
        "unmodelled runners, option abbreviations, a linear brace scan; Bash decided by "
        "its command alone, a line with no simple command never allowed by a pattern",
        ["tests/security/test_bash_audit.py", "tests/security/test_rule_keys.py"],
    ),
    (
        "T1",
        "text UTF-8 cannot carry (lone surrogates from tools, prompts, file names, the model's "
        "own escapes) never enters the history; the transcript round-trips",
        [
            "tests/trust/test_text_and_inputs.py::test_a_tool_or_a_prompt_with_unencodable_text_never_breaks_the_session",
            "tests/trust/test_text_and_inputs.py::test_glob_over_any_file_names_leaves_a_history_that_encodes",
            "tests/trust/test_text_and_inputs.py::test_the_models_own_lone_surrogate_escapes_are_replaced",
        ],
    ),
    (
        "T2",
        "inputs nested 150-60,000 deep (from the model or a permission's updated_input); "
        "a context modifier whose exception cannot be printed: error results",
        [
            "tests/trust/test_text_and_inputs.py::test_a_deeply_nested_input_is_an_error_result",
            "tests/trust/test_text_and_inputs.py::test_a_context_modifier_whose_exception_cannot_be_printed_is_an_error_result",
        ],
    ),
    (
        "T3",
        "a compactor's result checked like any history: never sent nor kept when broken",
        [
            "tests/trust/test_compaction_results.py::test_what_the_check_accepts_the_api_accepts",
            "tests/trust/test_compaction_results.py::test_a_broken_reactive_compaction_ends_the_turn_typed_and_sends_nothing",
            "tests/trust/test_compaction_results.py::test_a_broken_automatic_compaction_goes_on_with_the_old_history",
        ],
    ),
    (
        "T4",
        "OpenAI Chat: a function name in pieces is one name, whatever the cutting",
        ["tests/trust/test_openai_chat_names.py"],
    ),
    (
        "M1",
        "MCP server dies mid-call while its child holds stdout; nothing it started survives",
        [
            "tests/mcp/test_mcp_misbehaving.py::test_a_server_that_dies_mid_call_while_its_child_holds_stdout",
            "tests/mcp/test_mcp_misbehaving.py::test_what_a_server_started_never_outlives_the_block",
        ],
    ),
    (
        "M2",
        "MCP floods: 100 MB text, 500,000 items, 200,000 progress notes, 100,000 log lines, "
        "bad UTF-8: bounded, an error result, never a hang",
        [
            "tests/mcp/test_mcp_misbehaving.py::test_a_100_mb_text_result_is_refused_in_bounded_memory",
            "tests/mcp/test_mcp_misbehaving.py::test_500_000_content_items_are_capped_and_say_so",
            "tests/mcp/test_mcp_misbehaving.py::test_200_000_progress_notifications_end_the_call",
            "tests/mcp/test_mcp_misbehaving.py::test_100_000_log_messages_end_the_call",
            "tests/mcp/test_mcp_misbehaving.py::test_one_invalid_utf8_byte_is_an_error_result",
        ],
    ),
    (
        "M3",
        "MCP schemas: 10,000 tools, catastrophic patterns, $refs nowhere / remote / to "
        "themselves, invalid or task-only tools left out alone",
        [
            "tests/mcp/test_mcp_schemas.py::test_10_000_tools_do_not_freeze_the_loop",
            "tests/mcp/test_mcp_schemas.py::test_a_catastrophic_pattern_does_not_freeze_the_loop",
            "tests/mcp/test_mcp_schemas.py::test_refs_nowhere_remote_or_to_themselves",
            "tests/mcp/test_mcp_schemas.py::test_a_bad_tool_or_one_that_needs_tasks_is_left_out_alone",
            "tests/mcp/test_mcp_schemas.py::test_no_schema_raises_or_fetches",
        ],
    ),
    (
        "S15",
        "a forged pending approval (a transcript line, a durable row, in memory) never "
        "runs another call than the history shows; huge and non-finite numbers in any "
        "transcript field: TranscriptError naming the line",
        ["tests/session/test_transcript_audit.py"],
    ),
    (
        "E9",
        "the viewer under hostile files: a huge number spoils only its file, FIFOs and "
        "/dev/zero are never read, overlong lines skipped, a line being written never split",
        ["tests/viewer/test_viewer_audit.py"],
    ),
    (
        "M4",
        "hostile MCP servers cost at most their own calls: unencodable names, unsendable "
        "inputs, catastrophic output schemas, a request never answered over HTTP, HTTP "
        "floods and sizes, string ids, every notification kind, server requests, huge "
        "listings",
        ["tests/mcp/test_mcp_audit.py"],
    ),
    (
        "O1",
        "tracing keeps the client whole: every recovery path gives the same turn traced; "
        "10 MB messages and odd text are cut before they reach a span",
        [
            "tests/otel/test_otel_recovery.py::test_a_recovery_path_gives_the_same_turn_traced",
            "tests/otel/test_otel_recovery.py::test_the_traced_client_is_the_kind_it_wraps",
            "tests/otel/test_otel_bounds.py::test_a_tool_raising_a_10_mb_message_with_a_huge_id",
            "tests/otel/test_otel_bounds.py::test_an_api_error_with_a_10_mb_message_ends_the_turn_bounded",
            "tests/otel/test_otel_bounds.py::test_bounded_is_short_and_encodable",
        ],
    ),
    (
        "O2",
        "a span processor or tracer that raises at any call changes nothing of a turn, "
        "plain or durable",
        ["tests/otel/test_otel_audit.py"],
    ),
    (
        "S16",
        "WebFetch: every special-purpose address of IANA's registries refused in every "
        "embedding, and never connected; decompression bounded, stacked encodings refused; "
        "one deadline over every hop; any URL or redirect Location gives a result",
        ["tests/tools/test_webfetch_audit.py"],
    ),
    (
        "D2",
        "durable under hostile returns: any tool return journaled as a plain Session "
        "delivers it, never re-run after a restart; a failed journal write fails only its "
        "turn; a compacted turn commits its new history",
        ["tests/durable/test_durable_audit.py"],
    ),
    (
        "A1",
        "a subagent's call cut at any event of its child (abort, interrupt, the consumer "
        "leaving), by a sibling's error or its timeout: every tool_use of every level "
        "answered, usage summed exactly, no task left; a recorded subagent not re-run "
        "after a durable worker's SIGKILL",
        [
            "tests/subagent/test_cancellation.py",
            "tests/durable/test_subagent_restart.py",
        ],
    ),
    ("L", "the leak helper finds each kind of leak", ["tests/testing/test_leaks.py"]),
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


def _kinds() -> str:
    """What the rows are, counted from ROWS: matrix (digits), security (S), recovery (R),
    hostile input at the edges (E)."""
    matrix = sum(r.isdigit() for r, _, _ in ROWS)
    security = sum(r.startswith("S") for r, _, _ in ROWS)
    recovery = sum(r.startswith("R") for r, _, _ in ROWS)
    edges = sum(r.startswith("E") for r, _, _ in ROWS)
    return (
        f"{matrix} matrix rows, {security} security rows, {recovery} recovery rows,"
        f" {edges} edge rows, the leak helper"
    )


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def main() -> int:
    sys.path.insert(0, str(ROOT))
    files = sorted({t.split("::")[0] for _, _, tests in ROWS for t in tests})
    collector = Collector()
    code = pytest.main(
        ["-q", "-p", "no:cacheprovider", "--hypothesis-show-statistics", "-o", "addopts=", *files],
        plugins=[collector],
    )
    from trio_agent.testing._history import STATISTICS as HISTORIES
    from trio_agent.testing._leaks import STATISTICS

    planted = sum(
        n for t, n in collector.leaks.items() if t.startswith("tests/testing/test_leaks.py")
    )
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
        f"- cases covered: {covered} of {len(ROWS)} ({_kinds()})",
        f"- tests run: {len(collector.outcomes)}; hypothesis examples run: {total_examples}",
        f"- leak checks run: {STATISTICS.checks}; leaks found: {unplanted}"
        f" (plus {planted} planted on purpose by tests/testing/test_leaks.py, and found)",
        f"- histories checked for pairing: {HISTORIES.histories}"
        f" ({HISTORIES.tool_uses} tool_use blocks); unpaired tool_use ids:"
        f" {HISTORIES.unpaired}",
        f"- pytest exit status: {int(code)}",
        "",
        "A leak check that finds something raises `LeakError`, so a leak outside",
        "tests/testing/test_leaks.py would also have failed its test.",
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
