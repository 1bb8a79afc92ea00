"""``tether costs`` and ``Store.costs`` (issue 41, item 2), on both stores: spend, tokens, runs,
cost per run and the dearest run per agent, model, source and day; a run nobody priced counted
in tokens and said so; the same answer as the summaries give, from one aggregate query."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.run.state import AgentRef, Pricing, RunState, Status
from tether.store.costs import CostQuery, aggregate, dearest_of
from tether.store.files.store import RunStore
from tether.store.protocol import Store
from tests.support import TABLES, cli_here

DAY = 86_400.0
T0 = 1_796_000_000.0  # 2026-11-30 (UTC), noon-ish


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "file":
        yield RunStore(tmp_path / "runs")
        return
    from tether.store.postgres.store import PgStore

    pg = PgStore(request.getfixturevalue("pg_url"))
    with pg._conn() as conn:
        conn.execute(pg.q("TRUNCATE " + ", ".join(f"{{s}}.{t}" for t in TABLES)))
    try:
        yield pg
    finally:
        pg.close()


def spec(store: Store) -> str:
    return str(store.root) if isinstance(store, RunStore) else store.url  # type: ignore[attr-defined]


def made(store: Store, run_id: str, *, agent: str, model: str, cost: float, tokens: tuple[int, int], at: float,
         program: str | None = None, price: str = "config", children: float = 0.0) -> None:
    state = RunState(run_id=run_id, model=model, cost_usd=cost + children, child_cost_usd=children,
                     prompt_tokens=tokens[0], completion_tokens=tokens[1], status=Status.COMPLETED,
                     pricing=Pricing(0.0, 0.0, source="unknown") if price == "unknown" else Pricing(source=price),
                     agent=AgentRef(name=agent, source="config", fingerprint="f",
                                    spec={"program": program} if program else {}),
                     messages=[{"role": "user", "content": "go"}])
    state.created_at = state.updated_at = at
    store.create(state)


def fleet(store: Store) -> None:
    made(store, "a1", agent="triage", model="gpt-4o-mini", cost=0.50, tokens=(1000, 100), at=T0)
    made(store, "a2", agent="triage", model="gpt-4o-mini", cost=1.25, tokens=(3000, 300), at=T0 + DAY)
    made(store, "b1", agent="coder", model="claude-sonnet-4-5", cost=4.00, tokens=(9000, 900), at=T0 + DAY,
         program="claude-code", children=0.75)
    made(store, "b2", agent="coder-child", model="claude-sonnet-4-5", cost=0.75, tokens=(500, 50), at=T0 + DAY)
    made(store, "c1", agent="local", model="my-finetune", cost=0.0, tokens=(7000, 700), at=T0 + 2 * DAY,
         price="unknown")


def test_spend_is_grouped_by_agent_model_source_and_day_the_same_as_the_summaries_say(store: Store):
    fleet(store)
    by_agent = store.costs(CostQuery("agent"))
    assert [(r.group, r.runs, round(r.cost_usd, 6)) for r in by_agent] == [
        ("coder", 1, 4.0), ("triage", 2, 1.75), ("coder-child", 1, 0.75), ("local", 1, 0.0)]
    triage = by_agent[1]
    assert (triage.prompt_tokens, triage.completion_tokens, triage.dearest_run) == (4000, 400, "a2")
    assert triage.dearest_usd == pytest.approx(1.25) and triage.per_run_usd == pytest.approx(0.875)
    assert by_agent[3].unknown_runs == 1 and by_agent[3].prompt_tokens == 7000  # counted in tokens, not dollars
    days = store.costs(CostQuery("day"))
    assert [(r.group, r.runs) for r in days] == [("2026-11-30", 1), ("2026-12-01", 3), ("2026-12-02", 1)]
    assert days[1].cost_usd == pytest.approx(6.0)  # a child's spend counted once, in its own run
    sources = {r.group: r.runs for r in store.costs(CostQuery("source"))}
    assert sources == {"tether": 4, "claude-code": 1}
    for by in ("agent", "model", "source", "day"):
        assert [r.to_dict() for r in store.costs(CostQuery(by))] == \
            [r.to_dict() for r in aggregate(store.summaries(), CostQuery(by))]
    window = store.costs(CostQuery("model", since=T0 + DAY / 2, until=T0 + 1.5 * DAY))
    assert [(r.group, r.runs) for r in window] == [("claude-sonnet-4-5", 2), ("gpt-4o-mini", 1)]


def test_the_dearest_runs_of_a_period_come_dearest_first_by_their_own_spend_and_no_more_than_asked(store: Store):
    fleet(store)
    # b1 spent 4.75 with its child's 0.75: its own 4.00 ranks it; the unpriced run comes last.
    assert [s.run_id for s in store.dearest(CostQuery())] == ["b1", "a2", "b2", "a1", "c1"]
    first = store.dearest(CostQuery(), limit=2)
    assert [(s.run_id, s.agent, s.model, s.status) for s in first] == [
        ("b1", "coder", "claude-sonnet-4-5", "completed"), ("a2", "triage", "gpt-4o-mini", "completed")]
    assert (first[0].prompt_tokens, first[0].completion_tokens) == (9000, 900)
    window = CostQuery(since=T0 + DAY / 2, until=T0 + 1.5 * DAY)
    assert [s.run_id for s in store.dearest(window)] == ["b1", "a2", "b2"]
    for query in (CostQuery(), window):
        assert [s.run_id for s in store.dearest(query, limit=3)] == \
            [s.run_id for s in dearest_of(store.summaries(), query, 3)]


def test_tether_costs_prints_each_group_and_says_what_it_could_not_price(store: Store):
    fleet(store)
    out = cli_here("costs", "--by", "model", "--store", spec(store))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:3] == ["model", "runs", "spend"]
    assert lines[1].startswith("claude-sonnet-4-5") and "$4.7500" in lines[1] and "b1 ($4.0000)" in lines[1]
    (unpriced,) = [line for line in lines if line.startswith("my-finetune")]
    assert unpriced.split()[1:4] == ["1", "unknown", "unknown"] and "$0" not in unpriced  # never a made-up $0
    assert "1 price unknown" in unpriced and lines[-2].split()[2] == "≥$6.5000"
    assert "1 run had no price (price unknown)" in out.stdout
    as_json = json.loads(cli_here("costs", "--by", "agent", "--json", "--store", spec(store)).stdout)
    assert as_json["by"] == "agent" and as_json["groups"][0]["group"] == "coder"
    rows = list(csv.reader(io.StringIO(cli_here("costs", "--by", "day", "--csv", "--store", spec(store)).stdout)))
    assert rows[0][:3] == ["day", "runs", "cost_usd"] and [r[0] for r in rows[1:]] == \
        ["2026-11-30", "2026-12-01", "2026-12-02"]
    bad = cli_here("costs", "--since", "last tuesday", "--store", spec(store))
    assert bad.returncode == 2 and "--since 'last tuesday' is neither a date nor a duration" in bad.stderr
