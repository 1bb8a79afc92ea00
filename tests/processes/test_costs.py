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

from tether.vocab.state import AgentRef, Pricing, RunState, Status
from tether.store.costs import CostQuery, aggregate, dearest_of
from tether.store.files.store import RunStore
from tether.store.operator import operator_name
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
    for by in ("agent", "model", "source", "day", "operator"):
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


def test_spend_is_grouped_by_who_started_each_run_and_runs_from_before_are_unknown(
        store: Store, monkeypatch: pytest.MonkeyPatch):
    """``--by operator``: the account that made each run (the OS account on the file store, the
    database role on PostgreSQL; a login's account when one is given), with the ``--as`` name
    kept beside it; a run made before Tether recorded it is (unknown)."""
    fleet(store)  # made here: by this process's account
    account = store.account()
    state = RunState(run_id="web1", model="gpt-4o", cost_usd=2.0, prompt_tokens=10, completion_tokens=1,
                     status=Status.COMPLETED, operator="ana", operator_name="Ana Lima",
                     messages=[{"role": "user", "content": "go"}])
    state.created_at = state.updated_at = T0
    store.create(state)
    # A run made by an earlier Tether, which recorded nobody:
    monkeypatch.setattr(f"{type(store).__module__}.mark_starter", lambda state, account: None)
    made(store, "old1", agent="triage", model="gpt-4o", cost=0.30, tokens=(100, 10), at=T0)
    monkeypatch.undo()

    loaded = store.load("a1")
    assert (loaded.operator, loaded.operator_name) == (account, operator_name())
    assert store.load("web1").operator_name == "Ana Lima" and store.load("old1").operator is None
    rows = store.costs(CostQuery("operator"))
    assert [(r.group, r.runs, round(r.cost_usd, 6), r.dearest_run) for r in rows] == [
        (account, 5, 6.5, "b1"), ("ana", 1, 2.0, "web1"), ("(unknown)", 1, 0.3, "old1")]
    assert [r.to_dict() for r in rows] == [r.to_dict() for r in aggregate(store.summaries(), CostQuery("operator"))]

    out = cli_here("costs", "--by", "operator", "--store", spec(store))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:2] == ["operator", "runs"]
    assert lines[1].split()[:3] == [account, "5", "≥$6.5000"] and lines[3].split()[:3] == ["(unknown)", "1", "$0.3000"]
    as_json = json.loads(cli_here("costs", "--by", "operator", "--json", "--store", spec(store)).stdout)
    assert as_json["by"] == "operator"
    assert [(g["group"], g["runs"], g["unknown_runs"]) for g in as_json["groups"]] == [
        (account, 5, 1), ("ana", 1, 0), ("(unknown)", 1, 0)]
    rows = list(csv.reader(io.StringIO(cli_here("costs", "--by", "operator", "--csv", "--store", spec(store)).stdout)))
    assert rows[0][:2] == ["operator", "runs"] and [(r[0], r[1]) for r in rows[1:]] == [
        (account, "5"), ("ana", "1"), ("(unknown)", "1")]


def test_tether_run_records_who_started_it_and_the_name_given_with_as(store: Store, tmp_path: Path):
    out = cli_here("run", "plan", "--run-id", "mine", "--as", "ana", "--store", spec(store),
                   "--workspace", str(tmp_path / "ws"))
    assert out.returncode == 0, out.stderr
    state = store.load("mine")
    assert (state.operator, state.operator_name) == (store.account(), "ana")
    shown = json.loads(cli_here("show", "mine", "--json", "--store", spec(store)).stdout)
    assert (shown["operator"], shown["operator_name"]) == (store.account(), "ana")


def test_an_earlier_tethers_runs_table_gets_the_columns_and_its_runs_group_as_unknown(pg_url: str):
    """A PostgreSQL store made before runs recorded who started them (and before the cost
    columns): the operator's role adds the columns when it connects, reading them from the
    summaries already there; the earlier runs group as (unknown)."""
    from tether.store.postgres.schema import RUN_COLUMNS
    from tether.store.postgres.store import PgStore

    old = PgStore(pg_url)
    try:
        with old._conn() as conn:  # noqa: SLF001 - the table as an earlier Tether made it, with one of its runs
            conn.execute(old.q("TRUNCATE " + ", ".join(f"{{s}}.{t}" for t in TABLES)))
        fleet(old)
        with old._conn() as conn:  # noqa: SLF001
            conn.execute(old.q("UPDATE {s}.runs SET summary = (summary::jsonb - 'operator')::json WHERE run_id = 'a1'"))
            conn.execute(old.q("ALTER TABLE {s}.runs " + ", ".join(f"DROP COLUMN {c}" for c in RUN_COLUMNS)))
    finally:
        old.close()
    store = PgStore(pg_url)
    try:
        rows = store.costs(CostQuery("operator"))
        assert [(r.group, r.runs) for r in rows] == [(store.account(), 4), ("(unknown)", 1)]
        assert [r.to_dict() for r in store.costs(CostQuery("agent"))] == \
            [r.to_dict() for r in aggregate(store.summaries(), CostQuery("agent"))]
    finally:
        store.close()


def _columns(pg: object) -> tuple[dict[str, tuple[object, ...]], dict[str, tuple[object, ...]], dict[str, str]]:
    """Each run's cost columns as stored, the same read from its summary by
    :data:`RUN_COLUMNS`'s expressions, and whether each column is generated."""
    from tether.store.postgres.schema import RUN_COLUMNS

    names = ", ".join(RUN_COLUMNS)
    read = ", ".join(expression for _, expression in RUN_COLUMNS.values())
    with pg._conn() as conn:  # type: ignore[attr-defined]  # noqa: SLF001 - the table itself
        stored = {r[0]: r[1:] for r in conn.execute(pg.q(f"SELECT run_id, {names} FROM {{s}}.runs"))}  # type: ignore[attr-defined]
        expected = {r[0]: r[1:] for r in conn.execute(pg.q(f"SELECT run_id, {read} FROM {{s}}.runs"))}  # type: ignore[attr-defined]
        generated = dict(conn.execute("SELECT attname, attgenerated FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                                      "AND attname = ANY(%s)", (f"{pg.schema}.runs", list(RUN_COLUMNS))).fetchall())  # type: ignore[attr-defined]
    return stored, expected, generated


def test_a_save_writes_the_cost_columns_its_summary_says(pg_url: str):
    """``tether costs`` reads columns a save writes beside the summary: for runs of every
    kind (children, no price, no agent, made and then saved), each column is what the summary
    says, read by the same expression a store that lacked the column is filled with."""
    from tether.store.postgres.store import PgStore

    pg = PgStore(pg_url)
    try:
        with pg._conn() as conn:  # noqa: SLF001
            conn.execute(pg.q("TRUNCATE " + ", ".join(f"{{s}}.{t}" for t in TABLES)))
        fleet(pg)
        pg.create(RunState(run_id="bare", model="m", messages=[{"role": "user", "content": "go"}]))
        state, handle = pg.open("a1")
        try:
            state.cost_usd, state.prompt_tokens, state.operator = 2.5, 4321, "ana"
            handle.save(state)
        finally:
            handle.release()
        stored, expected, generated = _columns(pg)
        assert len(stored) == 6 and stored == expected
        assert stored["a1"][4] == pytest.approx(2.5) and stored["a1"][5] == 4321.0 and stored["a1"][0] == "ana"
        assert stored["c1"][7] is True and stored["b1"][4] == pytest.approx(4.0)
        assert set(generated.values()) == {""}  # plain columns: the database parses no summary on a save
    finally:
        pg.close()


def test_a_store_whose_cost_columns_are_generated_gets_them_plain_with_their_values(pg_url: str):
    """The columns were first generated from the summary on every write; a store made so gets
    them plain when the operator's role connects, each run's values kept, and saves after it
    keep them current."""
    from tether.store.postgres.schema import RUN_COLUMNS
    from tether.store.postgres.store import PgStore

    old = PgStore(pg_url)
    try:
        with old._conn() as conn:  # noqa: SLF001 - the table as the Tether before made it, with its runs
            conn.execute(old.q("TRUNCATE " + ", ".join(f"{{s}}.{t}" for t in TABLES)))
        fleet(old)
        with old._conn() as conn:  # noqa: SLF001
            conn.execute(old.q("ALTER TABLE {s}.runs " + ", ".join(f"DROP COLUMN {c}" for c in RUN_COLUMNS)))
            conn.execute(old.q("ALTER TABLE {s}.runs " + ", ".join(
                f"ADD COLUMN {name} {kind} GENERATED ALWAYS AS ({expression}) STORED"
                for name, (kind, expression) in RUN_COLUMNS.items())))
        assert set(_columns(old)[2].values()) == {"s"}
    finally:
        old.close()
    store = PgStore(pg_url)
    try:
        stored, expected, generated = _columns(store)
        assert set(generated.values()) == {""} and stored == expected and len(stored) == 5
        state, handle = store.open("a2")
        try:
            state.cost_usd = 9.0
            handle.save(state)
        finally:
            handle.release()
        assert [(r.group, round(r.cost_usd, 6)) for r in store.costs(CostQuery("agent"))][0] == ("triage", 9.5)
        assert _columns(store)[0] == _columns(store)[1]
    finally:
        store.close()
