"""The record of decisions: ``tether decisions`` on both stores, from the index (never by
replaying journals), with its filters; the index keeps every decision whatever its
throttle or an error did, and is rebuilt with them; the OpenTelemetry export carries
each decision as an event on its call's span."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether.approvals import DecisionQuery
from tether.vocab.events import ApprovalDecision, ApprovalRequired, Event, RunStarted, RunStopped, ToolResult, ToolStart
from tether.observe.otel.replay import export_run
from tether.observe.otel.sink import OtelSink
from tether.store.protocol import Store
from tether.store.spec import open_store
from tether.vocab.state import AgentRef, Decision, RunState, args_hash
from tether.store.files.store import RunStore
from tests.processes import test_rules_cli
from tests.processes.test_rules_cli import tether

spec = test_rules_cli.spec  # the fixture: the file store, and the session's PostgreSQL

DAY = 86400.0
NOW = time.time()


def call_message(call_id: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]}


def decided_run(store: Store, run_id: str, agent: str, decisions: list[Decision]) -> None:
    """A run of ``agent`` whose calls were decided so, saved through the store's own API
    (create, open, a save per decision, release) as the harness saves it."""
    calls = [call_message(d.call_id, d.tool, {"path": f"{d.call_id}.log"}) for d in decisions]
    state = RunState(run_id=run_id, model="plan", agent=AgentRef(agent, "config", "f"),
                     messages=[{"role": "user", "content": "tidy up"}, *calls])
    store.create(state)
    state, handle = store.open(run_id)
    try:
        for decision in decisions:
            state.approvals[decision.call_id] = decision
            handle.save(state)
    finally:
        handle.release()


def decision(call_id: str, verdict: str, by: str, ago: float, waited: float = 12.0, **kw: Any) -> Decision:
    return Decision(call_id, verdict, args_hash("{}"), kw.pop("text", "fine"), by, tool=kw.pop("tool", "delete_file"),
                    ts=NOW - ago, asked_at=NOW - ago - waited, **kw)  # type: ignore[arg-type]


def the_record(store: Store) -> None:
    """Four decisions on two agents' runs: a person's, a rule's, an edited one, one of two people."""
    decided_run(store, "ops-1", "ops", [decision("c1", "approved", "alice", 3 * DAY),
                                        decision("c2", "rejected", "rule R3", 3600, rule="R3", text="never")])
    decided_run(store, "qa-1", "qa", [decision("c1", "approved", "bob", 600, args='{"path": "old.log"}',
                                               account="robert"),
                                      decision("c2", "approved", "carol", 60, approvers=["carol"], needed=2,
                                               account="carol", accounts=["carol"])])


def runs_of(listing: str) -> list[str]:
    """``RUN VERDICT`` of each decision ``tether decisions --json`` lists, in its order."""
    return [f"{r['run_id']} {r['verdict']}" for r in json.loads(listing)]


def test_decisions_are_listed_newest_first_and_filtered(spec: str, tmp_path: Path):
    store = open_store(spec)
    try:
        the_record(store)
    finally:
        getattr(store, "close", lambda: None)()
    listed = tether(tmp_path, "decisions", store=spec, real=True)  # the rest by the CLI's main in this process
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["when", "run", "tool", "arguments", "verdict", "by", "waited"]
    assert [line.split()[2] for line in lines[1:]] == ["qa-1", "qa-1", "ops-1", "ops-1"]
    assert "1 of 2    carol " in lines[1]  # how far a two-person call is, and who approved so far
    assert '{"path": "old.log"}' in lines[2] and "approved (edited)" in lines[2] and "bob as robert" in lines[2]
    assert "rule R3" in lines[3] and lines[3].rstrip().endswith("12 s")
    assert '{"path": "c1.log"}' in lines[4] and "alice" in lines[4]

    def only(*options: str) -> list[str]:
        result = tether(tmp_path, "decisions", "--json", *options, store=spec)
        assert result.returncode == 0, result.stderr
        return runs_of(result.stdout)

    assert only("--agent", "ops") == ["ops-1 rejected", "ops-1 approved"]
    assert only("--by", "R3") == ["ops-1 rejected"]  # a rule, by its id
    assert only("--by", "rule R3") == ["ops-1 rejected"]  # or as the decision names it
    assert only("--by", "alice") == ["ops-1 approved"]
    assert only("--by", "carol") == ["qa-1 pending"]  # one of the people a call needs
    assert only("--by", "ALICE") == only("--by", "Alice") == ["ops-1 approved"]  # a name whatever its case
    assert only("--by", "Robert") == only("--by", "bob") == ["qa-1 approved"]  # its account, or its name
    assert only("--since", "2d") == ["qa-1 pending", "qa-1 approved", "ops-1 rejected"]
    assert only("--since", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(NOW - 2 * DAY))) == \
        ["qa-1 pending", "qa-1 approved", "ops-1 rejected"]
    assert only("--limit", "1") == ["qa-1 pending"]
    assert only("--agent", "qa", "--by", "bob", "--since", "1d") == ["qa-1 approved"]
    none = tether(tmp_path, "decisions", "--by", "nobody", store=spec)
    assert none.returncode == 0 and none.stdout.startswith("no decisions on ") and "that fit" in none.stdout

    rows = json.loads(tether(tmp_path, "decisions", "--json", "--agent", "qa", store=spec).stdout)
    assert [(r["run_id"], r["call_id"], r["verdict"], r["by"], r["approvers"], r["account"], r["accounts"],
             r["needed"]) for r in rows] == [
        ("qa-1", "c2", "pending", "carol", ["carol"], "carol", ["carol"], 2),
        ("qa-1", "c1", "approved", "bob", [], "robert", [], 1)]
    assert rows[1]["edited_args"] == '{"path": "old.log"}' and rows[1]["args"] == '{"path": "c1.log"}'
    assert rows[1]["waited_s"] == pytest.approx(12.0) and rows[1]["agent"] == "qa" and rows[1]["source"] == "tether"

    for options, words in ((["--since", "last week"], "--since 'last week' is neither a date nor a duration"),
                           (["--limit", "0"], "--limit: must be from 1"), (["--since", "0s"], "neither a date nor")):
        refused = tether(tmp_path, "decisions", *options, store=spec)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr


def test_decisions_come_back_when_the_index_is_lost(tmp_path: Path):
    root = tmp_path / "runs"
    the_record(RunStore(root))
    for suffix in ("", "-wal", "-shm"):
        (root / f"index.sqlite{suffix}").unlink(missing_ok=True)
    listed = tether(tmp_path, "decisions", "--json", store=str(root))
    assert runs_of(listed.stdout) == ["qa-1 pending", "qa-1 approved", "ops-1 rejected", "ops-1 approved"]


def test_a_run_changed_behind_the_index_has_its_decisions_read_again(tmp_path: Path):
    """A journal written by a process that did not update the index (a crash between the
    commit and its row): the next listing replays that journal alone, decisions included."""
    store = RunStore(tmp_path / "runs")
    decided_run(store, "ops-1", "ops", [decision("c1", "approved", "alice", 60)])
    state, handle = store.open("ops-1")
    handle._index = None  # noqa: SLF001 - a save whose row never reached the index
    state.approvals["c2"] = decision("c2", "rejected", "bob", 30)
    handle.save(state)
    handle.release()
    assert [r.call_id for r in store.index.decisions(DecisionQuery())] == ["c1"]  # the index is behind
    assert [r.call_id for r in store.decisions(DecisionQuery())] == ["c2", "c1"]


def test_the_owner_indexes_a_decision_at_once_whatever_the_throttle_and_after_an_index_error(tmp_path: Path):
    store = RunStore(tmp_path / "runs")
    store.create(RunState(run_id="r", model="plan", messages=[{"role": "user", "content": "q"},
                                                               call_message("c1", "delete_file", {"path": "a"}),
                                                               call_message("c2", "delete_file", {"path": "b"})]))
    state, handle = store.open("r")
    try:
        handle.save(state)  # the row is written now: the next save's row is not due for a second
        state.approvals["c1"] = decision("c1", "approved", "alice", 0)
        handle.save(state)  # same status, same interruption, within the second
        assert [r.call_id for r in store.index.decisions(DecisionQuery())] == ["c1"]  # straight from the index

        store.index._failed_at = time.monotonic()  # noqa: SLF001 - an index error just now: writes back off
        state.approvals["c2"] = decision("c2", "approved", "bob", 0)
        handle.save(state)
        assert [r.call_id for r in store.index.decisions(DecisionQuery())] == ["c1"]
        store.index._failed_at = -1e9  # noqa: SLF001 - the index is usable again
        handle.save(state)  # nothing changed in the run: the decision still owed is written now
        assert [r.call_id for r in store.index.decisions(DecisionQuery())] == ["c2", "c1"]
    finally:
        handle.release()


def test_a_run_created_with_decisions_has_them_in_the_record(spec: str):
    store = open_store(spec)
    try:
        state = RunState(run_id="copied", model="plan", messages=[{"role": "user", "content": "q"},
                                                                  call_message("c1", "delete_file", {"path": "a"})])
        state.approvals["c1"] = decision("c1", "rejected", "rule R9", 5, rule="R9")
        store.create(state)
        (record,) = store.decisions(DecisionQuery(by="R9"))
        assert (record.run_id, record.call_id, record.verdict, record.rule) == ("copied", "c1", "rejected", "R9")
    finally:
        getattr(store, "close", lambda: None)()


def test_an_earlier_tethers_decisions_table_gets_the_accounts(pg, pg_url: str, tmp_path: Path):
    """A PostgreSQL store made before decisions recorded accounts and the people a call needs:
    the operator's role adds the columns when it connects, and the record says how far a
    two-person call is (1 of 2), and as which account. Its earlier rows read as before."""
    from tether.store.postgres.store import PgStore

    decided_run(pg, "old-1", "ops", [decision("c1", "approved", "alice", 60)])  # a row, then the columns go
    with pg._conn() as conn:  # noqa: SLF001 - the table as an earlier Tether made it
        conn.execute(pg.q("ALTER TABLE {s}.decisions DROP COLUMN account, DROP COLUMN accounts, DROP COLUMN needed"))
    store = PgStore(pg_url)
    try:
        decided_run(store, "new-1", "ops", [decision("c1", "approved", "ana", 30, approvers=["ana"], needed=2,
                                                     account="root", accounts=["root"])])
        listed = tether(tmp_path, "decisions", store=pg_url)
        assert listed.returncode == 0, listed.stderr
        new, old = listed.stdout.splitlines()[1:]
        assert "new-1" in new and " 1 of 2 " in new and "ana as root" in new
        assert "old-1" in old and "approved" in old and "alice" in old
    finally:
        store.close()


# ---- OpenTelemetry: a decision is an event on its call's span -------------------------------

T0 = 1_700_000_000.0


def stamp(event: Event, seq: int, ts: float) -> Event:
    event.seq, event.ts = seq, ts
    return event


def memory_sink(**kw: Any) -> tuple[OtelSink, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelSink(provider, **kw), exporter, provider


def decision_events(span: Any) -> list[dict[str, Any]]:
    return [dict(e.attributes) for e in span.events if e.name == "tether.approval_decision"]


def test_a_decision_is_an_event_on_the_span_of_the_call_it_decided():
    sink, exporter, provider = memory_sink()
    run = "otel-1"
    events = [
        (RunStarted(run_id=run, model="m", resumed=False, agent="a"), T0),
        (ApprovalRequired(run_id=run, call_id="c1", tool="delete_file", args='{"path": "a.log"}', why="w"), T0 + 1),
        (ApprovalRequired(run_id=run, call_id="c2", tool="delete_file", args='{"path": "b.log"}', why="w"), T0 + 1),
        (ApprovalDecision(run_id=run, call_id="c1", tool="delete_file", verdict="approved", text="ok",
                          by="rule R3", rule="R3"), T0 + 5),
        (ApprovalDecision(run_id=run, call_id="c2", tool="delete_file", verdict="pending", text="1 of 2",
                          by="alice", tally="1 of 2", args='{"path": "old.log"}'), T0 + 6),
        (ApprovalDecision(run_id=run, call_id="c2", tool="delete_file", verdict="rejected", text="no", by="bob"),
         T0 + 8),
        (ToolStart(run_id=run, call_id="c1", name="delete_file", args='{"path": "a.log"}'), T0 + 9),
        (ToolResult(run_id=run, call_id="c1", name="delete_file", ms=100.0, ok=True), T0 + 9.1),
        (ToolResult(run_id=run, call_id="c2", name="delete_file", ms=0.0, ok=False, error="declined"), T0 + 9.2),
        (RunStopped(run_id=run, status="completed", reason="done", turns=2, cost_usd=0.0), T0 + 10),
    ]
    for seq, (event, ts) in enumerate(events, 1):
        sink(stamp(event, seq, ts))
    spans = exporter.get_finished_spans()
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in spans if s.name == "execute_tool delete_file"}
    (ruled,) = decision_events(tools["c1"])
    assert ruled == {"gen_ai.tool.call.id": "c1", "gen_ai.tool.name": "delete_file", "tether.verdict": "approved",
                     "tether.by": "rule R3", "tether.rule": "R3", "tether.edited": False, "tether.waited_s": 4.0}
    first, second = decision_events(tools["c2"])  # a declined call's span carries its decisions too
    assert (first["tether.verdict"], first["tether.by"], first["tether.edited"], first["tether.tally"]) == \
        ("pending", "alice", True, "1 of 2")
    assert first["tether.waited_s"] == 5.0 and second["tether.waited_s"] == 7.0  # both from when it asked
    assert (second["tether.verdict"], second["tether.by"], second["tether.rule"]) == ("rejected", "bob", "")
    assert not any("tether.vocab.text" in e or "tether.edited_arguments" in e for e in (ruled, first, second))  # content
    agent = next(s for s in spans if s.name == "invoke_agent a")
    assert len(decision_events(agent)) == 3  # and the run's span keeps them in its timeline
    provider.shutdown()


def test_an_exported_run_carries_its_decision_on_the_call_it_decided(tmp_path: Path):
    """A real run, approved from the command line, exported from its trace afterwards."""
    runs = str(tmp_path / "runs")
    assert tether(tmp_path, "run", "destructive", "--run-id", "d1", "--workspace", str(tmp_path / "ws"),
                  store=runs).returncode == 5
    approved = tether(tmp_path, "approve", "d1", "--as", "alice", "--workspace", str(tmp_path / "ws"), store=runs)
    assert approved.returncode == 0, approved.stderr
    exporter = InMemorySpanExporter()
    export_run(runs, "d1", exporter)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool delete_file"]
    (event,) = decision_events(span)
    assert (event["tether.verdict"], event["tether.by"], event["tether.edited"]) == ("approved", "alice", False)
    assert event["tether.waited_s"] >= 0
