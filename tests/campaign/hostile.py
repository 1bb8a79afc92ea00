"""The hostile-input inventory: every test that feeds Tether something hostile, by kind.

Most refusals are tested next to the code that makes them; tests/processes/test_hostile.py adds
the end-to-end ones. This list names them all, so ``make campaign`` can run exactly
these and count, per kind, how many hostile inputs were refused as specified.
"""

from __future__ import annotations

from typing import Any

import pytest

H = "tests/processes/test_hostile.py::"

INVENTORY: dict[str, list[str]] = {
    "paths from the model (tool level)": [
        "tests/unit/test_tools.py::test_read_file_refuses",
        "tests/unit/test_tools.py::test_read_file_refuses_absolute_etc_passwd",
        "tests/unit/test_tools.py::test_delete_file_refuses",
        "tests/unit/test_tools.py::test_directories_are_not_files",
        "tests/unit/test_tools.py::test_read_file_refuses_secrets_although_the_process_can_read_it",
        "tests/unit/test_tools.py::test_read_file_refuses_a_symlink_to_secrets",
        "tests/unit/test_tools.py::test_delete_file_refuses_secrets",
        "tests/unit/test_workspace.py::test_refusals_are_worded",
        "tests/unit/test_workspace.py::test_refusal_message_is_escaped_and_short",
    ],
    "paths from the model (whole run)": [
        H + "test_hostile_path_from_the_model_is_refused_in_words",
        H + "test_fifo_in_the_workspace_is_refused_without_hanging",
    ],
    "tool calls from the model": [
        "tests/unit/test_loopback.py::test_hostile_calls_become_error_results_for_their_call_id",
        "tests/unit/test_loopback.py::test_injected_instruction_cannot_delete_without_approval",
        "tests/unit/test_loopback.py::test_huge_tool_output_is_truncated_with_a_note",
        "tests/unit/test_tools.py::test_read_file_replaces_invalid_utf8_and_truncates",
        "tests/unit/test_tools.py::test_delete_file_key_cannot_be_reused_for_another_path",
        H + "test_tool_name_with_control_characters_is_quoted_escaped",
        H + "test_arguments_beyond_the_schema_are_refused",
        H + "test_provider_reusing_a_call_id_across_turns_gets_both_writes_done",
        H + "test_provider_sending_no_call_ids_gets_both_writes_done",
        H + "test_two_calls_sharing_an_id_in_one_reply_each_get_a_result",
    ],
    "tool output shown to people": [
        H + "test_tool_output_is_kept_verbatim_and_the_trace_has_no_raw_control_characters",
        H + "test_trace_lines_survive_unicode_line_separators",
        H + "test_tether_show_does_not_replay_escape_sequences_to_the_terminal",
        "tests/console/test_tui.py::test_tool_output_with_markup_and_control_characters",
        "tests/console/test_tui.py::test_clean_makes_controls_visible",
    ],
    "secrets": [
        "tests/unit/test_loopback.py::test_api_key_appears_nowhere_in_the_runs_dir",
        "tests/processes/test_persistence.py::test_run_against_tether_provider_with_base_url",
        "tests/unit/test_client.py::test_api_key_never_leaves_the_module",
        "tests/unit/test_client.py::test_api_key_redacted_in_errors_after_retries",
        H + "test_api_key_in_a_4xx_error_body_reaches_neither_trace_nor_state",
        H + "test_api_key_in_5xx_bodies_is_redacted_from_every_retry_notice",
        H + "test_credentials_in_the_base_url_are_not_saved",
    ],
    "tampered or damaged run dirs": [
        "tests/unit/test_loop.py::test_approval_does_not_apply_to_changed_arguments",
        "tests/unit/test_loop.py::test_approval_is_single_use_and_bound_to_the_call",
        "tests/processes/test_persistence.py::test_corrupt_journal_gives_a_clear_error_and_is_left_untouched",
        "tests/processes/test_persistence.py::test_unknown_state_version_is_refused",
        "tests/processes/test_persistence.py::test_torn_journal_tail_is_dropped_on_open",
        "tests/processes/test_persistence.py::test_store_refuses_path_like_run_ids",
        "tests/unit/test_tools.py::test_ledger_tolerates_a_torn_last_line_and_appends_after_it",
        H + "test_damaged_run_dir_is_refused_in_words_and_left_alone",
        H + "test_starting_a_run_under_an_existing_id_leaves_it_untouched",
        H + "test_a_damaged_trace_tail_is_cut_or_skipped_and_seq_continues",
    ],
    "concurrent operators": [
        "tests/processes/test_persistence.py::test_two_processes_cannot_resume_one_run",
    ],
}


class _Outcomes:
    """A pytest plugin keeping each test's outcome by node id."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" or report.outcome != "passed":
            self.outcomes.setdefault(report.nodeid, report.outcome)


def run_all() -> tuple[list[tuple[str, int, int]], list[str]]:
    """Run the inventory; (kind, cases, refused as specified) per kind, and the failures."""
    plugin = _Outcomes()
    selected = [node for nodes in INVENTORY.values() for node in nodes]
    pytest.main(["-q", "--no-header", "--tb=line", *selected], plugins=[plugin])
    rows, failed = [], []
    for kind, nodes in INVENTORY.items():
        mine = {nodeid: outcome for nodeid, outcome in plugin.outcomes.items()
                if any(nodeid == node or nodeid.startswith(node + "[") for node in nodes)}
        rows.append((kind, len(mine), sum(o == "passed" for o in mine.values())))
        failed += [nodeid for nodeid, outcome in mine.items() if outcome != "passed"]
        # A listed test that no longer exists ran nothing: that is a failure, not a pass.
        failed += [f"{node} (listed, but no such test ran)" for node in nodes
                   if not any(n == node or n.startswith(node + "[") for n in plugin.outcomes)]
    return rows, failed
