"""Fleet budgets (issue 41, item 4), on both stores: a budget across runs stops a running run
before its next model call as a budget exit (``stop``; ``refuse`` lets it go on), refuses a new run in words (Tether's own and one a
program reports through Harness.track), holds when two runs race over its last dollars (spend
beyond it at most one model call per live run), and ``tether budgets`` lists each one's spend."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.agents.config import load_config
from tether.approvals.budgets import BudgetRefused
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.vocab.state import Limits, MaxBudget, NeedsApproval, Pricing, Status
from tether.store.files.store import RunStore
from tether.store.protocol import Store
from tests.support import TABLES, cli_here


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "file":
        yield RunStore(tmp_path / "runs")
        return
    from tether.store.postgres.store import PgStore

    pg = PgStore(request.getfixturevalue("pg_url"))
    with pg._conn() as conn:
        conn.execute(pg.q("TRUNCATE " + ", ".join(f"{{s}}.{t}" for t in TABLES)))
        conn.execute(pg.q("DROP TABLE IF EXISTS {s}.budgets"))
    try:
        yield pg
    finally:
        pg.close()


def spec(store: Store) -> str:
    return str(store.root) if isinstance(store, RunStore) else store.url  # type: ignore[attr-defined]


def budget_file(tmp_path: Path, usd: float, on_exceed: str = "stop") -> Path:
    path = tmp_path / "tether.toml"
    path.write_text(f'[budgets.runaway-daily]\nagent = "runaway"\nper = "day"\nusd = {usd}\n'
                    f'on_exceed = "{on_exceed}"\nwarn_at = 0.5\n')
    return path


def harness(store: Store, tmp_path: Path, config: Path) -> Harness:
    return Harness(store=store, workspace=tmp_path / "ws", config=load_config(config), agent_sets=(DEMO,))


def last_turn_bound(state) -> float:
    """What the run's last model call could have cost: its prompt and every token it may write."""
    return Pricing().cost(state.per_turn_prompt_tokens[-1], state.limits.max_tokens)


async def budget_call(store: Store, run_id: str, *, other_than: str | None = None) -> NeedsApproval:
    """The budget call the run waits on, once it waits (read from the store, as a console does)."""
    for _ in range(1200):
        state = store.load(run_id)
        waiting = state.interruption
        if isinstance(waiting, NeedsApproval) and waiting.tool_name == "budget" and waiting.call_id != other_than:
            return waiting
        assert state.status in (Status.RUNNING, Status.INTERRUPTED), (state.status, state.interruption)
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never waited on its budget call")


async def test_a_spent_budget_stops_the_run_before_its_next_call_then_refuses_new_runs(store: Store, tmp_path: Path):
    config = budget_file(tmp_path, 0.02)
    async with harness(store, tmp_path, config) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None)).run_id)
        state = out.state
        assert state.status is Status.BUDGET_EXCEEDED and state.interruption == MaxBudget()
        (stopped,) = [r for r in store.read_trace(state.run_id) if r["kind"] == "run_stopped"]
        assert stopped["reason"].startswith("budget runaway-daily ($0.02/day, agent runaway) reached: $0.0")
        assert stopped["reason"].endswith("the run stopped before its next model call")
        assert state.cost_usd >= 0.02 and state.cost_usd - 0.02 <= last_turn_bound(state)
        with pytest.raises(BudgetRefused, match=r"budget runaway-daily \(\$0\.02/day, agent runaway\) reached: "
                                                r"\$0\.0\d spent this day: no new run of agent runaway"):
            h.new_run("runaway")
        with pytest.raises(BudgetRefused, match="no new run of agent runaway"):
            async with h.track("runaway", "a program's run", model="gpt-4o-mini"):
                raise AssertionError("a refused run's block never runs")
        other = await h.run(h.new_run("plan").run_id)  # another agent is not in the budget's scope
        assert other.state.status is Status.COMPLETED
    assert len(store.summaries()) == 2  # nothing was made for the refused runs
    listed = json.loads(cli_here("budgets", "--json", "--config", str(config), "--store", spec(store)).stdout)
    assert [(r["name"], r["state"], r["usd"]) for r in listed] == [("runaway-daily", "reached", 0.02)]
    assert listed[0]["spent_usd"] >= 0.02
    said = cli_here("budgets", "--config", str(config), "--store", spec(store)).stdout
    assert said.startswith("runaway-daily: $0.0") and "of $0.02 this day" in said and "reached" in said
    refused = cli_here("run", "runaway", "--config", str(config), "--store", spec(store))
    assert refused.returncode == 2 and "no new run of agent runaway" in refused.stderr


async def test_a_spent_refuse_budget_lets_the_running_run_go_on_and_refuses_new_runs(store: Store, tmp_path: Path):
    """``refuse`` is not ``stop``: the run that spends it goes on (to its own budget_usd, here),
    still charged to the budget; only a new run in its scope is refused."""
    config = budget_file(tmp_path, 0.02, "refuse")
    async with harness(store, tmp_path, config) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None, budget_usd=0.06)).run_id)
        state = out.state
        assert state.status is Status.BUDGET_EXCEEDED and state.cost_usd >= 0.06  # its own budget, well past $0.02
        (stopped,) = [r for r in store.read_trace(state.run_id) if r["kind"] == "run_stopped"]
        assert "runaway-daily" not in stopped["reason"]
        levels = [r["level"] for r in store.read_trace(state.run_id) if r["kind"] == "fleet_budget"]
        assert levels == [50, 100]  # it was told, not stopped
        with pytest.raises(BudgetRefused, match=r"budget runaway-daily \(\$0\.02/day, agent runaway\) reached: "
                                                r"\$0\.0\d spent this day: no new run of agent runaway"):
            h.new_run("runaway")
    listed = json.loads(cli_here("budgets", "--json", "--config", str(config), "--store", spec(store)).stdout)
    assert listed[0]["state"] == "reached" and listed[0]["spent_usd"] == pytest.approx(state.cost_usd)
    assert len(store.summaries()) == 1


async def test_a_programs_run_goes_on_past_a_refuse_budget_and_a_new_one_is_refused(store: Store, tmp_path: Path):
    path = tmp_path / "tether.toml"
    path.write_text('[budgets.bots]\nsource = "pydantic-ai"\nusd = 0.01\non_exceed = "refuse"\n')
    async with Harness(store=store, workspace=tmp_path / "ws", config=load_config(path), agent_sets=(DEMO,)) as h:
        async with h.track("bot", "triage", source="pydantic-ai", model="gpt-4o-mini") as run:
            await run.usage(100_000, 10_000)  # $0.021: the budget is spent, the program goes on
            await run.usage(100_000, 10_000)
            await run.answer("done")
        state = store.load(run.run_id)
        assert state.status is Status.COMPLETED and state.cost_usd > 0.04
        with pytest.raises(BudgetRefused, match=r"budget bots \(\$0\.01/day, source pydantic-ai\) reached"):
            async with h.track("bot2", "more", source="pydantic-ai", model="gpt-4o-mini"):
                raise AssertionError("a refused run's block never runs")


async def test_two_runs_racing_over_the_last_dollars_both_stop_within_one_call_each(store: Store, tmp_path: Path):
    config = budget_file(tmp_path, 0.05)
    # Two harnesses: two processes' worth of runs, each with its own record of what it charged.
    async with harness(store, tmp_path, config) as one, harness(store, tmp_path, config) as two:
        a, b = one.new_run("runaway", limits=Limits(max_turns=None)), two.new_run("runaway", limits=Limits(max_turns=None))
        done = await asyncio.gather(one.run(a.run_id), two.run(b.run_id))
    states = [d.state for d in done]
    assert all(s.status is Status.BUDGET_EXCEEDED for s in states)
    spent = sum(s.cost_usd for s in states)
    assert spent >= 0.05 and spent - 0.05 <= sum(last_turn_bound(s) for s in states)
    assert all(s.turns >= 1 for s in states)


async def test_a_budget_is_told_at_warn_at_and_at_100_percent_once_a_period(store: Store, tmp_path: Path):
    from tether.notify.notices import Detector

    config = budget_file(tmp_path, 0.02)  # warn_at = 0.5
    async with harness(store, tmp_path, config) as one, harness(store, tmp_path, config) as two:
        first = await one.run(one.new_run("runaway", limits=Limits(max_turns=None)).run_id)
        again = await two.run(two.new_run("plan").run_id)  # out of scope: says nothing of the budget
    assert first.state.status is Status.BUDGET_EXCEEDED and again.state.status is Status.COMPLETED
    detector = Detector(store)
    notices = [n for rid in (first.state.run_id, again.state.run_id)
               for n in detector.records(rid, list(store.read_trace(rid))) if n.event == "budget"]
    period = "runaway-daily@" + time.strftime("%Y-%m-%d", time.gmtime())
    assert [(n.level, n.key) for n in notices] == [(50, f"fleet:{period}:50"), (100, f"fleet:{period}:100")]
    assert notices[1].words.startswith("fleet budget runaway-daily (agent runaway): $0.0")
    assert notices[1].words.endswith("of $0.02 spent this day (100 %)") and notices[1].budget_usd == 0.02


async def test_a_programs_run_through_harness_track_stops_at_the_report_that_spends_the_budget(
        store: Store, tmp_path: Path):
    from tether.run.tracked import LimitReached

    path = tmp_path / "tether.toml"
    path.write_text('[budgets.bots]\nsource = "pydantic-ai"\nusd = 0.01\n')
    async with Harness(store=store, workspace=tmp_path / "ws", config=load_config(path), agent_sets=(DEMO,)) as h:
        async with h.track("bot", "triage", source="pydantic-ai", model="gpt-4o-mini") as run:
            await run.usage(1000, 100)  # $0.00021: under the budget
            with pytest.raises(LimitReached) as raised:
                await run.usage(100_000, 10_000)  # $0.021 more: the fleet's budget is spent
            assert raised.value.status is Status.BUDGET_EXCEEDED
        state = store.load(run.run_id)
        assert state.status is Status.BUDGET_EXCEEDED and state.interruption == MaxBudget()
        with pytest.raises(BudgetRefused, match=r"budget bots \(\$0\.01/day, source pydantic-ai\) reached"):
            async with h.track("bot2", "more", source="pydantic-ai", model="gpt-4o-mini"):
                raise AssertionError("a refused run's block never runs")
        async with h.track("other", "not in scope", source="openai-agents", model="gpt-4o-mini") as other:
            await other.usage(10, 1)
            await other.answer("fine")


async def test_a_programs_usage_report_that_spends_an_ask_budget_waits_on_the_budget_call(store: Store,
                                                                                          tmp_path: Path):
    """``await run.usage(...)`` holds the program, as ``run.approval`` does: approved (from
    another process), it returns and the program goes on; rejected, it raises LimitReached."""
    from tether.run.tracked import LimitReached

    path = tmp_path / "tether.toml"
    path.write_text('[budgets.bots]\nsource = "pydantic-ai"\nusd = 0.01\non_exceed = "ask"\n')
    async with Harness(store=store, workspace=tmp_path / "ws", config=load_config(path), agent_sets=(DEMO,)) as h, \
            Harness(store=store, workspace=tmp_path / "ws", config=load_config(path), agent_sets=(DEMO,)) as other:
        async with h.track("bot", "triage", source="pydantic-ai", model="gpt-4o-mini") as run:
            await run.usage(1000, 100)  # $0.00021: under the budget
            held = asyncio.create_task(run.usage(100_000, 10_000))  # $0.021 more: spent, so the report waits
            first = await budget_call(store, run.run_id)
            assert first.why.startswith("budget bots ($0.01/day) reached: $0.02 spent; approve to go on")
            assert not held.done()
            approved = await other.decide(run.run_id, "approve", args='{"usd": 0.05}', by="bob")
            assert approved.ok, approved.words
            await held  # the program goes on
            await run.usage(10, 1)  # within what was approved: not held
            past = asyncio.create_task(run.usage(300_000, 10_000))  # $0.051 more: past the lift, it waits again
            await budget_call(store, run.run_id, other_than=first.call_id)
            rejected = await other.decide(run.run_id, "reject", "enough for today", by="carol")
            assert rejected.ok, rejected.words
            with pytest.raises(LimitReached) as raised:
                await past
            assert raised.value.status is Status.BUDGET_EXCEEDED
            assert raised.value.reason == ("budget bots reached: going on past it was declined by carol (enough for "
                                           "today); the run ended as a budget exit")
        state = store.load(run.run_id)
        assert state.status is Status.BUDGET_EXCEEDED and state.interruption == MaxBudget() and state.turns == 4
        assert [(d.verdict, d.by) for d in state.approvals.values()] == [("approved", "bob"), ("rejected", "carol")]


async def test_a_report_of_what_already_happened_is_not_held_by_an_ask_budget(store: Store, tmp_path: Path):
    """Claude Code's hooks report the model calls after the fact (and must answer Claude Code
    within its hook's timeout): such a report that spends an ``ask`` budget ends the run."""
    from tether.run.tracked import LimitReached

    path = tmp_path / "tether.toml"
    path.write_text('[budgets.hooks]\nsource = "claude-code"\nusd = 0.01\non_exceed = "ask"\n')
    async with Harness(store=store, workspace=tmp_path / "ws", config=load_config(path), agent_sets=(DEMO,)) as h:
        async with h.track("claude", "a session", source="claude-code", model="gpt-4o-mini") as run:
            with run.after_the_fact(), pytest.raises(LimitReached) as raised:
                await run.usage(100_000, 10_000)
    assert raised.value.reason.endswith("the run stopped (a report of what already happened is not held)")
    assert store.load(run.run_id).status is Status.BUDGET_EXCEEDED


async def test_every_call_is_charged_a_programs_first_report_and_a_runs_last_call_too(store: Store, tmp_path: Path):
    """The counter holds what the runs cost, whole: what each run has charged is saved with it,
    so a program's first usage report counts, and a run's last model call (no check after it)
    is charged as the run ends."""
    path = tmp_path / "tether.toml"
    path.write_text('[budgets.everything]\nusd = 5\n')
    async with Harness(store=store, workspace=tmp_path / "ws", config=load_config(path), agent_sets=(DEMO,)) as h:
        done = (await h.run(h.new_run("plan").run_id)).state
        async with h.track("bot", "triage", source="pydantic-ai", model="gpt-4o-mini") as run:
            await run.usage(1000, 100)
            await run.answer("triaged")
        program = store.load(run.run_id)
    assert done.status is Status.COMPLETED and done.cost_usd > 0 and program.cost_usd > 0
    (listed,) = json.loads(cli_here("budgets", "--json", "--config", str(path), "--store", spec(store)).stdout)
    assert listed["spent_usd"] == pytest.approx(done.cost_usd + program.cost_usd)


async def test_the_deadline_of_a_programs_budget_call_rejects_it(store: Store, tmp_path: Path):
    from tether.vocab.rules import Rule
    from tether.run.tracked import LimitReached

    path = tmp_path / "tether.toml"
    path.write_text('[budgets.bots]\nsource = "pydantic-ai"\nusd = 0.01\non_exceed = "ask"\n')
    store.rule_add(Rule("ask", "budget", "budgets wait a second", "alice", deadline_s=1, on_deadline="reject"))
    async with Harness(store=store, workspace=tmp_path / "ws", config=load_config(path), agent_sets=(DEMO,)) as h:
        async with h.track("bot", "triage", source="pydantic-ai", model="gpt-4o-mini") as run:
            with pytest.raises(LimitReached) as raised:
                await run.usage(100_000, 10_000)  # spent: it waits, until the deadline rejects the call
    assert raised.value.reason == ("budget bots reached: going on past it was declined by deadline (no decision "
                                   "within 1 s); the run ended as a budget exit")
    (decision,) = store.load(run.run_id).approvals.values()
    assert (decision.tool, decision.verdict, decision.by) == ("budget", "rejected", "deadline")
