"""Approvals across processes (issue 25), on both stores: a rule added from a second process
decides the call a first one waits on; a rule and a person deciding at once make one
decision, recorded once; an edited approval from another process. Two people, each an
account of their own, are tests/processes/test_people.py's.

Each run that waits is a real ``tether`` process. The commands that decide beside it run
by the CLI's own main in the test's process (tests/support.py, cli_here): a second
process to the run's, without a start-up each; the race of a rule and a person keeps one
real ``tether approve`` process against it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.approvals import DecisionQuery
from tether.demo.provider import scenarios
from tether.store.spec import open_store
from tests.processes.test_control import CAP_S, spawn, tether
from tests.support import cli_here_async, exited


class Where:
    """A store (the file store in a temp dir, or the session's PostgreSQL) and a workspace."""

    def __init__(self, store_args: list[str], ws: Path) -> None:
        self.store_args = store_args
        self.ws = ws
        self._store = None

    @property
    def args(self) -> list[str]:
        return [*self.store_args, "--workspace", str(self.ws)]

    def store(self):
        if self._store is None:  # one store (one pool of connections) for the whole test
            self._store = open_store(self.store_args[1])
        return self._store

    def close(self) -> None:
        close = getattr(self._store, "close", None)
        if callable(close):
            close()

    async def waiting(self, run_id: str) -> None:
        """Until the run's call waits for a decision, as any console would see it on the store."""
        async def scan() -> None:
            while True:
                try:
                    if self.store().summary(run_id).waiting or _waits_running(self.store(), run_id):
                        return
                except Exception:  # not made yet
                    pass
                await asyncio.sleep(0.05)
        await asyncio.wait_for(scan(), CAP_S)


def _waits_running(store, run_id: str) -> bool:
    from tether.vocab.state import NeedsApproval

    return isinstance(store.load(run_id).interruption, NeedsApproval)


async def decide(*args: str) -> tuple[int, str, str]:
    """``tether ARGS`` from this process, beside the run's: exit code, stdout, stderr."""
    done = await asyncio.wait_for(cli_here_async(*args), CAP_S)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(params=["files", "postgres"])
def where(request, tmp_path: Path) -> Iterator[Where]:
    if request.param == "files":
        place = Where(["--store", str(tmp_path / "runs")], tmp_path / "ws")
    else:
        request.getfixturevalue("pg")  # empties the store first
        place = Where(["--store", request.getfixturevalue("pg_url")], tmp_path / "ws")
    yield place
    place.close()


async def test_a_rule_added_from_a_second_process_decides_the_waiting_call(where: Where):
    run = await spawn("run", "destructive", "--run-id", "r1", "--wait-for-decision", "--json", *where.args)
    try:
        await where.waiting("r1")
        code, out, err = await decide("rules", "add", "--allow", "delete_file", "--where", "path=*.log",
                                      "--reason", "scratch logs", "--as", "alice", *where.store_args)
        assert code == 0, err
        assert "R1" in out and "r1" in out
    finally:
        code, out, err = await exited(run, CAP_S)
    assert code == 0, err
    assert json.loads(out)["answer"] == scenarios.DESTRUCTIVE_DELETED
    state = where.store().load("r1")
    (decision,) = state.approvals.values()
    assert (decision.verdict, decision.by, decision.rule) == ("approved", "rule R1", "R1")
    assert not (where.ws / "access.log").exists()


async def test_a_rule_and_a_person_deciding_at_once_make_one_decision(where: Where):
    run = await spawn("run", "destructive", "--run-id", "r2", "--wait-for-decision", "--json", *where.args)
    try:
        await where.waiting("r2")
        ruled, person = await asyncio.gather(
            decide("rules", "add", "--deny", "delete_file", "--reason", "keep logs", "--as", "bob", *where.store_args),
            tether("approve", "r2", "--as", "carol", *where.store_args))  # a real process
    finally:
        code, out, err = await exited(run, CAP_S)
    assert code == 0, err
    assert ruled[0] == 0, ruled  # the rule is kept either way
    state = where.store().load("r2")
    assert len(state.approvals) == 1
    (decision,) = state.approvals.values()
    assert decision.by in ("rule R1", "carol")
    records = where.store().decisions(DecisionQuery())
    assert len([r for r in records if r.run_id == "r2"]) == 1
    if decision.by == "rule R1":
        assert "already decided" in person[1] + person[2], person
    else:  # carol first: the rule came to the call while she decided it, or after (then nothing waited)
        said = ruled[1] + ruled[2]
        assert "already decided" in said or " in r2" not in said, said


async def test_an_edited_approval_from_another_process_runs_with_the_new_arguments(where: Where):
    run = await spawn("run", "destructive", "--run-id", "r3", "--wait-for-decision", "--json", *where.args)
    try:
        await where.waiting("r3")
        code, out, err = await decide("approve", "r3", "--args", '{"path": 3}', "--as", "dan", *where.store_args)
        assert code != 0 and "do not fit delete_file" in out + err, (out, err)  # refused, nothing consumed
        code, _, err = await decide("approve", "r3", "--args", "{not json", *where.store_args)
        assert code == 2 and "JSON" in err, err
        code, out, err = await decide("approve", "r3", "--args", '{"path": "errors.log"}', "--as", "dan",
                                      *where.store_args)
        assert code == 0, err
    finally:
        code, out, err = await exited(run, CAP_S)
    assert code == 0, err
    assert (where.ws / "access.log").exists() and not (where.ws / "errors.log").exists()
    (decision,) = where.store().load("r3").approvals.values()
    assert json.loads(decision.args) == {"path": "errors.log"} and decision.by == "dan"


# ---- deadlines and Stop (issue 37, items 1, 7 and 8) ------------------------------------------

async def past_its_deadline(where: Where, run_id: str):
    """Until the clock is past the deadline of the call ``run_id`` waits on (no process holds
    it, so nobody has applied the deadline yet); the call as it waits."""
    from tether.vocab.state import NeedsApproval

    waiting = where.store().load(run_id).interruption
    assert isinstance(waiting, NeedsApproval) and waiting.deadline_at is not None, waiting
    while time.time() <= waiting.deadline_at:
        await asyncio.sleep(waiting.deadline_at - time.time() + 0.01)
    return waiting


@pytest.mark.parametrize("on_deadline, did", [("stop", "the run was stopped"), ("reject", "no decision within 1 s")])
async def test_an_approval_after_the_deadline_is_refused_in_words_and_the_deadline_decides(
        where: Where, on_deadline: str, did: str):
    """Issue 37, items 1 and 7: ``tether approve`` after the deadline of a run nobody holds
    ran the call. Now the deadline decides (never an approval), the late decider is told so
    in words, and the deadline's decision is on the record, a stopped run's too."""
    from tether.vocab.state import Cancelled, Status

    code, _, err = await decide("run", "destructive", "--run-id", "dl", "--decision-deadline", "1s",
                                "--on-deadline", on_deadline, *where.args)
    assert code == 5, err  # waiting for approval, and no process holds it
    waiting = await past_its_deadline(where, "dl")
    code, out, err = await tether("approve", "dl", "--as", "carol", *where.store_args)  # a real process
    assert code == 2, (out, err)
    assert "too late: the decision deadline of delete_file (call_1_0) had passed" in err and did in err, err
    assert "this decision was not taken" in err and "tether resume dl goes on" in err
    assert (where.ws / "access.log").exists()  # never approved
    state = where.store().load("dl")
    assert state.status is Status.INTERRUPTED and isinstance(state.interruption, Cancelled)
    assert state.interruption.by == "deadline"
    (decision,) = state.approvals.values()
    assert (decision.verdict, decision.by, decision.tool) == ("rejected", "deadline", "delete_file")
    code, out, err = await decide("decisions", "--json", *where.store_args)
    assert code == 0, err
    (record,) = json.loads(out)
    assert (record["verdict"], record["by"], record["run_id"]) == ("rejected", "deadline", "dl")
    assert record["waited_s"] == pytest.approx(waiting.deadline_at - waiting.asked_at, abs=0.01)  # its deadline
    assert "within 1 s" in record["words"]
    code, out, err = await decide("reject", "dl", "--as", "carol", *where.store_args)  # and again: the same words
    assert code == 2 and "too late: the decision deadline of delete_file (call_1_0) had passed" in err, err


async def test_a_stop_ends_a_run_whose_process_waits_for_a_decision_and_closes_its_call(where: Where):
    """Issue 37, item 8: a Stop released the waiting process but left the call waiting. A
    Stop ends the run; its call is declined in words, on the record as the stopper's."""
    from tether.vocab.state import Cancelled, NeedsApproval, Status

    run = await spawn("run", "destructive", "--run-id", "s1", "--wait-for-decision", "--json", *where.args)
    try:
        await where.waiting("s1")
        code, out, err = await tether("stop", "s1", "--as", "dan", "--reason", "not tonight", *where.store_args)
        assert code == 0, (out, err)
        assert "run s1 stops now" in out and "delete_file (call_1_0), which waited for a decision, is declined" in out
    finally:
        code, out, err = await exited(run, CAP_S)
    assert code == 5, err
    assert json.loads(out)["status"] == "interrupted"
    state = where.store().load("s1")
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled("not tonight", "dan")
    assert not isinstance(state.interruption, NeedsApproval)
    (decision,) = state.approvals.values()
    assert (decision.verdict, decision.by) == ("rejected", "dan")
    closed = [m["content"] for m in state.messages if m.get("role") == "tool" and m.get("tool_call_id") == "call_1_0"]
    assert closed == ["The operator dan declined this call: the run was stopped (not tonight). Nothing was done."]
    assert (where.ws / "access.log").exists()
    code, out, err = await decide("decisions", *where.store_args)
    assert code == 0 and "s1" in out and "rejected" in out and "dan" in out, (out, err)
    code, out, err = await decide("show", "s1", *where.store_args)
    assert code == 0 and "the run was stopped (not tonight)" in out, (out, err)
    code, out, err = await decide("approve", "s1", *where.store_args)
    assert code == 2 and "it was stopped (not tonight, by dan)" in err, err
