"""Stop and decisions from any process: ``tether stop``, ``--wait-for-decision``, orphans.

Every run that is stopped or waits here is a real ``tether`` process; the test drives it
from other processes, the way an operator in a second terminal would. The runs that only
set a scene, and the commands that follow a first real one, run by the CLI's own main in
the test's process (tests/support.py, cli_here): the same words, no start-up each.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from tether.demo.provider import scenarios
from tether.vocab.state import Cancelled, NeedsApproval, Status
from tether.store.files.store import RunStore
from tether.store.trace import read_trace
from tether.demo.agents import DEMO

from tests.support import cli_here_async, exited

CAP_S = 60.0


class Place:
    def __init__(self, tmp: Path) -> None:
        self.runs = tmp / "runs"
        self.ws = tmp / "ws"

    @property
    def args(self) -> list[str]:
        return ["--runs-dir", str(self.runs), "--workspace", str(self.ws)]

    def trace(self, run_id: str) -> list[dict]:
        return list(read_trace(self.runs / run_id / "trace.jsonl"))

    async def until(self, run_id: str, predicate, what: str) -> None:
        """Wait for a trace line that satisfies ``predicate`` (a generous cap fails the test)."""
        async def scan() -> None:
            while not any(predicate(r) for r in self.trace(run_id)):
                await asyncio.sleep(0.02)
        try:
            await asyncio.wait_for(scan(), CAP_S)
        except TimeoutError:
            raise AssertionError(f"never saw {what} in {run_id}'s trace") from None


async def spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def tether(*args: str) -> tuple[int, str, str]:
    proc = await spawn(*args)
    out, err = await asyncio.wait_for(proc.communicate(), CAP_S)
    return proc.returncode or 0, out.decode(), err.decode()


async def here(*args: str) -> tuple[int, str, str]:
    """``tether ARGS`` by the CLI's main in this process: exit code, stdout, stderr."""
    done = await asyncio.wait_for(cli_here_async(*args), CAP_S)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return Place(tmp_path)


async def test_stop_from_another_process_reaches_inside_scan_archive(place: Place):
    run = await spawn("run", "slow", "--run-id", "s1", "--json", *place.args)
    try:
        await place.until("s1", lambda r: r["kind"] == "tool_progress", "scan_archive's progress")
        code, out, err = await tether("stop", "s1", "--reason", "enough scanning", "--as", "alice", *place.args)
        assert code == 0, err
        assert "s1 stops now" in out
    finally:
        code, out, err = await exited(run, CAP_S)
    assert code == 5, err
    summary = json.loads(out)
    assert summary["interruption"] == {"type": "cancelled", "reason": "enough scanning", "by": "alice"}
    state = RunStore(place.runs).load("s1")
    assert state.interruption == Cancelled("enough scanning", "alice")
    cut = state.messages[-1]["content"]
    assert cut.startswith("cancelled by the operator after") and "the scan_archive call did not finish" in cut
    stopped = [r for r in place.trace("s1") if r["kind"] == "run_stopped"]
    assert stopped[-1]["reason"] == "enough scanning (by alice)"


async def test_bad_stop_requests_get_a_clear_answer_and_change_nothing(place: Place):
    code, _, err = await tether("stop", "nope", *place.args)
    assert code == 2 and "no run nope" in err
    assert (await here("run", "plan", "--run-id", "done", *place.args))[0] == 0
    code, _, err = await here("stop", "done", *place.args)
    assert code == 2 and "nothing to stop: run done has already stopped (completed)" in err
    assert (await here("run", "destructive", "--run-id", "w", *place.args))[0] == 5
    before = (place.runs / "w" / "journal.jsonl").read_bytes()
    code, _, err = await here("stop", "w", *place.args)
    assert code == 2
    assert "waiting for approval of delete_file and no process is running it" in err
    assert "tether reject w --reason TEXT" in err
    assert (place.runs / "w" / "journal.jsonl").read_bytes() == before
    assert not (place.runs / "w" / "control.jsonl").exists()


async def test_a_stop_for_an_orphan_is_kept_and_adoption_sees_it(place: Place):
    run = await spawn("run", "runaway", "--run-id", "o1", "--latency-ms", "200", "--max-turns", "50", *place.args)
    try:
        await place.until("o1", lambda r: r["kind"] == "turn", "a turn")
        run.send_signal(signal.SIGKILL)
        await run.wait()
    finally:
        if run.returncode is None:
            run.kill()
    store = RunStore(place.runs)
    assert store.load("o1").status is Status.RUNNING and not store.owner("o1").alive
    code, _, err = await tether("stop", "o1", "--reason", "it was looping", "--as", "carol", *place.args)
    assert code == 1, err
    assert "orphaned" in err and "recorded" in err and "tether resume o1" in err
    code, out, err = await here("resume", "o1", "--json", *place.args)
    assert code == 5, err
    assert json.loads(out)["interruption"] == {"type": "cancelled", "reason": "it was looping", "by": "carol"}


async def test_wait_for_decision_is_approved_from_a_second_process(place: Place):
    run = await spawn("run", "destructive", "--run-id", "d1", "--wait-for-decision", "--json", *place.args)
    try:
        await place.until("d1", lambda r: r["kind"] == "approval_required", "the approval")
        assert isinstance(RunStore(place.runs).load("d1").interruption, NeedsApproval)
        code, out, err = await tether("approve", "d1", "--note", "disk is full", "--as", "bob", *place.args)
        assert code == 0, err
        assert "approved delete_file" in out and "goes on" in out
    finally:
        code, out, err = await exited(run, CAP_S)
    assert code == 0, err
    assert json.loads(out)["answer"] == scenarios.DESTRUCTIVE_DELETED
    state = RunStore(place.runs).load("d1")
    assert [(d.verdict, d.by, d.used) for d in state.approvals.values()] == [("approved", "bob", True)]
    assert "Approved by the operator bob (disk is full)." in state.messages[-2]["content"]
    decided = [r for r in place.trace("d1") if r["kind"] == "approval_decision"]
    assert [(d["verdict"], d["by"]) for d in decided] == [("approved", "bob")]
    assert not (place.ws / "access.log").exists()


async def test_two_deciders_at_once_make_one_decision_and_the_other_is_told(place: Place):
    run = await spawn("run", "destructive", "--run-id", "d2", "--wait-for-decision", *place.args)
    try:
        await place.until("d2", lambda r: r["kind"] == "approval_required", "the approval")
        first, second = await asyncio.gather(
            tether("reject", "d2", "--reason", "keep it", "--as", "erin", *place.args),
            tether("approve", "d2", "--as", "frank", *place.args))
    finally:
        await exited(run, CAP_S)
    codes = sorted([first[0], second[0]])
    assert codes == [0, 2], (first, second)
    loser = first if first[0] == 2 else second
    assert "already decided" in loser[2]
    state = RunStore(place.runs).load("d2")
    assert len(state.approvals) == 1
    (decision,) = state.approvals.values()
    assert decision.by in ("erin", "frank")
    assert len([r for r in place.trace("d2") if r["kind"] == "approval_decision"]) == 1


async def test_without_a_decision_in_time_the_run_stays_waiting(place: Place):
    code, out, err = await here("run", "destructive", "--run-id", "d3", "--wait-for-decision",
                                "--decision-timeout", "0.3", "--json", *place.args)
    assert code == 5, err
    assert json.loads(out)["interruption"]["type"] == "approval"
    # Nobody holds it now: the usual path decides it.
    code, out, err = await here("reject", "d3", "--reason", "no", "--json", *place.args)
    assert code == 0 and json.loads(out)["answer"] == scenarios.DESTRUCTIVE_DECLINED


async def test_a_decision_taken_just_before_its_process_let_go_is_reported_as_made(tmp_path, monkeypatch):
    """The race the two-decider test can hit: the waiting process takes our decision, finishes
    the run and lets go before our poke reaches it. The decision was ours: say so (exit 0),
    and a different one is told it came too late."""
    from tether.harness import Harness
    from tether.store import control, operate, unix
    from tether.store.owner import Owner

    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as h:
        run_id = h.new_run("destructive").run_id
        await h.run(run_id)
        await h.reject(run_id, "keep it", by="erin")
    store = RunStore(tmp_path / "runs")
    looks = iter([Owner(pid=1, host="h", control="\0nobody", alive=True)])
    monkeypatch.setattr(store, "owner", lambda rid: next(looks, None))  # alive at the look, gone at the poke

    async def gone(*args, **kwargs):
        return control.ControlReply(False, "this process no longer runs it", gone=True)

    monkeypatch.setattr(unix, "deliver", gone)
    mine = await operate.request(store, run_id, control.ControlRequest("reject", "keep it", by="erin"))
    assert mine.ok and "rejected by erin" in mine.words
    looks = iter([Owner(pid=1, host="h", control="\0nobody", alive=True)])
    other = await operate.request(store, run_id, control.ControlRequest("approve", "", by="frank"))
    assert not other.ok and other.words.startswith("already decided: rejected by erin")
