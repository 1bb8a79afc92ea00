"""``tether costs`` at scale (issue 41: 100,000 runs in ≤ 1 s on either store): ``Store.costs``
grouped by agent, model, source, day and operator over 100,000 finished runs, beside the baseline in the
same process, ``Store.summaries()`` with the same grouping done in Python (what a command that
loads every run's summary would pay), and ``tether costs`` as a subprocess (its start included).

The runs are made with the store's own ``create`` (a journal and an index row each on the file
store; a row on PostgreSQL), of six agents and four models over the last 30 days, one in twenty
with no price. PostgreSQL (tests/pg.py, fsync off as the tests run it) when its binaries are there.

Run: ``.venv/bin/python -m tests.benchmarks.bench_costs [--runs N]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tether.vocab.state import AgentRef, Pricing, RunState, Status
from tether.store.costs import CostQuery, aggregate
from tether.store.files.store import RunStore
from tether.store.protocol import Store
from tests import pg
from tests.benchmarks import peers

RUNS = 100_000
TARGET_S = 1.0
REPEATS = 5
AGENTS = ("ops", "qa", "deploy-bot", "research", "triage", "coder")
MODELS = ("gpt-4o-mini", "claude-sonnet-4-5", "gpt-4o", "my-finetune")
OPERATORS = ("ana", "bob", "carol", None)  # None: the store's own account
GROUPS = ("agent", "model", "source", "day", "operator")


def build(store: Store, runs: int) -> float:
    started = time.perf_counter()
    now = time.time()
    for i in range(runs):
        model = MODELS[i % len(MODELS)]
        unknown = i % 20 == 0
        state = RunState(run_id=f"run-{i:06d}", model=model, status=Status.COMPLETED, turns=3,
                         prompt_tokens=1000 + i % 777, completion_tokens=100 + i % 77,
                         cost_usd=0.0 if unknown else 0.001 * (i % 500),
                         pricing=Pricing(0.0, 0.0, source="unknown") if unknown else Pricing(source="genai-prices"),
                         agent=AgentRef(AGENTS[i % len(AGENTS)], "config", "bench"), operator=OPERATORS[i % 4],
                         messages=[{"role": "user", "content": f"task {i}"}])
        state.created_at = state.updated_at = now - 30 * 86400 + i * (30 * 86400 / runs)
        store.create(state)
    return time.perf_counter() - started


def _timed(fn) -> float:
    fn()  # warm: the page cache, the index's freshness pass
    samples = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def measure(store: Store, spec: str, runs: int) -> dict[str, float]:
    total = sum(r.runs for r in store.costs(CostQuery("agent")))
    assert total == runs, f"Store.costs counted {total} runs, not {runs}"
    out = {by: _timed(lambda by=by: store.costs(CostQuery(by))) for by in GROUPS}
    out["baseline"] = _timed(lambda: aggregate(store.summaries(), CostQuery("agent")))

    def cli() -> None:
        subprocess.run([sys.executable, "-m", "tether.tui.cli", "costs", "--by", "day", "--store", spec],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    out["cli"] = _timed(cli)
    return out


def report(title: str, f: dict[str, float]) -> None:
    base = f["baseline"]
    for by in GROUPS:
        verdict = "ok" if f[by] <= TARGET_S else "OVER"
        print(f"  {title}: Store.costs by {by:<8} {f[by] * 1000:7.0f} ms  ({f[by] / base:.2f}x the baseline)  "
              f"target ≤ {TARGET_S:g} s: {verdict}")
    print(f"  {title}: baseline, summaries() grouped in Python {base * 1000:7.0f} ms (1.00x)")
    print(f"  {title}: tether costs --by day, a new process      {f['cli'] * 1000:7.0f} ms", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_costs")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--only", choices=["file", "postgresql"])
    args = parser.parse_args(argv)
    peers.quiet_env()
    if args.only != "postgresql":
        with peers.scratch_dir("costs") as tmp:
            root = Path(tmp) / "runs"
            store = RunStore(root)
            built = build(store, args.runs)
            print(f"The file store: {args.runs:,} runs, made in {built:.1f} s through create", flush=True)
            report("file store", measure(store, str(root), args.runs))
    if args.only == "file":
        return
    try:
        server = pg.start()
    except pg.PgUnavailable as exc:
        print(f"postgresql: not measured ({exc})")
        return
    try:
        from tether.store.postgres.store import PgStore

        store = PgStore(server.url)
        built = build(store, args.runs)
        print(f"PostgreSQL: {args.runs:,} runs, made in {built:.1f} s through create", flush=True)
        report("postgresql", measure(store, server.url, args.runs))
        store.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
