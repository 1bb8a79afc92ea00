"""The console model and the event pump, without Textual: what each key can do, who runs
what, orphans, alerts said once, the pump's typed dispatch and its throttle."""

from __future__ import annotations

import time

from tether.vocab.cancel import CancelSignal
from tether.vocab.events import ApprovalRequired, RunStarted, RunStopped, TextDelta, ToolProgress, Turn
from tether.store.summary import RunSummary
from tether.vocab.state import Cancelled, Decision, Limits, NeedsApproval, RunState, Status
from tether.store.owner import Owner
from tether.tui.state.model import ConsoleModel, stub_state
from tether.tui.state.pump import FLUSH_INTERVAL_S, EventPump
from tether.tui.state.store_client import StoreClient
from tether.store.changes import JOURNAL, RunChange
from tether.store.files.store import RunStore

WAITING = NeedsApproval(call_id="c1", tool_name="delete_file", args='{"path":"a.log"}', why="deletes a file")
ALIVE = Owner(pid=42, host="box", user="eve", since=1000.0, heartbeat=1057.0, alive=True)
DEAD = Owner(pid=42, host="box", user="eve", since=1000.0, heartbeat=1030.0, alive=False)


def state(rid: str, status: Status = Status.RUNNING, **kw) -> RunState:
    return RunState(run_id=rid, model="plan", messages=[{"role": "user", "content": "do it"}], status=status, **kw)


def model_with(*states: RunState, driving: dict | None = None) -> ConsoleModel:
    model = ConsoleModel(driving=driving if driving is not None else {})
    for st in states:
        model.put_state(st)
    return model


def test_a_run_driven_here_is_stopped_here_and_nothing_else_applies() -> None:
    model = model_with(state("r"))
    model.active["r"] = object()
    model.signals["r"] = CancelSignal()
    assert model.applies("r") == (True, False, False)
    model.signals["r"].cancel("stop")
    assert not model.can_stop("r")  # already stopping


def test_a_run_another_live_process_runs() -> None:
    model = model_with(state("r"))
    model.set_owner("r", ALIVE)
    assert model.is_live("r") and model.held_elsewhere("r") and not model.is_driven("r")
    assert model.badge_key("r") == "running"
    assert model.applies("r") == (True, False, False)  # Stop through the control channel; no Resume
    model.stopping.add("r")
    assert not model.can_stop("r")  # a Stop is on its way
    words = model.owner_words("r", now=1060.0)
    assert words is not None and "pid 42@box (eve) since" in words and "heartbeat 3 s ago" in words


def test_a_run_whose_process_died_is_orphaned_and_can_be_resumed() -> None:
    model = model_with(state("r"))
    assert model.set_owner("r", ALIVE)
    assert model.set_owner("r", DEAD)  # liveness changed
    assert model.is_orphaned("r") and model.badge_key("r") == "orphaned"
    assert model.applies("r") == (False, False, True)  # nothing to stop; Resume adopts it
    assert "pid 42 on box" in model.reason("r") and "R adopts it" in model.reason("r")
    assert "nobody runs it now" in (model.owner_words("r") or "")


def test_approvals_go_where_the_run_is_held() -> None:
    nobody = state("a", Status.INTERRUPTED, interruption=WAITING)
    held = state("b", Status.INTERRUPTED, interruption=WAITING)
    model = model_with(nobody, held)
    model.set_owner("b", ALIVE)
    assert model.can_decide("a") and not model.held_elsewhere("a")
    assert model.can_decide("b") and model.waits_in_process("b")
    assert model.can_stop("b") and not model.can_stop("a")  # Stop ends b's wait; a has nothing to stop
    assert not model.can_resume("a") and not model.can_resume("b")
    assert [p.run_id for p in model.pending_approvals()] == ["a", "b"]
    running = model_with(state("c"))
    running.set_owner("c", ALIVE)
    assert not running.can_decide("c")  # a live process holds it, not waiting for a decision


def test_who_decided_and_who_stopped() -> None:
    st = state("r", Status.INTERRUPTED, interruption=Cancelled("enough", "alice"))
    st.approvals["c1"] = Decision(call_id="c1", verdict="approved", args_hash="h", by="bob", ts=1.0)
    model = model_with(st)
    assert model.who_decided("r") == "approved by bob · stopped by alice"
    assert model.reason("r") == "enough (by alice)"


def test_stubs_from_summaries_are_loaded_when_needed() -> None:
    summary = RunSummary(run_id="s", status="interrupted", model="destructive", task="clean up", turns=1,
                         cost_usd=0.5, budget_usd=2.0, max_turns=10, created_at=5.0,
                         interruption=WAITING.to_dict())
    model = ConsoleModel()
    model.list_summaries([summary])
    assert model.needs_load("s") and model.states["s"].task == "clean up"
    assert model.states["s"].limits == Limits(max_turns=10, budget_usd=2.0)
    assert model.can_decide("s") and model.badge_key("s") == "approval"
    assert model.new_approvals() == []  # what was pending when listed is not alerted
    model.put_state(stub_state(summary))
    model.stubs.discard("s")
    assert not model.needs_load("s")


def test_alerts_are_said_once() -> None:
    model = model_with(state("r", limits=Limits(budget_usd=1.0)))
    model.seed_alerts()
    st = model.states["r"]
    st.status, st.interruption = Status.INTERRUPTED, WAITING
    assert [p.call_id for p in model.new_approvals()] == ["c1"]
    assert model.new_approvals() == []
    st.cost_usd = 0.5
    assert model.budget_crossings(["r"]) == []
    st.cost_usd = 0.85
    assert [(r, f) for r, f, _ in model.budget_crossings(["r"])] == [("r", 0.8)]
    assert model.budget_crossings(["r"]) == []
    st.cost_usd = 1.01
    assert [(r, f) for r, f, _ in model.budget_crossings(["r"])] == [("r", 1.0)]
    assert model.budget_crossings(["r"]) == []
    jump = model_with(state("j", limits=Limits(budget_usd=1.0)))
    jump.seed_alerts()
    jump.states["j"].cost_usd = 2.0
    assert [f for _, f, _ in jump.budget_crossings(["j"])] == [0.8, 1.0]  # both, once each


def test_spend_today_counts_todays_top_level_runs() -> None:
    old = state("old", created_at=time.time() - 3 * 86400, cost_usd=5.0)
    new = state("new", cost_usd=1.25)
    child = state("new.c1", cost_usd=0.25, parent_run_id="new")
    assert model_with(old, new, child).spend_today() == 1.25


def test_the_pump_dispatches_by_event_class_and_asks_for_one_flush() -> None:
    model = model_with(state("r"))
    asked: list[bool] = []
    pump = EventPump(model, request_flush=lambda: asked.append(True), trace_path=lambda rid: None, timings=False)
    pump.feed([RunStarted(run_id="r", seq=1, model="plan", resumed=False),
               TextDelta(run_id="r", turn=1, text="hel"), TextDelta(run_id="r", turn=1, text="lo"),
               ToolProgress(run_id="r", seq=2, call_id="c", name="scan_archive", label="10 of 20")])
    assert asked == [True] and pump.urgent
    assert model.streaming["r"] == "hello"
    assert pump.wait_s() == 0  # urgent: at once
    drained = pump.drain()
    assert drained.status_changed and drained.approvals and "r" in drained.dirty and "r" in drained.traced
    assert model.activity["r"] == "scan_archive: 10 of 20"
    assert len(pump.buffer("r")) == 2
    pump.feed([Turn(run_id="r", seq=3, turn=1, prompt_tokens=1, completion_tokens=1, total_tokens=2, cost_usd=0.1,
                    finish_reason="stop", provider_ms=1, ttft_ms=5.0, tokens_per_s=50.0)])
    assert "r" not in model.streaming and model.speed["r"] == (5.0, 50.0)
    assert 0 < pump.wait_s() <= FLUSH_INTERVAL_S  # not urgent: throttled
    pump.drain()
    pump.feed([ApprovalRequired(run_id="r", seq=4, call_id="c1", tool="delete_file", args="{}", why="w"),
               RunStopped(run_id="r", seq=5, status="interrupted", reason="waiting", turns=1, cost_usd=0.1)])
    drained = pump.drain()
    assert drained.stopped == ["r"] and model.last_reason["r"] == "waiting" and "r" not in model.activity
    pump.feed([RunStopped(run_id="r", seq=5, status="interrupted", reason="waiting", turns=1, cost_usd=0.1)])
    pump.drain()
    assert len(pump.buffer("r")) == 5  # an event seen twice (the sink, then the trace) is one line


def test_the_sink_takes_the_live_state_of_a_run_driven_here() -> None:
    live = state("r")
    model = ConsoleModel(driving={"r": live})
    pump = EventPump(model, request_flush=lambda: None, trace_path=lambda rid: None)
    pump.sink(RunStarted(run_id="r", seq=1, model="plan", resumed=False))
    assert model.states["r"] is live and "r" in model.ours and model.is_driven("r")
    assert pump.structure_dirty


def test_the_console_takes_as_name(tmp_path) -> None:
    from tether.tui.cli.parser import build_parser
    from tether.tui.app import TetherApp
    from tether.tui.state.options import ConsoleOptions

    args = build_parser().parse_args(["console", "--as", "zed"])
    assert args.who == "zed"
    app = TetherApp(ConsoleOptions(runs_dir=tmp_path / "runs", workspace=tmp_path / "ws", operator=args.who))
    assert app.operator == app.model.operator == "zed"
    assert "@" in TetherApp(ConsoleOptions(runs_dir=tmp_path / "runs", workspace=tmp_path / "ws")).operator  # user@host


def test_a_trace_read_from_a_database_goes_before_the_lines_the_view_holds() -> None:
    model = model_with(state("r"))
    opened: list[str] = []
    pump = EventPump(model, request_flush=lambda: None, trace_path=lambda rid: None, timings=False,
                     on_buffer=opened.append)
    pump.feed([ToolProgress(run_id="r", seq=4, call_id="c", name="scan_archive", label="3 of 9")])
    pump.drain()
    assert opened == ["r"]  # the view's buffer was made: its history is asked for
    history = [RunStarted(run_id="r", seq=seq, model="plan", resumed=False).record() for seq in (1, 2, 3)]
    history.append(ToolProgress(run_id="r", seq=4, call_id="c", name="scan_archive", label="3 of 9").record())
    assert pump.prime("r", history)
    lines = [line for _, line in pump.buffer("r")]
    assert len(lines) == 4 and "scan_archive" in lines[-1]  # the history first, each line once
    assert not pump.prime("r", history)  # nothing older than what it holds: nothing added


def test_a_worker_run_in_the_queue_is_queued_not_orphaned() -> None:
    from tether.tui.state.model import QueueInfo

    model = model_with(state("q", status=Status.RUNNING), state("w", status=Status.INTERRUPTED,
                       interruption=NeedsApproval(call_id="c1", tool_name="delete_file", args="{}", why="w")))
    model.queue = QueueInfo(1, frozenset({"q"}), {"w": "worker-7"})
    assert model.badge_key("q") == "queued" and not model.can_resume("q") and not model.is_orphaned("q")
    assert model.workers_decision("w") and model.can_decide("w")
    assert "worker-7" in (model.owner_words("w") or "")


def test_the_header_names_a_database_store_without_its_password() -> None:
    from tether.store.postgres.connection import redact
    from tether.tui.views import store_label

    assert store_label(redact("postgresql://ops:s3cret@db.example:5433/tether?password=other")) == \
        "ops@db.example:5433/tether"
    assert "s3cret" not in store_label(redact("postgres://ops:s3cret@db/tether"))


async def test_a_run_of_ours_left_waiting_and_finished_by_a_short_lived_process_is_read_again(tmp_path) -> None:
    """The console drove a run until it waited for a second person; that person's ``tether
    approve`` took it, finished it and let go before the console saw it held. The journal's
    change is read, not taken for the console's own last save: the run shows completed."""
    store = RunStore(tmp_path / "runs")
    waiting = state("r", Status.INTERRUPTED, interruption=WAITING)
    store.create(waiting)
    model = model_with(waiting)
    model.ours.add("r")  # the console drove it, and let go of it when it waited
    client = StoreClient(store, model, EventPump(model, request_flush=lambda: None, trace_path=lambda rid: None,
                                                 timings=False))
    try:
        finished, handle = store.open("r")  # the other process, its owner never seen here
        finished.status, finished.interruption = Status.COMPLETED, None
        handle.save(finished)
        handle.release()
        await client.apply([RunChange("r", frozenset({JOURNAL}))])
    finally:
        await client.aclose()
    assert model.states["r"].status is Status.COMPLETED
