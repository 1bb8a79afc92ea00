"""The run store at scale: ``tether runs`` over 10,000 finished runs, and what the index
of summaries adds to a save.

The store is built in a temp dir with the store's own API (``create``, ``open``, a
``save`` per turn, ``release``), from the journals and traces of real demo runs (``plan``
mostly; ``runaway`` capped, ``destructive`` waiting for an approval and ``forbidden``
failed among them), so every journal and trace is what a real run leaves. Then, each a
``tether runs`` subprocess (interpreter start included), the median of a few:

* cold: no ``index.sqlite`` (the first listing replays every journal and builds it);
* warm: the index is there and current; also ``--live`` and ``--json`` (whose first run
  also digests every trace);
* before the index, for comparison: replaying every journal and trace in-process (what
  ``tether runs`` did), once.

And the cost a save pays for the index (:meth:`tether.store.files.handle.RunHandle.save`): a save
that only checks whether the row is due, a save that writes it, and what that comes to
per save at the harness's pace (a row at most once a second, or on a change of status).

Run: ``.venv/bin/python -m tests.benchmarks.bench_store [--runs N]``
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tether.harness import Harness
from tether.observe.report import recorded_records
from tether.vocab.state import Limits, RunState
from tether.store.files.handle import RunHandle
from tether.store.files.layout import TRACE_FILE
from tether.store.files.store import RunStore
from tether.store.trace import read_trace
from tether.demo.agents import DEMO
from tests.benchmarks import peers
from tests.support import load_all

RUNS = 10_000
TARGET_RUNS_S = 1.0
CLI_REPEATS = 5
# One template in ten is each of these; the rest are plan runs.
MIX = ("plan",) * 7 + ("runaway", "destructive", "forbidden")
SAVE_TRIALS = 2_000
HARNESS_SAVES_PER_S = 3_000  # ~0.6 ms per turn, about two saves per turn


async def _templates(where: Path) -> dict[str, tuple[RunState, bytes]]:
    """Each scenario's final state and trace, from a real run."""
    out = {}
    async with Harness(where / "runs", where / "ws", agent_sets=(DEMO,)) as harness:
        for scenario in sorted(set(MIX)):
            limits = Limits(max_turns=5) if scenario == "runaway" else None
            state = harness.new_run(scenario, limits=limits)
            await harness.run(state.run_id)
            final = harness.store.load(state.run_id)
            out[scenario] = (final, (harness.store.run_dir(state.run_id) / TRACE_FILE).read_bytes())
    return out


def build_store(root: Path, runs: int) -> float:
    """``runs`` finished runs under ``root``, written turn by turn through the store's API."""
    started = time.perf_counter()
    templates = asyncio.run(_templates(root.parent / "templates"))
    store = RunStore(root)
    base = time.time() - runs
    for i in range(runs):
        final, trace = templates[MIX[i % len(MIX)]]
        run_id = f"{final.model}-{i:05d}"
        data = final.to_dict()
        state = RunState.from_dict({**data, "run_id": run_id, "messages": final.messages[:2], "turns": 0,
                                    "per_turn_prompt_tokens": [], "estimated_turns": [], "status": "running",
                                    "interruption": None, "error": None, "created_at": base + i})
        store.create(state)
        state, handle = store.open(run_id)
        try:
            for turn in range(1, final.turns + 1):
                state.messages = final.messages[:2 + (len(final.messages) - 2) * turn // (final.turns + 1)]
                state.turns = turn
                state.per_turn_prompt_tokens = final.per_turn_prompt_tokens[:turn]
                handle.save(state)
            handle.save(RunState.from_dict({**data, "run_id": run_id, "created_at": base + i}))
        finally:
            handle.release()
        (store.run_dir(run_id) / TRACE_FILE).write_bytes(trace)
    store.index.close()
    return time.perf_counter() - started


def _cli(root: Path, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tether.tui.cli", "runs", "--runs-dir", str(root), *args],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def _drop_index(root: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (root / f"index.sqlite{suffix}").unlink(missing_ok=True)


def listing_figures(root: Path, repeats: int) -> dict[str, float]:
    figures = {}
    _drop_index(root)
    figures["cold"] = _cli(root)
    figures["warm"] = statistics.median(_cli(root) for _ in range(repeats))
    figures["live"] = statistics.median(_cli(root, "--live") for _ in range(repeats))
    figures["json_first"] = _cli(root, "--json")
    figures["json_warm"] = statistics.median(_cli(root, "--json") for _ in range(repeats))
    started = time.perf_counter()
    store = RunStore(root)
    states, _ = load_all(store)
    for state in states:
        recorded_records(read_trace(store.run_dir(state.run_id) / TRACE_FILE))
    figures["before"] = time.perf_counter() - started
    started = time.perf_counter()
    in_process = RunStore(root).summaries()
    figures["summaries_in_process"] = time.perf_counter() - started
    figures["rows"] = len(in_process)
    return figures


def save_figures(root: Path, trials: int) -> dict[str, float]:
    """Per-save cost (µs, median of ``trials``) of a save of a plan run (a commit with no new
    message): without an index, with one when the row is not due (the usual save), and
    when the row is written."""
    store = RunStore(root)
    template = store.load(next(s.run_id for s in store.summaries() if s.model == "plan"))

    def timed(handle: RunHandle, state: RunState, force: bool) -> float:
        samples = []
        for _ in range(trials):
            state.turns += 1  # a save of the same size each time: the journal grows by its header
            if force:
                handle._indexed = None  # noqa: SLF001 - the benchmark makes every save write the row
            started = time.perf_counter_ns()
            handle.save(state)
            samples.append((time.perf_counter_ns() - started) / 1000)
        return statistics.median(samples)

    out = {}
    for label, index, force in (("none", None, False), ("check", store.index, False), ("write", store.index, True)):
        run_id = f"save-bench-{label}"
        state = RunState.from_dict({**template.to_dict(), "run_id": run_id, "status": "running"})
        store.create(state)
        state, handle = store.open(run_id)
        handle._index = index  # noqa: SLF001
        try:
            timed(handle, state, force)  # warm up: the connection, the page cache
            out[label] = timed(handle, state, force)
        finally:
            handle.release()
    out["added"] = out["check"] - out["none"] + (out["write"] - out["check"]) / HARNESS_SAVES_PER_S
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_store")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"finished runs in the store (default {RUNS:,})")
    parser.add_argument("--repeats", type=int, default=CLI_REPEATS)
    args = parser.parse_args(argv)
    peers.quiet_env()
    with peers.scratch_dir("store") as tmp:
        root = Path(tmp) / "runs"
        built = build_store(root, args.runs)
        size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
        print(f"The run store: {args.runs:,} finished runs ({size / 1e6:.0f} MB of journals and traces) "
              f"built in {built:.1f} s through create/open/save/release", flush=True)
        f = listing_figures(root, args.repeats)
        saves = save_figures(root, SAVE_TRIALS)
        shutil.rmtree(root, ignore_errors=True)
    assert f["rows"] == args.runs, f"summaries listed {f['rows']:.0f} runs, not {args.runs}"
    ok = f["warm"] <= TARGET_RUNS_S
    rows = [
        ("tether runs, warm index (median of %d)" % args.repeats, f"{f['warm']:.2f} s", f"<= {TARGET_RUNS_S:g} s",
         "met" if ok else "MISSED"),
        ("tether runs, cold (no index: builds it)", f"{f['cold']:.2f} s", f"(<= {TARGET_RUNS_S:g} s)",
         "met" if f["cold"] <= TARGET_RUNS_S else "over"),
        ("tether runs --live, warm", f"{f['live']:.2f} s", "", ""),
        ("tether runs --json, first (digests every trace)", f"{f['json_first']:.2f} s", "", ""),
        ("tether runs --json, warm", f"{f['json_warm']:.2f} s", "", ""),
        ("RunStore.summaries() in-process, warm", f"{f['summaries_in_process'] * 1000:.0f} ms", "", ""),
        ("before the index: load_all + every trace, in-process", f"{f['before']:.2f} s", "(for comparison)", ""),
        ("save, no index (a plan run's commit)", f"{saves['none']:.1f} µs", "", ""),
        ("save, index row not due (the usual save)", f"{saves['check']:.1f} µs", "", ""),
        ("save that writes the row", f"{saves['write']:.1f} µs", "", ""),
        (f"added per save at {HARNESS_SAVES_PER_S:,} saves/s, a row a second",
         f"{saves['added']:+.2f} µs", "(vs ~600 µs a turn)", ""),
    ]
    width = max(len(r[0]) for r in rows)
    fig = max(len(r[1]) for r in rows)
    print("Targets (issue 2/5, scale):")
    for label, figure, target, verdict in rows:
        print(f"  {label:<{width}}  {figure:<{fig}}  {target:<20} {verdict}".rstrip())


if __name__ == "__main__":
    main()
