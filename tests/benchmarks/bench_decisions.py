"""The record of decisions at scale: ``tether decisions`` over 10,000 decisions (issue 25:
≤ 1 s), beside ``tether runs`` over the same store, measured in the same process.

The store is built with the store's own API, as the harness writes it: 2,500 runs of four
calls each, every call decided by its own save (create, open, a save per decision,
release), so each decision reaches the index (or PostgreSQL's table) the way a real one
does. The deciders, agents, verdicts and times vary (people, rules, an edit, a call two
people approve), over the last 30 days. Then, each a ``tether`` subprocess (interpreter
start included), the median of a few:

* ``tether decisions`` (all 10,000 lines), ``--json``, and a filtered one
  (``--by R3 --since 7d``);
* ``tether runs`` (2,500 lines), the baseline: the ratio says what listing decisions costs
  next to listing runs;
* file store only: ``tether decisions`` cold (no ``index.sqlite``: every journal replayed
  and the index rebuilt, decisions included).

PostgreSQL (tests/pg.py, fsync off as the tests run it) when its binaries are there.

Run: ``.venv/bin/python -m tests.benchmarks.bench_decisions [--decisions N]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tether.approvals import DecisionQuery
from tether.store.protocol import Store
from tether.store.spec import open_store
from tether.vocab.state import AgentRef, Decision, RunState, Status, args_hash
from tether.store.files.store import RunStore
from tests import pg
from tests.benchmarks import peers

DECISIONS = 10_000
PER_RUN = 4
TARGET_S = 1.0
REPEATS = 5
AGENTS = ("ops", "qa", "deploy-bot", "research")
DECIDERS = ("alice", "bob", "rule R3", "carol", "rule R7", "dan@build-host")
TOOLS = ("delete_file", "write_file", "run_shell", "deploy")


def _run(i: int, now: float) -> tuple[RunState, list[Decision]]:
    """Run ``i`` (of a few agents, over the last 30 days) and the decisions on its calls."""
    created = now - 30 * 86400 + i * (30 * 86400 / (DECISIONS / PER_RUN))
    calls, decisions = [], []
    for k in range(PER_RUN):
        call_id, tool = f"call_{k}", TOOLS[(i + k) % len(TOOLS)]
        args = json.dumps({"path": f"scratch/{i}/file-{k}.log", "force": k % 2 == 0})
        calls.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": tool, "arguments": args}}]})
        by = DECIDERS[(i * PER_RUN + k) % len(DECIDERS)]
        rule = by.split()[1] if by.startswith("rule ") else None
        two = k == 3 and i % 5 == 0
        decisions.append(Decision(
            call_id, "rejected" if (i + k) % 7 == 0 else "approved", args_hash(args), "as asked", by, tool=tool,
            ts=created + 60 * (k + 1), asked_at=created + 60 * k + 5, rule=rule,
            args=json.dumps({"path": f"scratch/{i}/only-this.log"}) if k == 2 and i % 9 == 0 else None,
            approvers=["alice", "bob"] if two else [], needed=2 if two else 1))
    state = RunState(run_id=f"run-{i:05d}", model="plan", created_at=created,
                     agent=AgentRef(AGENTS[i % len(AGENTS)], "config", "bench"),
                     messages=[{"role": "user", "content": f"tidy scratch/{i}"}, *calls])
    return state, decisions


def build(store: Store, decisions: int) -> float:
    """``decisions`` decisions on ``store``, written through its API; seconds it took."""
    started = time.perf_counter()
    now = time.time()
    for i in range(decisions // PER_RUN):
        state, decided = _run(i, now)
        store.create(state)
        state, handle = store.open(state.run_id)
        try:
            for decision in decided:
                state.approvals[decision.call_id] = decision
                handle.save(state)
            state.status = Status.COMPLETED
            handle.save(state)
        finally:
            handle.release()
    return time.perf_counter() - started


def _cli(store: str, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tether.tui.cli", *args, "--store", store], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def _median(store: str, repeats: int, *args: str) -> float:
    _cli(store, *args)  # warm: the page cache, the index's freshness pass
    return statistics.median(_cli(store, *args) for _ in range(repeats))


def _in_process(spec: str, repeats: int) -> tuple[float, float]:
    """``Store.decisions`` (every decision) and ``Store.summaries`` in this process: the
    commands' figures without the interpreter's start."""
    store = open_store(spec)
    try:
        store.decisions(DecisionQuery())
        out = []
        for call in (lambda: store.decisions(DecisionQuery()), store.summaries):
            samples = []
            for _ in range(repeats):
                started = time.perf_counter()
                call()
                samples.append(time.perf_counter() - started)
            out.append(statistics.median(samples))
        return out[0], out[1]
    finally:
        getattr(store, "close", lambda: None)()


def measure(store: str, repeats: int, decisions: int) -> dict[str, float]:
    listed = subprocess.run([sys.executable, "-m", "tether.tui.cli", "decisions", "--json", "--store", store],
                            capture_output=True, text=True, check=True)
    rows = len(json.loads(listed.stdout))
    assert rows == decisions, f"tether decisions listed {rows} decisions, not {decisions}"
    query, summaries = _in_process(store, repeats)
    return {"decisions": _median(store, repeats, "decisions"),
            "json": _median(store, repeats, "decisions", "--json"),
            "filtered": _median(store, repeats, "decisions", "--by", "R3", "--since", "7d"),
            "runs": _median(store, repeats, "runs"), "query": query, "summaries": summaries,
            "count": decisions}


def cold(root: Path) -> float:
    for suffix in ("", "-wal", "-shm"):
        (root / f"index.sqlite{suffix}").unlink(missing_ok=True)
    return _cli(str(root), "decisions")


def report(title: str, f: dict[str, float], repeats: int) -> list[tuple[str, str, str, str]]:
    ratio = f["decisions"] / f["runs"]
    rows = [(f"{title}: tether decisions, {f['count']:,.0f} lines (median of {repeats})", f"{f['decisions']:.2f} s",
             f"<= {TARGET_S:g} s", "met" if f["decisions"] <= TARGET_S else "MISSED"),
            (f"{title}: tether decisions --json", f"{f['json']:.2f} s", "", ""),
            (f"{title}: tether decisions --by R3 --since 7d", f"{f['filtered']:.2f} s", "", ""),
            (f"{title}: tether runs, same store (baseline)", f"{f['runs']:.2f} s", "",
             f"decisions/runs = {ratio:.2f}x"),
            (f"{title}: Store.decisions(), every decision, in-process", f"{f['query'] * 1000:.0f} ms", "",
             f"/ summaries() {f['summaries'] * 1000:.0f} ms = {f['query'] / f['summaries']:.2f}x")]
    if "cold" in f:
        rows.append((f"{title}: tether decisions, cold (no index: rebuilds it)", f"{f['cold']:.2f} s", "", ""))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_decisions")
    parser.add_argument("--decisions", type=int, default=DECISIONS)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args(argv)
    peers.quiet_env()
    rows: list[tuple[str, str, str, str]] = []
    with peers.scratch_dir("decisions") as tmp:
        root = Path(tmp) / "runs"
        built = build(RunStore(root), args.decisions)
        print(f"The file store: {args.decisions:,} decisions on {args.decisions // PER_RUN:,} runs, built in "
              f"{built:.1f} s through create/open/save/release", flush=True)
        figures = measure(str(root), args.repeats, args.decisions)
        figures["cold"] = cold(root)
        rows += report("file store", figures, args.repeats)
    try:
        server = pg.start()
    except pg.PgUnavailable as exc:
        print(f"postgresql: not measured ({exc})")
    else:
        try:
            from tether.store.postgres.store import PgStore

            store = PgStore(server.url)
            built = build(store, args.decisions)
            store.close()
            print(f"PostgreSQL: the same, built in {built:.1f} s", flush=True)
            rows += report("postgresql", measure(server.url, args.repeats, args.decisions), args.repeats)
        finally:
            server.stop()
    width = max(len(r[0]) for r in rows)
    fig = max(len(r[1]) for r in rows)
    print("Targets (issue 25, the record of decisions):")
    for label, figure, target, verdict in rows:
        print(f"  {label:<{width}}  {figure:<{fig}}  {target:<10} {verdict}".rstrip())


if __name__ == "__main__":
    main()
