"""One contract, two stores: every test here runs against the file store and PostgreSQL.

What a run store promises the harness (tether.store.protocol): the five exits recorded and
read back; an approval bound to its call's argument hash and used once; a write's
intent and ledger entry committed with the step that records them, so a crash anywhere
in a write never does it twice; trace order by ``seq`` across processes; secrets never
stored; one owner per run; a dead owner's run orphaned at once, and adoptable.

The PostgreSQL side uses the session's own server (tests/pg.py); without PostgreSQL's
binaries it is skipped here and fails in CI.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.models.client import ModelClient
from tether.store.control import ControlRequest
from tether.vocab.events import ProviderRetry, RunStarted, ToolResult
from tether.harness import Harness
from tether.approvals.decisions import approve
from tether.store.protocol import Handle, Store
from tether.vocab.state import (Limits, NeedsApproval, RunExists, RunState, RunWorkspace, StateError, Status, args_hash,
                                pending_calls)
from tether.store.spec import open_store
from tether.demo.agents import DEMO
from tests.endpoints import completion, turns
from tests.support import TABLES, wait_until

SECRET = "sk-contract-SECRET-0123456789abcdef"


@dataclass
class Kit:
    """A store, and what a test needs of it that no Store call says: made by the fixture that
    knows which store it is, so that the tests speak to the store through the protocol alone."""

    store: Store
    stored_bytes: Callable[[], str]
    """Everything the store keeps, as text: every file, or every row of every table."""
    clear_approvals: Callable[[], None]
    """No rules and no decisions (PostgreSQL's are the session's server's)."""
    ledger_commits_with_save: bool
    """A ledger result is committed with the save that records it (PostgreSQL), not at once."""


@pytest.fixture(params=["file", "postgresql"])
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kit]:
    if request.param == "file":
        runs = tmp_path / "runs"
        yield Kit(open_store(runs), lambda: "\n".join(p.read_bytes().decode(errors="replace")
                                                      for p in runs.rglob("*") if p.is_file()),
                  lambda: None, False)
        return
    from tether.store.postgres.store import PgStore

    pg = PgStore(request.getfixturevalue("pg_url"))
    with pg._conn() as conn:  # a clean slate: the server is the session's, the tables the test's
        conn.execute(pg.q("TRUNCATE " + ", ".join(f"{{s}}.{t}" for t in TABLES)))

    def stored_bytes() -> str:
        with pg._conn() as conn:
            return "\n".join(row[0] for t in TABLES for row in conn.execute(pg.q(f"SELECT x::text FROM {{s}}.{t} x")))

    def clear_approvals() -> None:
        with pg._conn() as conn:
            conn.execute(pg.q("TRUNCATE {s}.rules, {s}.decisions"))

    try:
        yield Kit(pg, stored_bytes, clear_approvals, True)
    finally:
        pg.close()


@pytest.fixture
def store(kit: Kit) -> Store:
    return kit.store


def new_state(run_id: str, *messages: dict[str, Any]) -> RunState:
    return RunState(run_id=run_id, model="plan", messages=[{"role": "system", "content": "s"},
                                                           {"role": "user", "content": "q"}, *messages])


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


# ---- the five exits -------------------------------------------------------------------

async def test_the_five_exits_are_recorded_and_read_back(store: Store, tmp_path: Path):
    cases = {
        "completed": ("plan", None),
        "max_turns_exceeded": ("runaway", Limits(max_turns=2)),
        "budget_exceeded": ("runaway", Limits(max_turns=None, budget_usd=0.002)),
        "interrupted": ("destructive", None),
        "failed": ("forbidden", None),
    }
    ran: dict[str, RunState] = {}
    async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as harness:
        for status, (scenario, limits) in cases.items():
            state = harness.new_run(scenario, limits=limits)
            ran[status] = (await harness.run(state.run_id)).state
    for status, state in ran.items():
        assert state.status.value == status
        loaded = store.load(state.run_id)
        assert loaded.status.value == status
        assert loaded.messages == state.messages and loaded.turns == state.turns
        assert loaded.cost_usd == pytest.approx(state.cost_usd)
        assert (loaded.interruption is None) == (state.interruption is None)
        last = list(store.read_trace(state.run_id))[-1]
        assert last["kind"] == "run_stopped" and last["status"] == status
    assert isinstance(store.load(ran["interrupted"].run_id).interruption, NeedsApproval)
    listed = {s.run_id: s for s in store.summaries()}
    assert {listed[s.run_id].status for s in ran.values()} == set(cases)
    assert all(listed[s.run_id].liveness is None for s in ran.values())  # none is running
    assert [s.run_id for s in store.summaries(live_only=True)] == [ran["interrupted"].run_id]
    assert listed[ran["completed"].run_id].answer == ran["completed"].answer


# ---- approvals ----------------------------------------------------------------------------

async def test_an_approval_is_bound_to_the_argument_hash_and_used_once(store: Store, tmp_path: Path):
    async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as harness:
        waiting = (await harness.run(harness.new_run("destructive").run_id)).state
        call = waiting.interruption
        assert isinstance(call, NeedsApproval)

        # Approved in one process and saved; read back by another, before it is used.
        state, handle = store.open(waiting.run_id)
        approve(state, call.call_id, "fine", "alice")
        handle.save(state)
        handle.release()
        decision = store.load(waiting.run_id).approvals[call.call_id]
        assert (decision.verdict, decision.by, decision.used) == ("approved", "alice", False)
        assert decision.args_hash == args_hash(call.args) != args_hash('{"path": "somewhere/else"}')

        out = await harness.run(waiting.run_id)  # the approved call runs, once
        assert store.load(waiting.run_id).approvals[call.call_id].used
        with pytest.raises(StateError, match="already decided|already ended|not waiting"):
            await harness.approve(waiting.run_id, call_id=call.call_id)
    results = [m for m in out.state.messages if m.get("role") == "tool" and m.get("tool_call_id") == call.call_id]
    assert len(results) == 1 and results[0]["content"].startswith("Approved by the operator alice")


# ---- a write: its intent and ledger entry commit with the step ---------------------------------

CRASH_POINTS = ("after_intent", "after_begin", "after_effect", "after_complete", "after_record", None)


class Crashed(Exception):
    pass


def write_once(handle: Handle, state: RunState, effects: Path, crash_at: str | None) -> None:
    """What the loop and a write tool do for one call (tether.run.loop._execute, delete_file),
    with a crash (the process gone, nothing released) at ``crash_at``."""
    call_id = "call_w"
    key = f"{state.run_id}:{call_id}"

    def point(name: str) -> None:
        if name == crash_at:
            raise Crashed(name)

    if call_id not in state.intents:
        state.intents[call_id] = key
        handle.save(state)
    point("after_intent")
    ledger = handle.ledger()
    entry = ledger.lookup(key)
    if entry is not None and entry.status == "done":
        result = entry.result or ""
    elif entry is not None and effects.exists():  # begun, and the world says it happened
        result = "wrote it"
        ledger.complete(key, result)
    else:
        ledger.begin(key, {"file": effects.name})
        point("after_begin")
        with open(effects, "a") as f:
            f.write("x")
        point("after_effect")
        result = "wrote it"
        ledger.complete(key, result)
        point("after_complete")
    state.messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    state.intents.pop(call_id, None)
    handle.save(state)
    point("after_record")


@pytest.mark.parametrize("crash_at", CRASH_POINTS)
def test_a_write_is_done_once_whatever_the_crash_point(kit: Kit, tmp_path: Path, crash_at: str | None):
    store = kit.store
    effects = tmp_path / "effects.txt"
    store.create(new_state("w1", tool_call("call_w", "write", '{"file": "effects.txt"}')))
    state, handle = store.open("w1")
    try:
        write_once(handle, state, effects, crash_at)
        handle.release()
    except Crashed:
        handle.abandon()  # type: ignore[attr-defined]
    wait_until(lambda: store.liveness("w1") != "running", "the dead owner's lock is dropped")

    state, handle = store.open("w1")  # the next process adopts the run
    try:
        if crash_at == "after_complete" and kit.ledger_commits_with_save:
            # The result was recorded but the step that records it never committed: so
            # neither did the result. The intent, committed before the effect, is there.
            entry = handle.ledger().lookup("w1:call_w")
            assert entry is not None and entry.status == "begun"
        if pending_calls(state):
            write_once(handle, state, effects, None)
    finally:
        handle.release()

    final = store.load("w1")
    assert effects.read_text() == "x"  # done exactly once
    assert [m for m in final.messages if m.get("role") == "tool"] == [
        {"role": "tool", "tool_call_id": "call_w", "content": "wrote it"}]
    assert final.intents == {}
    state, handle = store.open("w1")
    try:
        entry = handle.ledger().lookup("w1:call_w")
    finally:
        handle.release()
    assert entry is not None and entry.status == "done" and entry.result == "wrote it"


def test_a_failed_save_leaves_the_previous_state(store: Store, tmp_path: Path):
    """A save is all or nothing: a crash before it leaves the last one whole."""
    store.create(new_state("s1"))
    state, handle = store.open("s1")
    state.messages.append({"role": "assistant", "content": "one"})
    state.turns = 1
    handle.save(state)
    state.messages.append({"role": "assistant", "content": "two"})
    state.turns = 2
    handle.abandon()  # type: ignore[attr-defined]  # dies before saving the second
    loaded = store.load("s1")
    assert loaded.turns == 1 and loaded.messages[-1]["content"] == "one" and len(loaded.messages) == 3



def test_a_change_made_in_place_inside_the_state_is_saved(store: Store):
    """The steps change some of the state in place (a merge's stage inside the run's
    workspace, a call's approvers, a run's intents): each save keeps what the state holds
    then, read back by a fresh load, however rarely that part changes."""
    state = new_state("inplace")
    state.run_workspace = RunWorkspace(kind="copy", source="/tmp/agent", stage="ready", path="/tmp/ws")
    state.run_workspace.merge = {"call_id": "merge_1", "stage": "asked"}
    store.create(state)
    state, handle = store.open("inplace")
    try:
        for stage in ("merging", "merged"):
            assert state.run_workspace is not None and state.run_workspace.merge is not None
            state.run_workspace.merge["stage"] = stage
            state.intents[f"call_{stage}"] = stage
            state.turns += 1
            handle.save(state)
            loaded = store.load("inplace")
            assert loaded.run_workspace is not None and loaded.run_workspace.merge is not None
            assert loaded.run_workspace.merge["stage"] == stage
            assert loaded.intents[f"call_{stage}"] == stage
        for step in range(2):  # a step that changes none of them: the last change stays
            state.turns += 1
            handle.save(state)
        loaded = store.load("inplace")
        assert loaded.run_workspace is not None and loaded.run_workspace.merge == {"call_id": "merge_1",
                                                                                    "stage": "merged"}
        assert loaded.turns == state.turns and len(loaded.intents) == 2
    finally:
        handle.release()


# ---- the trace ------------------------------------------------------------------------------

def test_trace_order_is_by_seq_across_two_processes(store: Store):
    store.create(new_state("t1"))
    for process in (1, 2):
        state, handle = store.open("t1")
        trace = handle.trace()
        trace.write(RunStarted(run_id="t1", model="plan", resumed=process > 1))
        for i in range(3):
            trace.write(ToolResult(run_id="t1", call_id=f"c{process}{i}", name="read_file", ms=1.0, ok=True))
        state.turns = process
        handle.save(state)
        trace.close()
        handle.release()
    records = list(store.read_trace("t1"))
    assert [r["seq"] for r in records] == list(range(1, 9))
    assert [r.get("call_id") for r in records if r["kind"] == "tool_result"] == ["c10", "c11", "c12", "c20", "c21", "c22"]
    assert [r["resumed"] for r in records if r["kind"] == "run_started"] == [False, True]


def test_events_traced_after_the_last_save_are_kept_on_release(store: Store):
    store.create(new_state("t2"))
    state, handle = store.open("t2")
    trace = handle.trace()
    trace.write(RunStarted(run_id="t2", model="plan", resumed=False))
    trace.close()
    handle.release()
    assert [r["kind"] for r in store.read_trace("t2")] == ["run_started"]


# ---- secrets -------------------------------------------------------------------------------

async def test_secrets_are_never_stored(kit: Kit, tmp_path: Path):
    store = kit.store
    """The API key rides in the Authorization header: echoed in an error body, in a retry
    notice, in the endpoint's URL, or in a traced event, it is in no stored byte or row."""
    attempts = {"n": 0}
    ok = turns(completion("done"))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        from starlette.responses import JSONResponse

        attempts["n"] += 1
        if scope["type"] == "http" and attempts["n"] == 1:
            response = JSONResponse({"error": {"message": f"upstream rejected key {SECRET}"}}, status_code=503)
            await response(scope, receive, send)
            return
        await ok(scope, receive, send)

    client = ModelClient("http://endpoint/v1", SECRET, transport=httpx.ASGITransport(app=app), backoff_base_s=0.001)
    async with Harness(workspace=tmp_path / "ws", store=store, client=client, api_key=SECRET,
                       base_url=f"http://user:{SECRET}@127.0.0.1:9/v1", agent_sets=(DEMO,)) as harness:
        out = await harness.run(harness.new_run("plan", "q").run_id)
        state, handle = await asyncio.to_thread(store.open, out.state.run_id)
        trace = handle.trace((SECRET,))
        trace.write(ProviderRetry(run_id=out.state.run_id, attempt=9, status=401, reason=f"Bearer {SECRET}",
                                  wait_s=0.0))
        await handle.asave(state)
        handle.release()
    assert out.state.status is Status.COMPLETED
    kinds = [r["kind"] for r in store.read_trace(out.state.run_id)]
    assert kinds.count("provider_retry") == 2
    stored = kit.stored_bytes()
    assert out.state.run_id in stored and "[redacted]" in stored
    assert SECRET not in stored


# ---- owners ----------------------------------------------------------------------------------

def test_two_owners_cannot_hold_one_run(store: Store):
    store.create(new_state("o1"))
    state, first = store.open("o1", control="here")
    try:
        with pytest.raises(StateError, match="already being run"):
            store.open("o1")
        owner = store.owner("o1")
        assert owner is not None and owner.alive and owner.control == "here"
        assert store.liveness("o1") == "running"
    finally:
        first.release()
    assert store.owner("o1") is None and store.liveness("o1") == "orphaned"  # saved as running, held by none
    _, second = store.open("o1")  # free again
    second.release()


def test_a_dead_owner_leaves_an_orphan_that_can_be_adopted(store: Store):
    store.create(new_state("o2"))
    state, handle = store.open("o2")
    state.turns = 1
    handle.save(state)
    pid = handle.owner["pid"]
    handle.abandon()  # type: ignore[attr-defined]  # killed: no release
    wait_until(lambda: store.liveness("o2") == "orphaned", "the run shows as orphaned")
    owner = store.owner("o2")
    assert owner is not None and not owner.alive and owner.pid == pid  # the dead owner's record, kept
    listed = {s.run_id: s for s in store.summaries(live_only=True)}
    assert listed["o2"].shown_status == "orphaned" and listed["o2"].owner.pid == pid

    state, adopter = store.open("o2")
    try:
        assert state.turns == 1 and store.liveness("o2") == "running" and store.owner("o2").alive
        state.turns = 2
        adopter.save(state)
    finally:
        adopter.release()
    assert store.load("o2").turns == 2


def test_the_control_channel_keeps_requests_in_order_for_the_owner(store: Store):
    store.create(new_state("c1"))
    store.control_append("c1", ControlRequest("stop", "enough", by="bob"))
    store.control_append("c1", ControlRequest("approve", "ok", call_id="x", by="alice"))
    assert [r.kind for r in store.control_read("c1", 0)] == ["stop", "approve"]
    state, handle = store.open("c1")
    try:
        unseen = handle.control_read(1)
        assert [(r.kind, r.by, r.call_id) for r in unseen] == [("approve", "alice", "x")]
    finally:
        handle.release()


def test_both_stores_implement_the_interface(store: Store):
    from tether.store.protocol import IdempotencyLedger, TraceSink

    assert isinstance(store, Store)
    store.create(new_state("i1"))
    _, handle = store.open("i1")
    try:
        assert isinstance(handle, Handle)
        assert isinstance(handle.trace(), TraceSink) and isinstance(handle.ledger(), IdempotencyLedger)
    finally:
        handle.release()


def test_a_new_run_is_created_whole_once(store: Store):
    state = new_state("n1")
    store.create(state)
    with pytest.raises(StateError, match="already exists"):
        store.create(new_state("n1"))
    assert store.exists("n1") and not store.exists("n2")
    assert store.load("n1").messages == state.messages
    summary = store.summary("n1")
    assert (summary.status, summary.task, summary.liveness) == ("running", "q", "orphaned")
    with pytest.raises(StateError):
        store.load("n2")


async def test_a_made_up_run_id_that_is_taken_is_made_up_again(store: Store, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    """Ids carry a few hex digits of chance: in a burst of runs made in one second two can
    meet. A creator that made the id up takes another; an id the user gave is refused."""
    store.create(new_state("taken"))
    made_up = iter(["taken", "taken", "fresh-1", "taken", "fresh-2"])
    for made_here in ("tether.harness", "tether.run.tracked", "tether.vocab.state"):  # first ids, then the others
        monkeypatch.setattr(f"{made_here}.new_run_id", lambda prefix: next(made_up))
    async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as harness:
        plan = harness.agent_named("plan")
        assert harness.create(plan).run_id == "fresh-1"  # "taken" twice, then another
        with pytest.raises(RunExists, match="run taken already exists"):
            harness.create(plan, run_id="taken")
        async with harness.track("script", "a task") as run:  # a program's run: "taken", then another
            assert run.run_id == "fresh-2"
            await run.answer("done")
    assert store.load("taken").messages == new_state("taken").messages


async def test_a_subagent_run_is_a_run_of_its_own_in_the_same_store(store: Store, tmp_path: Path):
    async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as harness:
        state = await asyncio.to_thread(harness.new_run, "research")
        out = (await harness.run(state.run_id)).state
    assert out.status is Status.COMPLETED and len(out.children) == 1
    child = store.load(out.children[0])
    assert child.parent_run_id == out.run_id and child.status is Status.COMPLETED
    assert child.cost_usd > 0 and out.child_cost_usd == pytest.approx(child.cost_usd)
    listed = {s.run_id: s.parent_run_id for s in store.summaries()}
    assert listed == {out.run_id: None, child.run_id: out.run_id}


# ---- approvals: the standing rules and the record of decisions (issue 25) ---------------------

@pytest.fixture
def approvals_store(kit: Kit) -> Iterator[Store]:
    """``store`` with no rules and no decisions, before and after (PostgreSQL's are the
    session's: a rule left behind would decide other tests' calls)."""
    kit.clear_approvals()
    yield kit.store
    kit.clear_approvals()


def another_view(store: Store) -> Store:
    """The same store as another process opens it."""
    return open_store(store.spec)


def test_rules_are_the_stores_for_every_process_and_an_id_is_never_given_twice(approvals_store: Store):
    from tether.approvals import Rule, RuleError, parse_where

    store, other = approvals_store, another_view(approvals_store)
    try:
        assert store.rules() == []
        first = store.rule_add(Rule("allow", "delete_file", "scratch logs", "alice",
                                    where=(parse_where("path=*.log"), parse_where("/opts/force=true")),
                                    agent="ops", scope="agent", expires=time.time() + 3600))
        second = other.rule_add(Rule("ask", "deploy", "two people", "bob", approvals=2, deadline_s=600,
                                     on_deadline="escalate", source="program"))
        assert int(second.id[1:]) > int(first.id[1:])
        assert other.rules() == store.rules() == [first, second]  # oldest first, as they were made
        assert store.rule_remove(first.id) == first
        assert other.rules() == [second]
        with pytest.raises(RuleError, match=f"no rule {first.id} on this store; tether rules lists them"):
            other.rule_remove(first.id)
        third = other.rule_add(Rule("deny", "*", "frozen", "carol"))
        assert int(third.id[1:]) > int(second.id[1:])
        assert [r.id for r in store.rules()] == [second.id, third.id]
    finally:
        getattr(other, "close", lambda: None)()


def test_a_save_records_the_runs_decisions_for_the_whole_store(approvals_store: Store):
    from tether.approvals import DecisionQuery
    from tether.vocab.state import Decision

    store, other = approvals_store, another_view(approvals_store)
    try:
        store.create(new_state("d1", tool_call("c1", "deploy", '{"env": "prod"}')))
        state, handle = store.open("d1")
        try:
            state.approvals["c1"] = Decision("c1", "approved", args_hash('{"env": "prod"}'), "", "alice",
                                             tool="deploy", approvers=["alice"], needed=2, asked_at=time.time() - 3)
            handle.save(state)
            (pending,) = other.decisions(DecisionQuery())
            assert (pending.run_id, pending.verdict, pending.approvers) == ("d1", "pending", ("alice",))
            state.approvals["c1"] = Decision("c1", "approved", args_hash('{"env": "prod"}'), "", "bob",
                                             tool="deploy", approvers=["alice", "bob"], needed=2,
                                             asked_at=pending.ts - 3)
            handle.save(state)
        finally:
            handle.release()
        (done,) = other.decisions(DecisionQuery())  # the same call's row, now complete
        assert (done.verdict, done.by, done.approvers, done.args) == ("approved", "bob", ("alice", "bob"),
                                                                     '{"env": "prod"}')
        assert done.waited_s is not None and done.waited_s >= 3
        assert other.decisions(DecisionQuery(by="alice")) == [done]
        assert other.decisions(DecisionQuery(agent="someone")) == []
        assert other.decisions(DecisionQuery(since=done.ts + 1)) == []
    finally:
        getattr(other, "close", lambda: None)()


def test_a_forks_lineage_is_in_its_summary_on_both_stores(store: Store) -> None:
    """``tether runs`` and the console's runs list read a fork's parent and step from the summary."""
    origin, forked = new_state("origin"), new_state("forked")
    forked.forked_from = {"run_id": "origin", "step": 3, "commit": "0" * 40, "messages": 2}
    store.create(origin)
    store.create(forked)
    rows = {r.run_id: r for r in store.summaries()}
    assert rows["forked"].forked_from == {"run_id": "origin", "step": 3}
    assert rows["origin"].forked_from is None
