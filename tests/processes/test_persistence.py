"""Persistence and resume across real processes: SIGKILL, crash points, locks, bad files.

The runs killed or crashed, and the runs that hold a lock, are real processes; so are one
run per exit path, the provider, and a listing. The commands around them (the runs
compared against, the resumes, the listings) run by the CLI's own main in the test's
process (tests/support.py, cli_here): another process to the one that died, without a
start-up each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tether.observe.report import SUMMARY_KEYS
from tether.vocab.state import RunState, StateError
from tether.store.files.store import RunStore
from tether.store.trace import read_trace

from tests.support import cli_here, crashing, place, wait_until


def tether(*args: str, env: dict[str, str] | None = None, real: bool = False) -> subprocess.CompletedProcess:
    """``tether ARGS`` with ``env`` added to this environment: a child process when ``real``,
    else the CLI's main in this process."""
    if not real:
        return cli_here(*args, env={**os.environ, **env} if env else None)
    return subprocess.run([sys.executable, "-m", "tether.tui.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_sigkill_mid_run_then_resume_costs_what_an_uninterrupted_run_costs(tmp_path: Path):
    baseline = json.loads(tether("run", "plan", "--json", *place(tmp_path / "a")).stdout)

    where = place(tmp_path / "b")
    proc = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "plan", "--run-id", "victim",
                             "--latency-ms", "1000", "--json", *where], stdout=subprocess.PIPE, text=True)
    trace = tmp_path / "b" / "runs" / "victim" / "trace.jsonl"
    store = RunStore(tmp_path / "b" / "runs")

    def both_results_saved() -> bool:
        try:
            return sum(m["role"] == "tool" for m in store.load("victim").messages) == 2
        except StateError:
            return False

    try:  # after turn 2 and its tool: the kill lands while turn 3 waits on the provider
        wait_until(both_results_saved, "turn 2's tool result to be saved", 60.0)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    first = [r for r in read_trace(trace) if r["kind"] == "tool_start"]

    resumed = tether("resume", "victim", "--json", *where)
    out = json.loads(resumed.stdout)
    assert resumed.returncode == 0
    assert out["status"] == "completed"
    assert out["answer"] == baseline["answer"]
    assert out["turns"] == baseline["turns"] == 3
    assert out["cost_usd"] == baseline["cost_usd"]
    assert out["prompt_tokens"] == baseline["prompt_tokens"]
    # Exactly the two tool runs the task needs, across both processes.
    across = [r["name"] for r in first] + [r["name"] for r in out["tool_runs"]]
    assert across == ["list_files", "read_file"]
    seqs = [r["seq"] for r in read_trace(trace)]
    assert seqs == sorted(set(seqs))


def test_crash_between_a_write_and_its_record_does_not_repeat_it(tmp_path: Path):
    where = place(tmp_path)
    crashed = crashing("after_tool:2", "run", "destructive", "--run-id", "w", "--auto-approve", "delete_file",
                       "--json", *where)  # the delete has run, its result is not saved
    assert crashed.returncode == 86, crashed.stderr
    assert not (tmp_path / "ws" / "access.log").exists()
    state = RunStore(tmp_path / "runs").load("w")
    assert list(state.intents) == ["call_1_0"]  # the intent was recorded before the write

    out = json.loads(tether("resume", "w", "--json", *where).stdout)
    assert out["status"] == "completed"
    ledger = [json.loads(line) for line in (tmp_path / "runs" / "w" / "ledger.jsonl").read_text().splitlines()]
    assert [r["status"] for r in ledger].count("begun") == 1  # performed once
    final = RunStore(tmp_path / "runs").load("w")
    result = [m for m in final.messages if m["role"] == "tool"][-1]["content"]
    assert "access.log" in result and "no such file" not in result


def test_two_processes_cannot_resume_one_run(tmp_path: Path):
    where = place(tmp_path)
    # The holder is slowed by provider latency so it cannot finish before the second starts.
    holder = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "runaway", "--run-id", "r",
                               "--max-turns", "400", "--latency-ms", "100", "--json", *where],
                              stdout=subprocess.PIPE, text=True)
    trace = tmp_path / "runs" / "r" / "trace.jsonl"
    try:
        wait_until(lambda: any(r["kind"] == "turn" for r in read_trace(trace)), "the holder's first turn", 60.0)
        second = tether("resume", "r", "--max-turns", "400", *where)
    finally:
        holder.kill()
        holder.wait()
    assert second.returncode == 2
    assert "already being run by another process" in second.stderr



def test_the_lock_is_the_journal_itself_and_survives_a_compaction(tmp_path: Path):
    store = RunStore(tmp_path / "runs")
    store.create(RunState(run_id="r", model="plan", messages=[{"role": "user", "content": "hi"}]))
    assert sorted(p.name for p in (tmp_path / "runs" / "r").iterdir()) == ["journal.jsonl"]  # no lock file
    state, handle = store.open("r")
    try:
        handle.compact(state)  # the journal is replaced by a new file...
        with pytest.raises(StateError, match="already being run by another process"):
            store.open("r")  # ...which is locked from the start
    finally:
        handle.release()
    again, other = store.open("r")  # released: the next holder gets it
    other.release()
    assert again.messages == state.messages

def test_corrupt_journal_gives_a_clear_error_and_is_left_untouched(tmp_path: Path):
    where = place(tmp_path)
    tether("run", "plan", "--run-id", "p", *where)
    journal = tmp_path / "runs" / "p" / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"m": {"role": "user", "content": "half\n'
    journal.write_bytes(b"".join(lines))
    before = journal.read_bytes()
    result = tether("show", "p", *where)
    assert result.returncode == 2 and "corrupt journal" in result.stderr and "line 2" in result.stderr
    assert journal.read_bytes() == before
    assert tether("resume", "p", *where).returncode == 2
    assert journal.read_bytes() == before
    listing = tether("runs", *where, real=True)
    assert "skipped p: corrupt journal" in listing.stderr


def test_unknown_state_version_is_refused(tmp_path: Path):
    where = place(tmp_path)
    tether("run", "runaway", "--run-id", "v", "--max-turns", "1", *where)
    journal = tmp_path / "runs" / "v" / "journal.jsonl"
    journal.write_bytes(journal.read_bytes().replace(b'"version":1', b'"version":99'))
    before = journal.read_bytes()
    result = tether("resume", "v", *where)
    assert result.returncode == 2 and "unknown state version 99" in result.stderr
    assert journal.read_bytes() == before


def test_torn_journal_tail_is_dropped_on_open(tmp_path: Path):
    store = RunStore(tmp_path / "runs")
    where = place(tmp_path)
    tether("run", "runaway", "--run-id", "t", "--max-turns", "2", *where)
    journal = tmp_path / "runs" / "t" / "journal.jsonl"
    committed = journal.read_bytes()
    expected = store.load("t")
    with open(journal, "ab") as f:  # a save cut short: a message, no commit, a torn line
        f.write(b'{"m":{"role":"assistant","content":"whole"}}\n{"m":{"role":"assistant","content":"half a li')
    state, handle = store.open("t")
    handle.release()
    assert journal.read_bytes() == committed
    assert state.messages == expected.messages and state.turns == expected.turns


def test_cli_exit_codes_and_json_keys(tmp_path: Path):
    where = place(tmp_path)
    cases = {
        ("plan",): 0,
        ("forbidden",): 1,
        ("runaway", "--max-turns", "2"): 3,
        ("runaway", "--budget", "0.001"): 4,
        ("destructive",): 5,
    }
    for args, code in cases.items():
        result = tether("run", *args, "--json", *where, real=code == 5)  # one real process's exit code
        assert result.returncode == code, (args, result.stderr)
        assert tuple(json.loads(result.stdout)) == SUMMARY_KEYS
    usage = tether("run", "no_such_scenario", *where, real=True)
    assert usage.returncode == 2 and "unknown scenario 'no_such_scenario'" in usage.stderr
    assert tether("run", "plan", "--max-turns", "0", *where).returncode == 2


def test_cli_text_summary_and_runs_listing(tmp_path: Path):
    where = place(tmp_path)
    text = tether("run", "plan", *where, real=True).stdout
    assert text.startswith("plan, cap 20  turns=3  tools=2  in=")
    assert "status=completed" in text and "answer: errors.log mentions a timeout" in text
    assert "per-turn prompt tokens: " in text
    runs = json.loads(tether("runs", "--json", *where).stdout)
    assert len(runs) == 1 and [r["name"] for r in runs[0]["tool_runs"]] == ["list_files", "read_file"]
    shown = json.loads(tether("show", runs[0]["run_id"], "--json", *where).stdout)
    assert shown["messages"][1]["role"] == "user" and shown["answer"] == runs[0]["answer"]
    trace_lines = tether("trace", runs[0]["run_id"], *where).stdout.splitlines()
    assert json.loads(trace_lines[-1])["kind"] == "run_stopped"


def test_store_refuses_path_like_run_ids(tmp_path: Path):
    with pytest.raises(StateError):
        RunStore(tmp_path).run_dir("../escape")


def test_run_against_tether_provider_with_base_url(tmp_path: Path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "provider", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def listening() -> bool:
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0
        wait_until(listening, "tether provider to listen", 60.0)
        result = tether("run", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "plan",
                        "--prompt", "Which file mentions a timeout?", "--json", *place(tmp_path),
                        env={"LLM_API_KEY": "sk-cli-secret-123456"})
    finally:
        server.terminate()
        server.wait()
    out = json.loads(result.stdout)
    assert result.returncode == 0 and out["status"] == "completed"
    assert "worker 7" in out["answer"]
    assert "sk-cli-secret-123456" not in "".join(
        p.read_text(errors="replace") for p in (tmp_path / "runs").rglob("*") if p.is_file())
    missing = tether("run", "--base-url", "http://127.0.0.1:9/v1", *place(tmp_path))
    assert missing.returncode == 2 and "--model" in missing.stderr


def test_cancel_after_stops_the_scan_with_words(tmp_path: Path):
    result = tether("run", "slow", "--cancel-after", "1", "--json", *place(tmp_path))
    out = json.loads(result.stdout)
    assert result.returncode == 5
    assert out["interruption"]["type"] == "cancelled"
    shown = json.loads(tether("show", out["run_id"], "--json", *place(tmp_path)).stdout)
    words = shown["messages"][-1]["content"]
    assert words.startswith("cancelled by the operator after") and "did not finish" in words
