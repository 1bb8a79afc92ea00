"""A file store saved by the code before the restructure still loads, lists, shows, traces,
takes decisions and resumes (tests/data/store_before_move: its README says how it was made).

Everything goes through the CLI (tests/support.py, cli_here), as a user would meet it: no
module of the harness is imported here, since their paths are what the restructure changed.
Each test works on its own copy of the store.

The runs were made by the demo agents, which remember their workspace by its absolute path,
``/tmp/tether-before-move/workspace``. A clean machine has no such folder: a decision or a
resume lays the sample out there again (the demo does that for a missing or empty workspace)
and works on it. The tests that go on with a run remove that folder first, so every one of
them sees it missing, and remove it again after; a lock beside it keeps two of them (or two
test sessions) from sharing it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import cli_here

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "store_before_move" / "runs"
HOME = Path("/tmp/tether-before-move")  # the TETHER_HOME the runs were made in
RECORDED_WORKSPACE = HOME / "workspace"  # the demo workspace every run names
SAMPLE = ["access.log", "errors.log", "notes.txt", "secrets.env"]

PLAN_ANSWER = "errors.log mentions a timeout: worker 7 timed out after 30000 ms."
DELETED = "Deleted access.log to free space."
DECLINED = "I did not delete anything: you declined the deletion."

# run id -> (status, interruption type, turns, cost, task) as the pre-move code saved them
RUNS = {
    "plan-completed": ("completed", None, 3, 0.003634, "Which file mentions a timeout?"),
    "destructive-approve": ("interrupted", "approval", 2, 0.00183, "Free some space in the workspace."),
    "destructive-reject": ("interrupted", "approval", 2, 0.00183, "Free some space in the workspace."),
    "slow-stopped": ("interrupted", "cancelled", 1, 0.000822, "How many entries are in the archive?"),
    "runaway-max-turns": ("max_turns_exceeded", "max_turns", 3, 0.002832, "Keep an eye on the workspace."),
}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A copy of the saved store: the runs dir alone, as `--store` takes it."""
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURE, runs)
    return runs


def tether(store: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """``tether ARGS --store STORE``, with a home of the test's own and none of the caller's
    Tether settings; the exit code must be ``code``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "LLM_", "OTEL_"))}
    env["TETHER_HOME"] = str(store.parent / "home")
    done = cli_here(*args, "--store", str(store), env=env, cwd=store.parent)
    assert done.returncode == code, f"tether {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture
def recorded_workspace() -> Iterator[Path]:
    """The workspace the runs name, missing when the test starts, the test's alone until it ends."""
    HOME.parent.mkdir(parents=True, exist_ok=True)
    with open(HOME.parent / "tether-before-move.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            shutil.rmtree(RECORDED_WORKSPACE, ignore_errors=True)
            yield RECORDED_WORKSPACE
        finally:
            shutil.rmtree(RECORDED_WORKSPACE, ignore_errors=True)
            with contextlib.suppress(OSError):
                HOME.rmdir()  # only if the tests made it (it is empty)


def trace_records(store: Path, run_id: str) -> list[dict]:
    out = tether(store, "trace", run_id).stdout
    return [json.loads(line) for line in out.splitlines()]


def header(shown: str) -> str:
    """The first line of ``tether show`` without the wall time (which the trace decides)."""
    return re.sub(r"  ms=[\d.]+", "", shown.splitlines()[0])


def test_the_fixture_names_the_workspace_the_tests_lay_out() -> None:
    for run_id in RUNS:
        journal = (FIXTURE / run_id / "journal.jsonl").read_text()
        assert f'"workspace":"{RECORDED_WORKSPACE}"' in journal
        assert (FIXTURE / run_id / "trace.jsonl").is_file()


@pytest.mark.parametrize("index", ["as saved", "dropped"])
def test_runs_lists_every_run_with_its_status(store: Path, index: str) -> None:
    if index == "dropped":
        (store / "index.sqlite").unlink()

    listed = tether(store, "runs").stdout.splitlines()
    assert [line.split()[:3] for line in listed] == [
        ["plan-completed", "completed", "plan"],
        ["destructive-approve", "interrupted", "destructive"],
        ["destructive-reject", "interrupted", "destructive"],
        ["slow-stopped", "interrupted", "slow"],
        ["runaway-max-turns", "max_turns_exceeded", "runaway"],
    ]
    assert "turns=3    cost=$0.0036" in listed[0]
    for line in listed[1:3]:
        assert line.endswith("turns=2    cost=$0.0018  waits for approval of delete_file")
    assert "turns=1    cost=$0.0008" in listed[3]
    assert "turns=3    cost=$0.0028" in listed[4]
    assert (store / "index.sqlite").is_file()  # kept, or made again from the journals

    summaries = {s["run_id"]: s for s in json.loads(tether(store, "runs", "--json").stdout)}
    assert list(summaries) == list(RUNS)
    for run_id, (status, interruption, turns, cost, task) in RUNS.items():
        s = summaries[run_id]
        assert (s["status"], (s["interruption"] or {}).get("type"), s["turns"], s["cost_usd"], s["task"]) == \
            (status, interruption, turns, cost, task), run_id
        assert s["liveness"] is None and s["owner"] is None and s["error"] is None
    assert summaries["plan-completed"]["answer"] == PLAN_ANSWER
    assert summaries["plan-completed"]["tool_runs"] == [{"name": "list_files", "args": {}},
                                                         {"name": "read_file", "args": {"path": "errors.log"}}]
    assert summaries["slow-stopped"]["tool_runs"] == [{"name": "scan_archive", "args": {}}]
    assert summaries["destructive-approve"]["interruption"]["toolName"] == "delete_file"
    assert summaries["destructive-approve"]["interruption"]["args"] == '{"path":"access.log"}'
    assert summaries["slow-stopped"]["interruption"]["reason"] == "cancelled after 1 s (--cancel-after)"
    assert summaries["runaway-max-turns"]["max_turns"] == 3

    live = tether(store, "runs", "--live").stdout.splitlines()
    assert [line.split()[0] for line in live] == ["destructive-approve", "destructive-reject"]


def test_the_standing_rule_and_the_empty_record_of_decisions_load(store: Path) -> None:
    rules = tether(store, "rules").stdout
    assert rules.startswith("R1    deny delete_file where path=*.env  [store]  never the credentials  (carol, ")
    assert tether(store, "decisions").stdout == f"no decisions on {store}\n"


def test_show_prints_each_saved_transcript(store: Path) -> None:
    plan = tether(store, "show", "plan-completed").stdout
    assert header(plan) == "plan, cap 20  turns=3  tools=2  in=1577  out=40  cost=$0.0036  status=completed"
    lines = plan.splitlines()
    assert lines[1:3] == [f"answer: {PLAN_ANSWER}", "per-turn prompt tokens: 355 420 802"]
    assert lines[4] == "[user] Which file mentions a timeout?"
    assert lines[5] == "[assistant → list_files] {}  (call_0_0)"
    assert lines[6:11] == ["[tool] access.log  404 bytes", "errors.log  987 bytes", "notes.txt  30 bytes",
                           "secrets.env  99 bytes  (not readable)", "4 files"]
    assert lines[11] == '[assistant → read_file] {"path":"errors.log"}  (call_1_0)'
    assert "2024-05-02 03:15:22 ERROR [pool] worker 7 timed out after 30000 ms while processing batch 4411" in lines
    assert lines[-1] == f"[assistant] {PLAN_ANSWER}"

    for run_id in ("destructive-approve", "destructive-reject"):
        shown = tether(store, "show", run_id).stdout.splitlines()
        assert header("\n".join(shown)) == \
            "destructive, cap 20  turns=2  tools=1  in=777  out=23  cost=$0.0018  status=interrupted"
        assert shown[1] == ('waiting for approval: delete_file {"path":"access.log"} (call call_1_0); '
                            f"tether approve|reject {run_id}")
        assert shown[-1] == '[assistant → delete_file] {"path":"access.log"}  (call_1_0)'

    slow = tether(store, "show", "slow-stopped").stdout.splitlines()
    assert header("\n".join(slow)) == \
        "slow, cap 20  turns=1  tools=1  in=357  out=9  cost=$0.0008  status=interrupted"
    assert slow[1] == "cancelled: cancelled after 1 s (--cancel-after)"
    assert slow[-2] == "[assistant → scan_archive] {}  (call_0_0)"
    assert re.fullmatch(r"\[tool\] cancelled by the operator after [\d.]+ s: cancelled after 1 s \(--cancel-after\); "
                        r"the scan_archive call did not finish \(\d+ of 1200 entries scanned\)\.", slow[-1])

    runaway = tether(store, "show", "runaway-max-turns").stdout.splitlines()
    assert header("\n".join(runaway)) == \
        "runaway, cap 3  turns=3  tools=1  in=1254  out=27  cost=$0.0028  status=max_turns_exceeded"
    assert runaway[1] == "stopped by max_turns; raise the limit with tether resume runaway-max-turns"
    assert [line for line in runaway if line.startswith("[assistant")] == \
        [f"[assistant → list_files] {{}}  (c{t})" for t in range(3)]

    as_json = json.loads(tether(store, "show", "plan-completed", "--json").stdout)
    assert as_json["status"] == "completed" and as_json["answer"] == PLAN_ANSWER
    assert [m["role"] for m in as_json["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                        "assistant"]


def test_trace_prints_each_saved_trace(store: Path) -> None:
    for run_id in RUNS:
        assert tether(store, "trace", run_id).stdout == (FIXTURE / run_id / "trace.jsonl").read_text()

    kinds = {run_id: [r["kind"] for r in trace_records(store, run_id)] for run_id in RUNS}
    assert kinds["plan-completed"] == ["run_started", "turn", "tool_start", "tool_result", "turn", "tool_start",
                                       "tool_result", "turn", "run_stopped"]
    assert kinds["destructive-approve"] == ["run_started", "turn", "tool_start", "tool_result", "turn",
                                            "approval_required", "run_stopped"]
    assert kinds["slow-stopped"][:4] == ["run_started", "turn", "tool_start", "tool_progress"]
    assert kinds["slow-stopped"][-2:] == ["tool_result", "run_stopped"]
    slow = trace_records(store, "slow-stopped")
    assert slow[3]["label"] == "scanned 200 of 1200 entries"
    assert slow[-1]["interruption"] == {"type": "cancelled", "reason": "cancelled after 1 s (--cancel-after)"}
    for run_id, (status, *_rest) in RUNS.items():
        last = trace_records(store, run_id)[-1]
        assert (last["kind"], last["status"], last["run_id"]) == ("run_stopped", status, run_id)


def test_a_waiting_call_is_approved_and_the_run_finishes(store: Path, recorded_workspace: Path) -> None:
    done = tether(store, "approve", "destructive-approve", "--as", "alice").stdout.splitlines()
    assert header("\n".join(done)) == \
        "destructive, cap 20  turns=3  tools=1  in=1246  out=30  cost=$0.0029  status=completed"
    assert done[1] == f"answer: {DELETED}"

    # the workspace the run names was missing: laid out again, and the approved call deleted its access.log
    assert sorted(p.name for p in recorded_workspace.iterdir()) == [n for n in SAMPLE if n != "access.log"]

    shown = tether(store, "show", "destructive-approve").stdout.splitlines()
    assert shown[-2:] == ["[tool] Approved by the operator alice. Deleted access.log (404 bytes).",
                          f"[assistant] {DELETED}"]
    records = trace_records(store, "destructive-approve")
    assert [r["kind"] for r in records[7:]] == ["approval_decision", "run_started", "tool_start", "tool_result", "turn",
                                               "run_stopped"]
    assert (records[7]["verdict"], records[7]["by"]) == ("approved", "alice")
    assert records[8]["resumed"] is True
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))  # the saved seq goes on
    assert records[-1]["status"] == "completed"

    listed = {line.split()[0]: line.split()[1] for line in tether(store, "runs").stdout.splitlines()}
    assert listed["destructive-approve"] == "completed"
    assert listed["destructive-reject"] == "interrupted"
    decisions = json.loads(tether(store, "decisions", "--json").stdout)
    assert [(d["run_id"], d["tool"], d["verdict"], d["by"]) for d in decisions] == \
        [("destructive-approve", "delete_file", "approved", "alice")]


def test_a_waiting_call_is_rejected_and_the_run_finishes(store: Path, recorded_workspace: Path) -> None:
    done = tether(store, "reject", "destructive-reject", "--reason", "keep the logs", "--as", "bob").stdout
    assert header(done) == "destructive, cap 20  turns=3  tools=0  in=1248  out=34  cost=$0.0029  status=completed"
    assert done.splitlines()[1] == f"answer: {DECLINED}"
    assert sorted(p.name for p in recorded_workspace.iterdir()) == SAMPLE  # laid out again, nothing deleted

    shown = tether(store, "show", "destructive-reject").stdout.splitlines()
    assert shown[-2:] == ["[tool] The operator bob declined this call: keep the logs. Nothing was done.",
                          f"[assistant] {DECLINED}"]
    decision = trace_records(store, "destructive-reject")[7]
    assert (decision["kind"], decision["verdict"], decision["by"]) == ("approval_decision", "rejected", "bob")
    decisions = json.loads(tether(store, "decisions", "--json").stdout)
    assert [(d["run_id"], d["verdict"], d["by"]) for d in decisions] == [("destructive-reject", "rejected", "bob")]


def test_the_stopped_run_resumes_to_its_answer(store: Path, recorded_workspace: Path) -> None:
    scanned = re.search(r"(\d+) of 1200 entries scanned", tether(store, "show", "slow-stopped").stdout)
    assert scanned is not None
    done = tether(store, "resume", "slow-stopped").stdout
    assert header(done) == "slow, cap 20  turns=2  tools=0  in=781  out=20  cost=$0.0018  status=completed"
    answer = f"The archive scan did not finish ({scanned[1]} entries scanned)."
    assert done.splitlines()[1] == f"answer: {answer}"

    shown = tether(store, "show", "slow-stopped").stdout.splitlines()
    assert shown[-1] == f"[assistant] {answer}"
    records = trace_records(store, "slow-stopped")
    assert records[-1]["kind"] == "run_stopped" and records[-1]["status"] == "completed"
    assert tether(store, "runs").stdout.splitlines()[3].split()[:2] == ["slow-stopped", "completed"]


def test_the_capped_run_resumes_with_a_raised_cap(store: Path, recorded_workspace: Path) -> None:
    done = tether(store, "resume", "runaway-max-turns", "--max-turns", "5", code=3).stdout
    assert header(done) == "runaway, cap 5  turns=5  tools=0  in=2400  out=45  cost=$0.0053  status=max_turns_exceeded"
    assert done.splitlines()[2] == "per-turn prompt tokens: 356 418 480 542 604"
    shown = tether(store, "show", "runaway-max-turns").stdout.splitlines()
    assert [line for line in shown if line.startswith("[assistant")] == \
        [f"[assistant → list_files] {{}}  (c{t})" for t in range(5)]
    summary = next(s for s in json.loads(tether(store, "runs", "--json").stdout) if s["run_id"] == "runaway-max-turns")
    assert (summary["status"], summary["turns"], summary["max_turns"]) == ("max_turns_exceeded", 5, 5)
