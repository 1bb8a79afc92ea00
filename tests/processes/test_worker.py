"""Queue workers (``tether submit``, ``tether worker``) on a real PostgreSQL: runs wait in
the queue and say so, any worker takes them, a SIGKILLed worker's runs are finished by
another without paying a model turn twice, two workers never drive one run at once, a worker
that lacks an agent's module leaves its runs to one that has it, a Stop reaches a tool in a
worker, and an approval waits durably across a worker's death.

Every worker is a real process, stopped however the test ends (tests/workerproc.py checks
that none is left running)."""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.store import control, operate
from tether.workers import worker
from tether.workers.database import client, close_client
from tether.harness import Harness
from tether.workers.decide import decide, stop_waiting
from tether.workers.names import DEMO_QUEUE
from tether.workers.recovery import GAVE_UP
from tether.demo.agents import DEMO
from tether.workers.submit import Submission, submit
from tether.workers.view import _workflow_status, queue_view
from tether.store.postgres.store import PgStore
from tether.demo.provider import create_app
from tether.vocab.state import Cancelled, NeedsApproval, Status
from tests.campaign.server import CountingApp, serving
from tests.workerproc import Fleet, clean_slate, wait_for


@pytest.fixture(scope="module")
def provider() -> Iterator[tuple[str, CountingApp]]:
    counter = CountingApp(create_app())
    with serving(counter) as base:
        yield base, counter


@pytest.fixture
def store(pg_url: str) -> Iterator[PgStore]:
    clean_slate(pg_url)
    pg = PgStore(pg_url)
    try:
        yield pg
    finally:
        pg.close()


@pytest.fixture
def fleet(pg_url: str, store: PgStore, tmp_path: Path) -> Iterator[Fleet]:
    with Fleet(pg_url, tmp_path / "fleet", here=True) as f:  # workers are processes; one-shot commands here
        yield f


def _ended(store: PgStore, run_id: str) -> bool:
    """Stopped, and let go of (its workflow may still wait for a decision)."""
    owner = store.owner(run_id)
    return store.load(run_id).status is not Status.RUNNING and not (owner is not None and owner.alive)


def _trace(store: PgStore, run_id: str) -> list[dict]:
    return list(store.read_trace(run_id))


def test_a_submitted_run_waits_as_queued_then_a_worker_runs_it(fleet: Fleet, store: PgStore, provider):
    base, counter = provider
    run_id = fleet.submit("slow", "--base-url", f"{base}/queued/v1", real=True)  # one submit in a real process
    summary = store.summary(run_id)
    assert (summary.liveness, summary.shown_status) == ("queued", "queued")
    view = queue_view(store)
    assert view.depth == 1 and run_id in view.queued
    listed = fleet.tether("runs", "--store", fleet.url, "--json") if _cli_has_store() else None
    if listed is not None:
        row = next(r for r in json.loads(listed.stdout) if r["run_id"] == run_id)
        assert row["liveness"] == "queued"

    w = fleet.start()
    # While it runs, the run's owner and the queue view both name the worker.
    owner = wait_for(lambda: (o := store.owner(run_id)) is not None and o.alive and o.pid is not None and o,
                     "the worker to take the run (its record written)")
    assert owner.pid == w.pid and w.executor_id in (owner.command or "")
    view = queue_view(store)
    assert view.depth == 0 and view.executors[run_id] == w.executor_id
    assert view.workers[w.executor_id].pid == w.pid and view.workers[w.executor_id].alive
    if _cli_has_store():
        listed = fleet.tether("runs", "--store", fleet.url)
        line = next(x for x in listed.stdout.splitlines() if x.startswith(run_id))
        # (The 3 s tool may have ended by the time the command printed: then the run is done.)
        assert f"{w.pid}@" in line and f"(worker {w.executor_id})" in line or " completed " in line, line
    wait_for(lambda: _ended(store, run_id), "the run to end", 60)
    state = store.load(run_id)
    assert state.status is Status.COMPLETED and "1200" in (state.answer or "")
    assert counter.requests["queued"] == 2
    started = [r for r in _trace(store, run_id) if r["kind"] == "run_started"]
    assert [r["pid"] for r in started] == [w.pid]


def _cli_has_store() -> bool:
    from tether.tui.cli.parser import build_parser

    try:
        build_parser().parse_args(["runs", "--store", "postgresql://x"])
    except SystemExit:
        return False
    return True


def test_submit_refuses_bad_input_in_one_line_and_queues_nothing(fleet: Fleet, store: PgStore):
    done = fleet.tether("submit", "--agent", "no-such-agent", "--store", fleet.url, real=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no agent 'no-such-agent'" in done.stderr
    done = fleet.tether("submit", "--agent", "plan", "--store", "/not/a/database")
    assert done.returncode == 2 and "--store postgresql://" in done.stderr
    wrong = fleet.url.replace("tether:", "tether:wrong", 1)
    done = fleet.tether("submit", "--agent", "plan", "--store", wrong)
    assert done.returncode == 2 and "wrong" not in done.stderr and "***" in done.stderr
    assert store.run_ids() == [] and queue_view(store).depth == 0


def test_a_submitted_run_records_the_role_that_submitted_it_and_the_name_given_with_as(fleet: Fleet, store: PgStore):
    """Who started a queued run is who submitted it, not the worker that runs it later."""
    state = store.load(fleet.submit("plan", "--as", "ana"))
    assert (state.operator, state.operator_name) == (store.account(), "ana")


def test_a_sigkilled_workers_run_is_finished_by_another_without_paying_twice(fleet: Fleet, store: PgStore,
                                                                              provider):
    """Killed in the middle of its tool call: the second worker recovers the workflow (the
    first one's liveness lock is gone), resumes from the saved reply, and pays no turn twice."""
    base, counter = provider
    first = fleet.start()
    run_id = fleet.submit("slow", "--base-url", f"{base}/killed/v1")
    # The reply asking for scan_archive is saved before the 3 s tool runs: kill in the tool.
    wait_for(lambda: store.load(run_id).turns == 1 and store.owner(run_id).alive, "the tool call to start")
    first.kill()
    # The server ends the dead session's backend on its own schedule; then the run is the queue's.
    wait_for(lambda: store.liveness(run_id) == "queued", "the killed worker's run to show as queued", 30)
    second = fleet.start()
    wait_for(lambda: _ended(store, run_id), "the second worker to finish the run", 90)
    state = store.load(run_id)
    assert state.status is Status.COMPLETED and state.turns == 2
    assert counter.requests["killed"] == 2, "a saved model turn was asked again"
    started = [r["pid"] for r in _trace(store, run_id) if r["kind"] == "run_started"]
    assert started == [first.pid, second.pid]
    assert "went back to their queues" in second.text()


def test_a_worker_shut_down_mid_run_hands_it_over_and_exits(fleet: Fleet, store: PgStore, provider, pg_server):
    """SIGTERM: the run in the tool is saved as interrupted by the shutdown, the worker exits 0,
    and the next worker goes on with the run (it is no operator's Stop). The password of the
    store's URL is in no log and no record."""
    base, counter = provider
    first = fleet.start()
    run_id = fleet.submit("slow", "--base-url", f"{base}/term/v1")
    wait_for(lambda: store.load(run_id).turns == 1 and store.owner(run_id).alive, "the tool call to start")
    assert first.stop() == 0
    state = store.load(run_id)
    assert state.status is Status.INTERRUPTED and isinstance(state.interruption, Cancelled)
    assert store.summary(run_id).liveness is None and queue_view(store).executors.get(run_id)
    second = fleet.start()
    wait_for(lambda: _workflow_status(store, run_id) == "SUCCESS", "the next worker to finish the run", 60)
    assert store.load(run_id).status is Status.COMPLETED and counter.requests["term"] == 2
    password = pg_server.operator_password
    assert password not in first.text() + second.text()
    records = json.dumps([*_trace(store, run_id), store.load(run_id).to_dict()])
    assert password not in records and "***" in first.text()


def test_a_database_restart_mid_run_and_the_run_goes_on(fleet: Fleet, store: PgStore, provider, pg_server):
    """Every session is cut and every lock dropped: the worker takes its lock again, and the
    run goes on from its last committed step (the store waits for the server; past that, the
    drive step is tried again); no worker calls another dead meanwhile."""
    from tether.store.postgres.connection import StoreUnavailable

    base, counter = provider
    w = fleet.start()
    run_id = fleet.submit("slow", "--base-url", f"{base}/restart/v1")
    wait_for(lambda: store.load(run_id).turns == 1 and store.owner(run_id).alive, "the tool call to start")
    pg_server.restart()

    def done() -> bool:
        try:
            return _workflow_status(store, run_id) == "SUCCESS"
        except StoreUnavailable:
            return False  # this test's own session was cut too

    wait_for(done, "the run to go on after the restart", 120)
    state = store.load(run_id)
    assert state.status is Status.COMPLETED and counter.requests["restart"] <= 3
    # The store waits for the server and goes on (or, past its patience, the step is tried again).
    assert "taken again" in w.text() and ("the run goes on" in w.text() or "the worker tries again" in w.text())
    assert w.process.poll() is None and "went back to their queues" not in w.text()


def test_two_workers_never_drive_one_run_at_once(fleet: Fleet, store: PgStore, provider, pg_url: str):
    """A recovery that hands a live worker's run to another (a zombie) makes the second one
    wait for the run's lock: the tool runs once, and only the first worker drives the run."""
    base, counter = provider
    first = fleet.start()
    second = fleet.start()
    run_id = fleet.submit("slow", "--base-url", f"{base}/zombie/v1")
    wait_for(lambda: store.load(run_id).turns == 1 and (o := store.owner(run_id)).alive and o, "the tool call")
    driver = store.owner(run_id).pid
    other = second if driver == first.pid else first
    dbos = client(pg_url)
    try:  # what a mistaken recovery would do
        dbos.resume_workflow(run_id, queue_name=DEMO_QUEUE)
    finally:
        close_client(dbos)
    wait_for(lambda: "waits until it lets go" in other.text(), "the other worker to wait for the run", 30)
    wait_for(lambda: _ended(store, run_id), "the run to end", 60)
    trace = _trace(store, run_id)
    assert [r["kind"] for r in trace].count("tool_start") == 1
    assert [r["pid"] for r in trace if r["kind"] == "run_started"] == [driver]
    assert store.load(run_id).status is Status.COMPLETED and counter.requests["zombie"] == 2


WTOOLS = '''
def list_files() -> str:
    """List the files in the folder."""
    return "errors.log"


def read_file(path: str) -> str:
    """Read a file."""
    return "ERROR disk full on /var (3 times)"
'''


def test_a_worker_without_the_agents_module_leaves_the_run_to_one_that_has_it(fleet: Fleet, store: PgStore,
                                                                                provider, tmp_path: Path):
    base, _ = provider
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "wtools.py").write_text(WTOOLS)
    config = tmp_path / "agents" / "tether.toml"
    (config.parent / "ws").mkdir(parents=True)
    config.write_text(textwrap.dedent(f"""
        [agents.custom]
        model = "plan"
        base_url = "{base}/custom/v1"
        workspace = "./ws"
        tools = ["wtools:list_files", "wtools:read_file"]
    """))
    lacking = fleet.start("--config", str(config))
    assert "cannot run agent custom" in lacking.text() and "no module named 'wtools'" in lacking.text()
    run_id = fleet.submit("custom", "--config", str(config), "--prompt", "what went wrong?",
                          pythonpath=[str(modules)])
    notes = wait_for(lambda: [r for r in _trace(store, run_id) if r["kind"] == "worker_note"],
                     "the worker's note in the run's trace", 30)
    assert lacking.executor_id in notes[0]["text"] and "no module named 'wtools'" in notes[0]["text"]
    assert store.summary(run_id).shown_status == "queued"
    having = fleet.start("--config", str(config), pythonpath=[str(modules)])
    wait_for(lambda: _ended(store, run_id), "the worker that has the module to run it", 60)
    assert store.load(run_id).status is Status.COMPLETED
    started = [r["pid"] for r in _trace(store, run_id) if r["kind"] == "run_started"]
    assert started == [having.pid]
    assert len([r for r in _trace(store, run_id) if r["kind"] == "worker_note"]) == 1, "a note said twice"


def test_a_stop_from_another_process_reaches_the_tool_and_the_worker_goes_on(fleet: Fleet, store: PgStore,
                                                                              provider):
    base, _ = provider
    w = fleet.start()
    run_id = fleet.submit("slow", "--base-url", f"{base}/stop/v1")
    wait_for(lambda: store.load(run_id).turns == 1 and store.owner(run_id).alive, "the tool call to start")
    stopped = _stop_from_another_process(fleet, store, run_id)
    assert stopped, "the stop was not delivered"
    wait_for(lambda: _ended(store, run_id), "the run to stop", 30)
    state = store.load(run_id)
    assert state.status is Status.INTERRUPTED and isinstance(state.interruption, Cancelled)
    assert state.exit_code == 5 and state.interruption.by == "tester"
    assert not any(m.get("role") == "tool" and "3 archives" in (m.get("content") or "") for m in state.messages)
    following = fleet.submit("plan", "--base-url", f"{base}/after-stop/v1")
    wait_for(lambda: _ended(store, following), "the worker's next run", 60)
    assert store.load(following).status is Status.COMPLETED and w.process.poll() is None


def _stop_from_another_process(fleet: Fleet, store: PgStore, run_id: str) -> bool:
    if _cli_has_store():
        done = fleet.tether("stop", run_id, "--store", fleet.url, "--as", "tester")
        return done.returncode == 0
    reply = asyncio.run(operate.request(store, run_id, control.ControlRequest("stop", "stopped by the test",
                                                                              by="tester")))
    return reply.ok


def test_an_approval_waits_durably_through_a_workers_death(fleet: Fleet, store: PgStore, provider, tmp_path: Path):
    base, counter = provider
    workspace = tmp_path / "ws"
    first = fleet.start()
    run_id = fleet.submit("destructive", "--base-url", f"{base}/approve/v1", "--workspace", str(workspace))
    wait_for(lambda: isinstance(store.load(run_id).interruption, NeedsApproval) and _ended(store, run_id),
             "the run to wait for approval", 60)
    first.kill()  # the workflow's wait is in the database, not in the process
    approved = fleet.tether("approve", run_id, "--store", fleet.url, "--as", "alice", "--note", "fine")
    assert approved.returncode == 0 and "approved delete_file" in approved.stdout, approved.stderr
    again = fleet.tether("reject", run_id, "--store", fleet.url, "--as", "bob", "--reason", "no")
    assert again.returncode == 2 and "already decided: approved by alice" in again.stderr
    assert (workspace / "access.log").exists(), "the write happened before anyone ran the run"
    fleet.start()
    wait_for(lambda: _workflow_status(store, run_id) == "SUCCESS", "the new worker to finish the approved run", 60)
    state = store.load(run_id)
    assert state.status is Status.COMPLETED and not (workspace / "access.log").exists()
    assert [d.by for d in state.approvals.values()] == ["alice"]
    assert counter.requests["approve"] == 3
    late = asyncio.run(decide(store, run_id, control.ControlRequest("approve", by="carol")))
    assert late is None or not late.ok


def test_a_stop_ends_a_workflows_wait_and_the_run_with_its_call_declined(fleet: Fleet, store: PgStore, provider,
                                                                         tmp_path: Path):
    """A Stop ends a run whose workflow waits for a decision (issue 37, item 8): the call is
    declined in words, on the record as the stopper's, and the workflow stops waiting."""
    base, _ = provider
    fleet.start()
    run_id = fleet.submit("destructive", "--base-url", f"{base}/stop-wait/v1", "--workspace", str(tmp_path / "ws"))
    wait_for(lambda: isinstance(store.load(run_id).interruption, NeedsApproval) and _ended(store, run_id)
             and queue_view(store).executors.get(run_id), "the workflow to wait for the decision", 60)
    request = control.ControlRequest("stop", "not today", by="tester")
    reply = asyncio.run(stop_waiting(store, run_id, request))
    assert reply is not None and reply.ok, reply
    assert "delete_file (call_1_0), which waited in the worker queue for a decision, is declined" in reply.words
    wait_for(lambda: _workflow_status(store, run_id) == "SUCCESS", "the workflow to end", 30)
    state = store.load(run_id)
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled("not today", "tester")
    assert (state.approvals["call_1_0"].verdict, state.approvals["call_1_0"].by) == ("rejected", "tester")
    assert run_id not in queue_view(store).executors
    # no workflow waits for it now
    assert asyncio.run(decide(store, run_id, control.ControlRequest("approve", by="alice"))) is None


def test_an_approval_after_the_deadline_of_a_run_in_the_queue_is_refused(fleet: Fleet, store: PgStore, provider,
                                                                           tmp_path: Path):
    """Issue 37, item 1, through the worker queue: the workflow is not sent an approval made
    after the call's deadline; the deciding process applies the deadline and says so."""
    base, _ = provider
    fleet.start()
    workspace = tmp_path / "ws"
    run_id = fleet.submit("destructive", "--base-url", f"{base}/late/v1", "--workspace", str(workspace),
                          "--decision-deadline", "1s", "--on-deadline", "stop")
    wait_for(lambda: isinstance(store.load(run_id).interruption, NeedsApproval) and _ended(store, run_id)
             and queue_view(store).executors.get(run_id), "the workflow to wait for the decision", 60)
    deadline_at = store.load(run_id).interruption.deadline_at
    wait_for(lambda: time.time() > deadline_at, "the deadline to pass", 30)
    assert asyncio.run(decide(store, run_id, control.ControlRequest("approve", by="carol"))) is None  # not the workflow's
    late = fleet.tether("approve", run_id, "--store", fleet.url, "--as", "carol")
    assert late.returncode == 2 and "too late: the decision deadline of delete_file" in late.stderr, late.stderr
    state = store.load(run_id)
    assert isinstance(state.interruption, Cancelled) and state.approvals["call_1_0"].by == "deadline"
    assert (workspace / "access.log").exists()


def test_a_run_waiting_for_a_decision_holds_no_slot(fleet: Fleet, store: PgStore, provider, tmp_path: Path):
    """A worker at --concurrency 1 whose one run waits for approval takes the next run and
    finishes it meanwhile; the decision then reaches the waiting run, in the same worker's
    workflow, and it goes on (issue 27, item 2)."""
    base, _ = provider
    w = fleet.start("--concurrency", "1")
    waiting = fleet.submit("destructive", "--base-url", f"{base}/no-slot/v1", "--workspace", str(tmp_path / "ws"))
    wait_for(lambda: isinstance(store.load(waiting).interruption, NeedsApproval) and _ended(store, waiting)
             and queue_view(store).executors.get(waiting), "the run's workflow to wait for the decision", 60)
    assert store.owner(waiting) is None or not store.owner(waiting).alive  # no process holds it
    after = fleet.submit("plan", "--base-url", f"{base}/beside/v1")
    wait_for(lambda: _workflow_status(store, after) == "SUCCESS", "the next run, beside the waiting one", 60)
    assert store.load(after).status is Status.COMPLETED
    assert _workflow_status(store, waiting) == "PENDING" and queue_view(store).executors[waiting] == w.executor_id
    approved = fleet.tether("approve", waiting, "--store", fleet.url, "--as", "alice", "--note", "fine")
    assert approved.returncode == 0, approved.stderr
    wait_for(lambda: _workflow_status(store, waiting) == "SUCCESS", "the approved run to finish", 60)
    state = store.load(waiting)
    assert state.status is Status.COMPLETED and [d.by for d in state.approvals.values()] == ["alice"]


def test_a_stop_for_a_queued_run_stops_it_before_its_first_turn(fleet: Fleet, store: PgStore, provider):
    """A program's ``Harness.stop`` reaches the queue as every front's Stop does (tether.actions)."""
    base, counter = provider
    run_id = fleet.submit("plan", "--base-url", f"{base}/stop-queued/v1")

    async def stop() -> control.ControlReply:
        async with Harness(store=store) as harness:
            return await harness.stop(run_id, "never mind", by="tester")

    reply = asyncio.run(stop())
    assert reply is not None and reply.ok and "waits in the worker queue" in reply.words
    fleet.start()
    wait_for(lambda: _workflow_status(store, run_id) == "SUCCESS", "the worker to take and stop it", 60)
    state = store.load(run_id)
    assert state.status is Status.INTERRUPTED and isinstance(state.interruption, Cancelled)
    assert state.turns == 0 and counter.requests["stop-queued"] == 0


def test_a_run_whose_agent_a_listening_worker_cannot_rebuild_is_left_in_words(fleet: Fleet, store: PgStore,
                                                                               provider, tmp_path: Path):
    """The worker builds *its* agent custom, but the run was made from another file's agent
    of that name, whose module it lacks: the run is not started, its trace says why, it
    shows as orphaned (nothing waits silently), and tether resume finishes it where the
    module is."""
    base, _ = provider
    mine, theirs, modules = tmp_path / "mine", tmp_path / "theirs", tmp_path / "modules"
    for folder in (mine / "ws", theirs / "ws", modules):
        folder.mkdir(parents=True)
    (mine / "local_tools.py").write_text(WTOOLS)
    (modules / "wtools.py").write_text(WTOOLS)
    for folder, module in ((mine, "local_tools"), (theirs, "wtools")):
        (folder / "tether.toml").write_text(textwrap.dedent(f"""
            [agents.custom]
            model = "plan"
            base_url = "{base}/rebuild/v1"
            workspace = "./ws"
            tools = ["{module}:list_files", "{module}:read_file"]
        """))
    w = fleet.start("--config", str(mine / "tether.toml"))
    run_id = fleet.submit("custom", "--config", str(theirs / "tether.toml"), "--prompt", "what went wrong?",
                          pythonpath=[str(modules)])
    wait_for(lambda: _workflow_status(store, run_id) == "SUCCESS", "the worker to give the run up", 60)
    notes = [r["text"] for r in _trace(store, run_id) if r["kind"] == "worker_note"]
    assert len(notes) == 1 and "cannot build the run's agent" in notes[0] and "wtools" in notes[0]
    assert store.summary(run_id).shown_status == "orphaned" and store.load(run_id).turns == 0
    assert "cannot build the run's agent" in w.text()
    resumed = fleet.tether("resume", run_id, "--store", fleet.url, pythonpath=[str(modules)])
    assert resumed.returncode == 0, resumed.stderr
    assert store.load(run_id).status is Status.COMPLETED


def test_a_worker_runs_an_acp_agent_and_a_decision_reaches_it(fleet: Fleet, store: PgStore, tmp_path: Path):
    """An ACP agent's run from the queue: the worker starts the agent, the permission request
    is a pending approval on the store, ``tether approve`` from another process reaches the
    worker that holds the agent, and the agent's write lands. A worker without the agent's
    command says so and leaves its runs alone."""
    from tests.acp.conftest import fake_agent

    workspace = tmp_path / "acp-ws"
    workspace.mkdir()
    config = tmp_path / "acp" / "tether.toml"
    config.parent.mkdir()
    config.write_text(f'[agents.coder]\nacp = {json.dumps(fake_agent("normal"))}\nworkspace = "{workspace}"\n')
    missing = tmp_path / "missing" / "tether.toml"
    missing.parent.mkdir()
    missing.write_text('[agents.coder]\nacp = ["no-such-acp-agent"]\n')
    lacking = fleet.start("--config", str(missing))
    assert "no command 'no-such-acp-agent'" in lacking.text(), lacking.text()[-2000:]
    run_id = fleet.submit("coder", "--config", str(config), "--prompt", "write the file")
    fleet.start("--config", str(config))
    wait_for(lambda: isinstance(store.load(run_id).interruption, NeedsApproval), "the agent to ask", 60)
    approved = fleet.tether("approve", run_id, "--store", fleet.url, "--as", "alice")
    assert approved.returncode == 0, approved.stderr
    wait_for(lambda: _ended(store, run_id), "the run to end", 60)
    state = store.load(run_id)
    assert state.status is Status.COMPLETED, state.error
    assert (workspace / "out.txt").exists()
    assert [d.by for d in state.approvals.values()] == ["alice"]
    kinds = [r["kind"] for r in _trace(store, run_id)]
    assert "agent_session" in kinds and "file_write" in kinds


# ---- --concurrency is the worker's own, across its queues (issue 27, item 5) ------------------

SLEEPY_TOOLS = '''
import time


def list_files() -> str:
    """List the files in the folder."""
    time.sleep(2.0)
    return "errors.log"


def read_file(path: str) -> str:
    """Read a file."""
    return "ERROR disk full on /var (3 times)"
'''


def _agent_file(tmp_path: Path, base: str, agents: dict[str, tuple[str, str]]) -> tuple[Path, Path]:
    """An agent file of ``plan`` agents, each {name: (module, its source)}, and the folder of
    their modules (for the workers' PYTHONPATH)."""
    modules = tmp_path / "agent-modules"
    modules.mkdir()
    config = tmp_path / "agents" / "tether.toml"
    (config.parent / "ws").mkdir(parents=True)
    text = ""
    for name, (module, source) in agents.items():
        (modules / f"{module}.py").write_text(source)
        text += textwrap.dedent(f"""
            [agents.{name}]
            model = "plan"
            base_url = "{base}/{name}/v1"
            workspace = "./ws"
            tools = ["{module}:list_files", "{module}:read_file"]
        """)
    config.write_text(text)
    return config, modules


def test_concurrency_is_each_workers_own_across_its_queues(fleet: Fleet, store: PgStore, provider,
                                                           tmp_path: Path, monkeypatch):
    """Two workers on the demo queue at --concurrency 1 and 2 (the one with 2 started last,
    which once set the queue's limit for both), the second also on an agent's queue of its
    own: sampled from the queue view and the owners while ten slow runs go through, the
    first never drives more than 1 run, the second never more than 2 in all, and each
    reaches its limit."""
    from tether.agents.config import load_config

    base, _ = provider
    config, modules = _agent_file(tmp_path, base, {"sleepy": ("wsleepy", SLEEPY_TOOLS)})
    monkeypatch.syspath_prepend(str(modules))
    runs = [submit(fleet.url, Submission("slow", base_url=f"{base}/cc{i}/v1", workspace=tmp_path / "ws"),
                   agent_sets=(DEMO,))[0].run_id for i in range(6)]
    agents = load_config(config)
    runs += [submit(fleet.url, Submission("sleepy", "what went wrong?"), config=agents)[0].run_id for _ in range(4)]
    one = fleet.start("--concurrency", "1")
    two = fleet.start("--concurrency", "2", "--config", str(config), pythonpath=[str(modules)])
    limits = {one.executor_id: 1, two.executor_id: 2}
    most = dict.fromkeys(limits, 0)
    most_owned = dict.fromkeys(limits, 0)
    queues_of_two: set[str] = set()

    def sample() -> bool:
        view = queue_view(store)
        held = {e: [r for r, x in view.executors.items() if x == e] for e in limits}
        owned = {e: 0 for e in limits}
        for owner in store.owners(runs).values():
            if owner is not None and owner.alive and owner.command:
                executor = owner.command.split()[-1]
                if executor in owned:
                    owned[executor] += 1
        for e in limits:
            most[e] = max(most[e], len(held[e]))
            most_owned[e] = max(most_owned[e], owned[e])
        queues_of_two.update("sleepy" if store.load(r).agent.name == "sleepy" else "demo" for r in held[two.executor_id])
        assert all(len(held[e]) <= limits[e] for e in limits), f"a worker drove more than its --concurrency: {held}"
        assert all(owned[e] <= limits[e] for e in limits), f"a worker owned more runs than its --concurrency: {owned}"
        return all(_ended(store, r) for r in runs)

    wait_for(sample, "the ten runs to end", 120, 0.05)
    assert all(store.load(r).status is Status.COMPLETED for r in runs)
    assert most == limits, f"each worker reaches its own limit, no more: {most}"
    assert most_owned[two.executor_id] == 2 and queues_of_two == {"demo", "sleepy"}
    view = queue_view(store)
    assert (view.workers[one.executor_id].concurrency, view.workers[two.executor_id].concurrency) == (1, 2)


# ---- recoveries that give up (issue 27, item 4) ----------------------------------------------

KILLER_TOOLS = '''
import os
import signal


def list_files() -> str:
    """List the files in the folder."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "never"


def read_file(path: str) -> str:
    """Read a file."""
    return "nothing to see"
'''


def test_a_run_that_kills_every_worker_that_takes_it_is_parked_as_failed(fleet: Fleet, store: PgStore, provider,
                                                                         tmp_path: Path, pg_url: str, monkeypatch):
    """Its tool SIGKILLs the worker. With three workers kept alive (a killed one is replaced,
    as a service manager would), the run is recovered twice (--max-recoveries 2), each time
    driven on its own, and at the third death it is parked as failed in words that name each
    dead worker and when; its workflow is cancelled, no worker takes it again, the runs that
    shared a worker with it when it struck finish, and the fleet goes on with new runs."""
    from tether.agents.config import load_config

    base, counter = provider
    config, modules = _agent_file(tmp_path, base, {"crasher": ("wkill", KILLER_TOOLS),
                                                   "sleepy": ("wsleepy", SLEEPY_TOOLS.replace("2.0", "8.0"))})
    monkeypatch.syspath_prepend(str(modules))
    agents = load_config(config)
    args = ("--concurrency", "2", "--max-recoveries", "2", "--config", str(config))

    def alive() -> list:
        return [w for w in fleet.workers if w.process.poll() is None]

    def top_up() -> None:
        while len(alive()) < 3:
            fleet.start(*args, pythonpath=[str(modules)])

    top_up()
    # Five runs in an 8 s tool on three workers of two slots: the one slot left is beside one.
    bystanders = [submit(pg_url, Submission("sleepy", "what went wrong?"), config=agents)[0].run_id for _ in range(5)]
    wait_for(lambda: sum(1 for o in store.owners(bystanders).values() if o is not None and o.alive) == 5,
             "the workers to take the five runs", 30)
    killer = submit(pg_url, Submission("crasher", "list the files"), config=agents)[0].run_id

    def parked() -> bool:
        top_up()
        return store.load(killer).status is Status.FAILED

    wait_for(parked, "the run to be parked as failed", 150, 0.2)
    state = store.load(killer)
    dead = [w for w in fleet.workers if w.process.poll() == -9]
    assert len(dead) == 3, [w.process.returncode for w in fleet.workers]
    assert GAVE_UP in state.error and "after 2 recoveries" in state.error, state.error
    for w in dead:  # each attempt's worker, and when it was last seen alive
        assert f"worker {w.executor_id} (pid {w.pid} on " in state.error, state.error
    assert state.error.count(" UTC") == 3 and state.exit_code == 1
    trace = _trace(store, killer)
    assert sorted(r["pid"] for r in trace if r["kind"] == "run_started") == sorted(w.pid for w in dead)
    notes = [r["text"] for r in trace if r["kind"] == "worker_note"]
    assert len(notes) == 3 and "recovery 1 of at most 2" in notes[0] and "recovery 2 of at most 2" in notes[1]
    assert notes[-1] == state.error and trace[-1]["kind"] == "run_stopped" and trace[-1]["status"] == "failed"
    assert counter.requests["crasher"] == 1, "a recovery asked the model again"
    # The worker cancels the run's workflow just after it saves the run failed (recovery._park).
    wait_for(lambda: _workflow_status(store, killer) == "CANCELLED", "the run's workflow to be cancelled", 30)
    with store._conn() as conn:
        rows = conn.execute("SELECT executor_id, parked FROM tether.recoveries WHERE run_id = %s", (killer,)).fetchall()
    assert sorted(e for e, _ in rows) == sorted(w.executor_id for w in dead) and sum(p for _, p in rows) == 1

    # No worker takes it again, and none loops on it: the trace and the fleet stay as they are.
    seen, survivors = len(trace), alive()
    time.sleep(worker.SILENT_S + 2 * worker.SUPERVISE_S)
    assert len(_trace(store, killer)) == seen and store.load(killer).status is Status.FAILED
    assert alive() == survivors and len(survivors) == 3
    view = queue_view(store)
    assert killer not in view.executors and killer not in view.queued
    # The runs that shared a worker with it when it struck finish, and so does a new one.
    wait_for(lambda: all(_ended(store, r) for r in bystanders), "the other runs to end", 120)
    assert all(store.load(r).status is Status.COMPLETED for r in bystanders)
    struck = [r for r in bystanders if any("died or was lost" in n["text"] for n in _trace(store, r)
                                           if n["kind"] == "worker_note")]
    assert struck, "no run shared a worker with the killer: the test proved less than it says"
    after = fleet.submit("plan", "--base-url", f"{base}/after-park/v1")
    wait_for(lambda: _ended(store, after), "a new run to end", 60)
    assert store.load(after).status is Status.COMPLETED
