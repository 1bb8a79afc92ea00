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
    from tether.run.state import NeedsApproval

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
    loser_said = ruled[1] + ruled[2] if decision.by == "carol" else person[1] + person[2]
    assert "already decided" in loser_said


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
