"""The reduced lab keeps the chapter's experiments working and their shapes true."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tether.tui.cli import main
from tether.demo.lab import QUICK, STOP_REASON, saved_turns, fresh_run, run_lab
from tether.demo.provider.scenarios import DESTRUCTIVE_DECLINED, DESTRUCTIVE_DELETED, RECOVER_ANSWER
from tether.vocab.state import Limits

Tables = dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def lab() -> Tables:
    return asyncio.run(run_lab(QUICK))


def by(rows: list[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    return {row[key]: row for row in rows}


def predicted_input_ratio(first: int, growth: int, n1: int, n2: int) -> float:
    """Turn t resends everything before it: input(n) = n·first + growth·n(n−1)/2."""
    def total(n: int) -> float:
        return n * first + growth * n * (n - 1) / 2
    return total(n2) / total(n1)


def test_runaway_input_tokens_grow_quadratically(lab: Tables) -> None:
    _, probe = asyncio.run(fresh_run("runaway", limits=Limits(max_turns=2)))
    first, second = probe["per_turn_prompt_tokens"]
    rows = lab["runaway_caps"]
    for previous, row in zip(rows, rows[1:], strict=False):
        expected = predicted_input_ratio(first, second - first, previous["cap"], row["cap"])
        assert row["input_ratio"] > row["cap"] / previous["cap"]  # more than linear
        assert row["input_ratio"] == pytest.approx(expected, rel=0.03)
        assert row["turns"] == row["cap"]


def test_budgets_soft_overshoots_under_one_turn_strict_never(lab: Tables) -> None:
    for row in lab["budgets"]:
        assert row["status"] == "budget_exceeded"
        if row["mode"] == "soft":
            assert 0 <= row["overshoot_usd"] < row["last_turn_usd"]
        else:
            assert row["spend_usd"] <= row["budget_usd"]


def test_only_descriptive_errors_reach_the_answer(lab: Tables) -> None:
    rows = by(lab["tool_error_policies"], "policy")
    assert rows["descriptive"]["status"] == "completed"
    assert rows["descriptive"]["answer"] == RECOVER_ANSWER
    assert rows["fatal"]["status"] == "failed"
    assert rows["generic"]["answer"] != RECOVER_ANSWER


def test_triage_stops_a_permanent_error_at_once(lab: Tables) -> None:
    rows = by(lab["permanent_error"], "triage")
    assert (rows[True]["status"], rows[True]["turns"]) == ("failed", 1)
    assert rows[False]["status"] == "max_turns_exceeded"
    assert rows[False]["cost_usd"] > 10 * rows[True]["cost_usd"]


def test_dedupe_saves_one_tool_run_and_no_turn(lab: Tables) -> None:
    rows = by(lab["dedupe"], "case")
    off, on = rows["repeat, dedupe off"], rows["repeat, dedupe read-only"]
    assert on["tool_runs"] == off["tool_runs"] - 1
    assert on["turns"] == off["turns"]
    assert on["cost_usd"] == off["cost_usd"] > rows["repeat_baseline"]["cost_usd"]


def test_a_write_is_performed_once(lab: Tables) -> None:
    rows = by(lab["dedupe_writes"], "dedupe")
    assert rows["all"]["deletions"] == rows["read-only"]["deletions"] == 1
    assert rows["read-only"]["tool_runs"] == 2 and rows["all"]["tool_runs"] == 1


def test_no_deletion_after_a_rejection(lab: Tables) -> None:
    rows = by(lab["approvals"], "case")
    assert rows["stopped at the approval"]["status"] == "interrupted"
    assert rows["approved"]["access_log_deleted"] is True
    assert rows["approved"]["answer"] == DESTRUCTIVE_DELETED
    for case in ("rejected with a reason", "rejected, no reason"):
        assert rows[case]["access_log_deleted"] is False
        assert rows[case]["answer"] == DESTRUCTIVE_DECLINED
    silent = rows["silent rejection (lab-only)"]
    assert silent["access_log_deleted"] is False and silent["answer"] == DESTRUCTIVE_DELETED  # the lie


def test_resumed_run_costs_what_the_uninterrupted_one_did(lab: Tables) -> None:
    killed, resumed, clean = lab["crash_resume"]
    assert killed["turns"] == 2 and killed["status"] == "running"
    assert resumed["status"] == "completed"
    assert (resumed["turns"], resumed["cost_usd"]) == (clean["turns"], clean["cost_usd"])
    finished_first = killed["tool_runs"].split(" (killed during")[0]  # a cut-off run is redone on resume
    across = [n for text in (finished_first, resumed["tool_runs"]) for n in text.split(", ") if n != "none"]
    assert sorted(across) == sorted(clean["tool_runs"].split(", "))


def test_a_turn_counts_as_saved_only_once_the_loop_went_past_it(tmp_path: Path) -> None:
    """The loop traces a turn just before it saves it: a SIGKILL timed on the turn line
    alone could land before the save and leave the killed run a turn short."""
    trace = tmp_path / "trace.jsonl"
    lines = [{"kind": "run_started"}, {"kind": "turn", "turn": 1}, {"kind": "tool_start"},
             {"kind": "tool_result"}, {"kind": "turn", "turn": 2}]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert saved_turns(trace) == 1
    with trace.open("a") as out:
        out.write(json.dumps({"kind": "tool_start"}) + "\n")
    assert saved_turns(trace) == 2
    assert saved_turns(tmp_path / "absent.jsonl") == 0


def test_stop_ends_the_scan_long_before_it_would_finish(lab: Tables) -> None:
    unstopped, stopped = lab["cancellation"]
    assert (unstopped["status"], unstopped["entries_scanned"]) == ("completed", 1200)
    assert (stopped["status"], stopped["reason"]) == ("interrupted", STOP_REASON)
    assert stopped["entries_scanned"] < 1200


def test_latency_is_paid_per_turn(lab: Tables) -> None:
    rows = lab["latency"]
    for row in rows:
        assert row["provider_ms"] >= row["latency_ms"] * row["turns"]
        assert 0 <= row["harness_ms"] < row["wall_ms"]


def test_subagent_spend_counts_in_the_tree(lab: Tables) -> None:
    (row,) = lab["subagent"]
    assert row["child_turns"] > 0 and row["child_usd"] > 0
    assert row["tree_usd"] == pytest.approx(row["parent_own_usd"] + row["child_usd"], abs=1e-8)


def test_plan_row(lab: Tables) -> None:
    (row,) = lab["plan"]
    assert (row["status"], row["turns"], row["tool_runs"]) == ("completed", 3, 2)
    assert len(row["per_turn_prompt_tokens"]) == 3


def test_cli_json_parses_and_out_writes_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lab.md"
    code = main(["lab", "--quick", "--json", "--only", "plan", "--only", "dedupe", "--out", str(out)])
    assert code == 0
    tables = json.loads(capsys.readouterr().out)
    assert set(tables) == {"plan", "dedupe"} and isinstance(tables["dedupe"], list)
    written = out.read_text()
    assert "## dedupe" in written and "| case |" in written
    assert written.splitlines()[2].startswith("Generated by `tether lab --out docs/lab.md`")


def test_cli_rejects_an_unknown_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "--only", "nonsense"]) == 2
    assert "unknown experiment" in capsys.readouterr().err
