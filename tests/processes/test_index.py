"""Owners, orphans and the index of summaries (issue "Wave 2 · 2/5").

* Each held run has an ``owner.json`` (who, since when, a heartbeat) while its process
  holds the journal's lock; liveness is the lock's, so a killed owner's leftover record
  shows an *orphaned* run, and ``tether resume`` adopts it.
* ``index.sqlite`` keeps a summary of every run; a reader finds missing and stale rows
  with one directory scan and replays only those journals, and rebuilds a lost or
  damaged index.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.store.files.index import RunIndex
from tether.store.files.layout import INDEX_FILE, JOURNAL_FILE, OWNER_FILE, TRACE_FILE
from tether.store.summary import RunSummary
from tether.observe.report import LISTING_KEYS, SUMMARY_KEYS, recorded_records, summary
from tether.vocab.state import Limits, RunState, Status
from tether.store.files.handle import RunHandle
from tether.store.files.lock import lock_held
from tether.store.files.store import RunStore
from tether.store.trace import read_trace

from tests.support import cli_here, crashing, load_all, place, wait_until

# What a summary says about a run, compared with the run itself (liveness, owner and the
# journal's identity are not the run's).
COMPARED = ("run_id", "status", "model", "agent", "parent_run_id", "task", "turns", "cost_usd", "budget_usd",
            "max_turns", "created_at", "updated_at", "interruption", "error", "prompt_tokens", "completion_tokens",
            "child_cost_usd", "per_turn_prompt_tokens", "estimated_turns", "assumed_price", "answer", "tool_runs")


def tether(*args: str, real: bool = False) -> subprocess.CompletedProcess:
    """``tether ARGS``: a child process when ``real``, else the CLI's main in this process
    (tests/support.py, cli_here): the same listing, without a start-up each."""
    if not real:
        return cli_here(*args)
    return subprocess.run([sys.executable, "-m", "tether.tui.cli", *args], capture_output=True, text=True, timeout=120)


def expected(state: RunState) -> dict:
    return {name: getattr(RunSummary.of(state, (0, 0, 0)), name) for name in COMPARED}


def said(summary: RunSummary) -> dict:
    return {name: getattr(summary, name) for name in COMPARED}


def journal_key(store: RunStore, run_id: str) -> tuple[int, int, int]:
    st = os.stat(store.run_dir(run_id) / JOURNAL_FILE)
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def owner_record(store: RunStore, run_id: str) -> dict | None:
    try:
        return json.loads((store.run_dir(run_id) / OWNER_FILE).read_text())
    except FileNotFoundError:
        return None


def replays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run ids whose journals readers replay from now on."""
    seen: list[str] = []
    real = RunStore._replay

    def counting(self: RunStore, run_id: str, *args, **kw):
        seen.append(run_id)
        return real(self, run_id, *args, **kw)

    monkeypatch.setattr(RunStore, "_replay", counting)
    return seen


async def _some_runs(harness: Harness) -> dict[str, str]:
    """One run of each kind of ending, plus one created and never started."""
    ids = {}
    for name, scenario, limits in (("completed", "plan", None), ("waiting", "destructive", None),
                                   ("capped", "runaway", Limits(max_turns=2)), ("failed", "forbidden", None)):
        state = harness.new_run(scenario, limits=limits)
        await harness.run(state.run_id)
        ids[name] = state.run_id
    ids["never_started"] = harness.new_run("plan").run_id
    return ids


@pytest.fixture
def pid_of_a_dead_process() -> Iterator[int]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    yield child.pid


# ---- the summaries ------------------------------------------------------------------------

async def test_summaries_match_the_runs_and_come_from_the_index(harness: Harness, runs_dir: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    ids = await _some_runs(harness)
    store = RunStore(runs_dir)
    states, problems = load_all(store)
    assert not problems
    seen = replays(monkeypatch)
    summaries = store.summaries()
    assert seen == []  # every row was written by the process that ran the run, and is current
    assert [said(s) for s in summaries] == [expected(s) for s in states]
    by_id = {s.run_id: s for s in summaries}
    assert by_id[ids["completed"]].answer and by_id[ids["completed"]].task == "Which file mentions a timeout?"
    assert by_id[ids["waiting"]].waiting and by_id[ids["waiting"]].interruption["type"] == "approval"
    assert by_id[ids["capped"]].status == "max_turns_exceeded" and by_id[ids["capped"]].max_turns == 2
    assert by_id[ids["failed"]].error
    # Created and never started: saved as running, and no process holds it.
    assert by_id[ids["never_started"]].liveness == "orphaned"
    assert all(s.liveness is None for s in summaries if s.status != "running")
    assert all(row.key == journal_key(store, run_id) for run_id, row in store.index.all().items())
    assert store.summary(ids["completed"]).answer == by_id[ids["completed"]].answer
    assert store.liveness(ids["never_started"]) == "orphaned" and store.liveness(ids["completed"]) is None

    # The CLI lists from the same summaries: the keys it always had first, then the index's.
    listed = json.loads(tether("runs", "--json", "--runs-dir", str(runs_dir), real=True).stdout)
    assert [tuple(row) for row in listed] == [LISTING_KEYS] * len(states)
    assert LISTING_KEYS[:len(SUMMARY_KEYS)] == SUMMARY_KEYS
    for state, row in zip(states, listed):  # what it printed before the index, value for value
        run_dir = store.run_dir(state.run_id)
        before = summary(state, *recorded_records(read_trace(run_dir / TRACE_FILE)))
        assert {key: row[key] for key in SUMMARY_KEYS} == before
    plan = next(row for row in listed if row["run_id"] == ids["completed"])
    assert [r["name"] for r in plan["tool_runs"]] == ["list_files", "read_file"] and plan["ms"] > 0
    again = json.loads(tether("runs", "--json", "--runs-dir", str(runs_dir)).stdout)  # trace digests cached
    assert again == listed
    text = tether("runs", "--runs-dir", str(runs_dir)).stdout.splitlines()
    assert len(text) == len(states)
    assert text[0].split()[:2] == [ids["completed"], "completed"] and "turns=3" in text[0]


async def test_a_commit_the_index_missed_is_found_stale_and_replayed(harness: Harness, runs_dir: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    ids = await _some_runs(harness)
    store = RunStore(runs_dir)
    store.summaries()
    # A process that crashed between its commit and its index update: the journal has a
    # commit the index never saw (a handle with no index writes exactly that).
    run_id = ids["capped"]
    state = store.load(run_id)
    handle = RunHandle(store.run_dir(run_id), run_id)
    handle.acquire()
    try:
        handle.attach(state, os.path.getsize(store.run_dir(run_id) / JOURNAL_FILE))
        state.turns, state.cost_usd, state.status = 7, 1.25, Status.COMPLETED
        state.messages.append({"role": "assistant", "content": "done after all"})
        handle.save(state)
    finally:
        handle.release()
    # And a journal edited by hand: its last commit says something else.
    edited = store.run_dir(ids["failed"]) / JOURNAL_FILE
    lines = edited.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[-1])
    record["commit"]["error"] = "edited after indexing"
    lines[-1] = json.dumps(record).encode() + b"\n"
    edited.write_bytes(b"".join(lines))

    seen = replays(monkeypatch)
    summaries = {s.run_id: s for s in RunStore(runs_dir).summaries()}
    assert sorted(seen) == sorted([ids["capped"], ids["failed"]])  # only the stale rows
    assert summaries[run_id].status == "completed" and summaries[run_id].turns == 7
    assert summaries[run_id].answer == "done after all"
    assert summaries[ids["failed"]].error == "edited after indexing"
    rows = RunIndex(runs_dir).all()
    assert rows[run_id].key == journal_key(store, run_id) and rows[run_id].status == "completed"
    seen.clear()
    RunStore(runs_dir).summaries()
    assert seen == []  # repaired once, for every reader after

    # A run directory that is gone loses its row; one the index never heard of gains one.
    for path in store.run_dir(ids["completed"]).iterdir():
        path.unlink()
    store.run_dir(ids["completed"]).rmdir()
    unindexed = RunState(run_id="made-elsewhere", model="plan", messages=[{"role": "user", "content": "hi"}])
    RunStore(runs_dir / "elsewhere").create(unindexed)
    os.rename(runs_dir / "elsewhere" / "made-elsewhere", runs_dir / "made-elsewhere")
    listed = {s.run_id for s in RunStore(runs_dir).summaries()}
    assert ids["completed"] not in listed and "made-elsewhere" in listed
    assert set(RunIndex(runs_dir).all()) == listed


def test_a_crashed_run_is_listed_as_it_was_saved_and_again_once_resumed(tmp_path: Path):
    where = place(tmp_path)
    crashed = crashing("after_save:2", "run", "plan", "--run-id", "c", *where)
    assert crashed.returncode == 86, crashed.stderr
    store = RunStore(tmp_path / "runs")
    [listed] = store.summaries()
    assert said(listed) == expected(store.load("c")) and listed.liveness == "orphaned"
    assert tether("resume", "c", *where).returncode == 0
    [listed] = RunStore(tmp_path / "runs").summaries()
    assert said(listed) == expected(store.load("c")) and listed.status == "completed" and listed.liveness is None


def _damage_schema(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE runs")
        db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, something TEXT)")


@pytest.mark.parametrize("damage", [
    pytest.param(lambda p: [Path(f"{p}{s}").unlink(missing_ok=True) for s in ("", "-wal", "-shm")], id="deleted"),
    pytest.param(lambda p: p.write_bytes(b"this is not a database at all\n" * 300), id="garbage"),
    pytest.param(lambda p: p.write_bytes(p.read_bytes()[:len(p.read_bytes()) // 2]), id="truncated"),
    pytest.param(_damage_schema, id="another-schema"),
])
async def test_a_lost_or_damaged_index_is_rebuilt_from_the_journals(runs_dir: Path, workspace: Path, damage):
    async with Harness(runs_dir, workspace, agent_sets=(DEMO,)) as harness:
        ids = await _some_runs(harness)
        harness.store.index.close()
    store = RunStore(runs_dir)
    before = [said(s) for s in store.summaries()]
    store.index.close()
    assert len(before) == len(ids)
    damage(runs_dir / INDEX_FILE)

    after = RunStore(runs_dir).summaries()
    assert [said(s) for s in after] == before
    rows = RunIndex(runs_dir).all()
    assert set(rows) == set(ids.values())
    with sqlite3.connect(runs_dir / INDEX_FILE) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    listing = tether("runs", "--runs-dir", str(runs_dir))
    assert listing.returncode == 0 and len(listing.stdout.splitlines()) == len(ids), listing.stderr


async def test_an_unusable_index_falls_back_to_the_journals(harness: Harness, runs_dir: Path):
    ids = await _some_runs(harness)
    (runs_dir / INDEX_FILE).unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{runs_dir / INDEX_FILE}{suffix}").unlink(missing_ok=True)
    (runs_dir / INDEX_FILE).mkdir()  # not a file sqlite can open
    store = RunStore(runs_dir)
    assert {s.run_id for s in store.summaries()} == set(ids.values())


def test_a_journal_that_cannot_be_read_is_reported_not_listed(tmp_path: Path):
    store = RunStore(tmp_path / "runs")
    store.create(RunState(run_id="good", model="plan", messages=[{"role": "user", "content": "hi"}]))
    (tmp_path / "runs" / "bad").mkdir()
    (tmp_path / "runs" / "bad" / JOURNAL_FILE).write_bytes(b"{not json\n")
    problems: dict[str, str] = {}
    assert [s.run_id for s in store.summaries(problems=problems)] == ["good"]
    assert "corrupt journal" in problems["bad"]
    listing = tether("runs", "--runs-dir", str(tmp_path / "runs"))
    assert "skipped bad: corrupt journal" in listing.stderr and listing.stdout.startswith("good")


def test_no_runs_dir_lists_nothing_and_creates_nothing(tmp_path: Path):
    assert RunStore(tmp_path / "nowhere").summaries() == []
    assert not (tmp_path / "nowhere").exists()
    assert "no runs in" in tether("runs", "--runs-dir", str(tmp_path / "nowhere")).stdout


# ---- owners ---------------------------------------------------------------------------------

def test_owner_json_is_written_on_acquire_and_removed_on_release(tmp_path: Path):
    store = RunStore(tmp_path / "runs")
    store.create(RunState(run_id="r", model="plan", messages=[{"role": "user", "content": "hi"}]))
    directory = store.run_dir("r")
    assert store.owner("r") is None
    assert sorted(p.name for p in directory.iterdir()) == [JOURNAL_FILE]  # probing made nothing

    state, handle = store.open("r", control="\0somewhere")
    try:
        record = owner_record(store, "r")
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
        assert record["user"] and record["command"] and record["control"] == "\0somewhere"
        assert record["since"] == record["heartbeat"] <= time.time()
        owner = store.owner("r")
        assert owner.alive and owner.pid == os.getpid() and owner.where == f"{os.getpid()}@{socket.gethostname()}"
        assert store.liveness("r") == "running"
        for _ in range(100):  # probing, even from the owner's own process, leaves the owner's lock alone
            assert lock_held(directory / JOURNAL_FILE)
        with pytest.raises(Exception, match="already being run by another process"):
            store.open("r")
        handle.save(state)  # the owner still saves through its lock
        handle.heartbeat()
        beat = owner_record(store, "r")
        assert beat["since"] == record["since"] and beat["heartbeat"] >= record["heartbeat"]
        assert sorted(p.name for p in directory.iterdir()) == [JOURNAL_FILE, OWNER_FILE]
    finally:
        handle.release()
    assert owner_record(store, "r") is None and store.owner("r") is None
    assert not lock_held(directory / JOURNAL_FILE)
    assert store.liveness("r") == "orphaned"  # saved as running, and nobody holds it
    again, other = store.open("r")
    other.release()
    assert not lock_held(tmp_path / "runs" / "missing" / JOURNAL_FILE)
    assert not (tmp_path / "runs" / "missing").exists()


def test_a_record_left_by_a_dead_process_does_not_make_a_run_alive(tmp_path: Path, pid_of_a_dead_process: int):
    store = RunStore(tmp_path / "runs")
    store.create(RunState(run_id="r", model="plan", messages=[{"role": "user", "content": "hi"}]))
    (store.run_dir("r") / OWNER_FILE).write_text(json.dumps(
        {"pid": pid_of_a_dead_process, "host": socket.gethostname(), "user": "x", "since": 1.0, "heartbeat": 1.0,
         "command": "tether run"}))
    owner = store.owner("r")
    assert owner is not None and not owner.alive and owner.pid == pid_of_a_dead_process
    summary = store.summaries()[0]
    assert summary.liveness == "orphaned" and summary.owner.pid == pid_of_a_dead_process
    state, handle = store.open("r")  # adopting it replaces the record
    try:
        assert owner_record(store, "r")["pid"] == os.getpid() and store.owner("r").alive
    finally:
        handle.release()


def test_a_sigkilled_owner_leaves_an_orphan_that_resume_adopts(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "provider", "--port", str(port),
                                 "--latency-ms", "200"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    where = place(tmp_path)
    store = RunStore(tmp_path / "runs")
    trace = tmp_path / "runs" / "victim" / TRACE_FILE
    try:
        def listening() -> bool:
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0
        wait_until(listening, "the provider to listen", 60.0)
        victim = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "runaway", "--run-id", "victim",
                                   "--base-url", f"http://127.0.0.1:{port}/v1", "--latency-ms", "200",
                                   "--max-turns", "400", "--json", *where],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: any(r["kind"] == "turn" for r in read_trace(trace)), "the victim's first turn", 60.0)
            live = json.loads(tether("runs", "--live", "--json", *where).stdout)
            assert [(r["run_id"], r["liveness"], r["owner"]["pid"]) for r in live] == [("victim", "running", victim.pid)]
            assert f"owner: {victim.pid}@" in tether("show", "victim", *where).stdout
        finally:
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()
        assert victim.returncode == -signal.SIGKILL

        # Its owner.json is still there, naming a process that is gone: the run is orphaned.
        left = owner_record(store, "victim")
        assert left["pid"] == victim.pid
        with pytest.raises(ProcessLookupError):
            os.kill(left["pid"], 0)
        assert not store.owner("victim").alive
        listed = json.loads(tether("runs", "--json", *where).stdout)
        assert [(r["status"], r["liveness"]) for r in listed] == [("running", "orphaned")]
        text = tether("runs", *where).stdout
        assert text.split()[1] == "orphaned" and "tether resume victim adopts it" in text
        assert "orphaned: no process holds it" in tether("show", "victim", *where).stdout

        # Adoption is the resume: the new process takes the lock and says so in owner.json.
        turns = store.load("victim").turns
        resume = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "resume", "victim",
                                   "--max-turns", str(turns + 3), "--json", *where],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: (owner_record(store, "victim") or {}).get("pid") == resume.pid,
                       "the resuming process to write owner.json", 60.0)
            assert store.owner("victim").alive and store.liveness("victim") == "running"
            out, err = resume.communicate(timeout=120)
        finally:
            if resume.poll() is None:
                resume.kill()
                resume.wait()
    finally:
        provider.terminate()
        provider.wait()
    assert resume.returncode == 3, err
    final = json.loads(out)
    assert final["status"] == "max_turns_exceeded" and final["turns"] == turns + 3
    assert owner_record(store, "victim") is None
    summary = RunStore(tmp_path / "runs").summaries()[0]
    assert summary.status == "max_turns_exceeded" and summary.liveness is None and summary.turns == turns + 3


async def test_runs_live_lists_the_running_and_the_waiting_only(harness: Harness, runs_dir: Path):
    ids = await _some_runs(harness)
    held = harness.new_run("runaway").run_id
    state, handle = harness.store.open(held)  # this process runs it, as far as anyone can tell
    try:
        live = json.loads(tether("runs", "--live", "--json", "--runs-dir", str(runs_dir)).stdout)
        text = tether("runs", "--live", "--runs-dir", str(runs_dir)).stdout
    finally:
        handle.release()
    assert {r["run_id"]: r["liveness"] for r in live} == {ids["waiting"]: None, ids["never_started"]: "orphaned",
                                                          held: "running"}
    assert next(r for r in live if r["run_id"] == held)["owner"]["pid"] == os.getpid()
    lines = {line.split()[0]: line for line in text.splitlines()}
    assert set(lines) == {ids["waiting"], ids["never_started"], held}
    assert lines[held].split()[1] == "running" and f"{os.getpid()}@{socket.gethostname()} since" in lines[held]
    assert lines[ids["never_started"]].split()[1] == "orphaned"
    assert lines[ids["waiting"]].split()[1] == "interrupted"
    assert {s.run_id for s in RunStore(runs_dir).summaries(live_only=True)} == set(lines)


# ---- several writers ---------------------------------------------------------------------------

WRITER = """
import sys
from tether.vocab.state import RunState, Status
from tether.store.files.store import RunStore
store, name = RunStore(sys.argv[1]), sys.argv[2]
for i in range(40):
    run_id = f"{name}-{i}"
    store.create(RunState(run_id=run_id, model="plan", messages=[{"role": "user", "content": run_id}]))
    state, handle = store.open(run_id)
    try:
        for turn in range(1, 4):
            state.turns = turn
            state.messages.append({"role": "assistant", "content": f"turn {turn}"})
            handle.save(state)
        state.status = Status.COMPLETED
        handle.save(state)
    finally:
        handle.release()
"""


def test_concurrent_writers_do_not_corrupt_the_index(tmp_path: Path):
    runs = tmp_path / "runs"
    where = place(tmp_path)
    # Two real runs at once, beside four processes that create and finish runs as fast as they can.
    cli = [subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "runaway", "--run-id", f"cli-{n}",
                             "--latency-ms", "5", "--max-turns", "30", "--json", *where],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for n in range(2)]
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(runs), f"w{n}"], stderr=subprocess.PIPE, text=True)
               for n in range(4)]
    readers_saw = []
    while any(p.poll() is None for p in cli + writers):
        readers_saw.append(len(RunStore(runs).summaries()))
    for p in writers:
        assert p.wait() == 0, p.stderr.read()
    for p in cli:
        assert p.wait() == 3, p.stderr.read()  # the turn cap: both ran to the end

    with sqlite3.connect(runs / INDEX_FILE) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = RunStore(runs)
    rows = store.index.all()
    assert len(rows) == 2 + 4 * 40
    # Every owner's last row landed, with its journal's identity: nothing left to replay.
    assert all(row.key == journal_key(store, run_id) for run_id, row in rows.items())
    summaries = store.summaries()
    assert sorted({s.status for s in summaries}) == ["completed", "max_turns_exceeded"]
    assert all(s.turns == 30 for s in summaries if s.run_id.startswith("cli-"))
    assert readers_saw == sorted(readers_saw)  # a reader never lost a run another process had listed
