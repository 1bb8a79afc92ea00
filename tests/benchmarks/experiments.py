"""A/B evidence for the persistence change proposed in docs/performance.md.

Not part of ``make bench``. It monkeypatches ``RunHandle.save`` (and, for proposal 2,
the thread hop that ``Harness._operate`` makes to load the encoding) in this process
only, and measures, interleaved with the stock code:

* ms per turn of a runaway at N turns against the floor;
* the 3-turn plan's harness overhead (embedded provider);
* Stop inside ``scan_archive``, p50/p99.

The "journal" variant writes what an append-only commit would write: the new
messages plus a constant-size header line, in one ``os.write`` on a descriptor kept
open, inline. It is a cost model of the proposal, not a loader: runs saved this way
are not resumable.

Run: ``.venv/bin/python -m tests.benchmarks.experiments [turns] [rounds]``
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import core.harness as harness_module
import core.store as store
import core.tokens as tokens
from tests.benchmarks import bench_harness, bench_stop, peers

_stock_save = store.RunHandle.save
_real_asyncio = harness_module.asyncio


def _journal_save_now(self: store.RunHandle, state: object) -> None:
    fd = getattr(self, "_bench_fd", None)
    if fd is None:
        fd = self._bench_fd = os.open(self.directory / "journal.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    new = state.messages[self._committed:]  # type: ignore[attr-defined]
    header = state.header()  # type: ignore[attr-defined]
    deltas = {k: header.pop(k)[-1:] for k in ("per_turn_prompt_tokens", "estimated_turns")}
    line = store._dumps({"commit": len(state.messages), "header": header, **deltas})  # type: ignore[attr-defined]
    os.write(fd, ("".join(store._dumps(m) + "\n" for m in new) + line + "\n").encode())
    self._committed = len(state.messages)  # type: ignore[attr-defined]


async def _journal_save(self: store.RunHandle, state: object) -> None:
    _journal_save_now(self, state)


async def _to_thread_unless_loaded(fn: object, *args: object) -> object:
    if fn is tokens.encoding and tokens.encoding_loaded():
        return fn()  # type: ignore[operator]
    return await _real_asyncio.to_thread(fn, *args)  # type: ignore[arg-type]


_shim = types.SimpleNamespace(**{k: getattr(_real_asyncio, k) for k in dir(_real_asyncio) if not k.startswith("__")})
_shim.to_thread = _to_thread_unless_loaded

VARIANTS = {
    "tether as is": (False, False),
    "journal (proposal 1)": (True, False),
    "journal + no encoding hop (1+2)": (True, True),
}


def _apply(journal: bool, no_hop: bool) -> None:
    store.RunHandle.save = _journal_save if journal else _stock_save  # type: ignore[method-assign]
    harness_module.asyncio = _shim if no_hop else _real_asyncio  # type: ignore[assignment]


async def _per_turn(url: str, workdir: Path, turns: int, rounds: int) -> dict[str, list[float]]:
    floor, tether = peers.Floor(url, workdir / "floor"), peers.Tether(url, workdir / "tether")
    await floor.setup()
    await tether.setup()
    await floor.run(turns)
    await tether.run(turns)
    results: dict[str, list[float]] = {"floor": [], **{name: [] for name in VARIANTS}}
    try:
        for _ in range(rounds):
            results["floor"].append(await bench_harness._timed(floor, turns))
            for name, variant in VARIANTS.items():
                _apply(*variant)
                try:
                    results[name].append(await bench_harness._timed(tether, turns))
                finally:
                    _apply(False, False)
    finally:
        await floor.aclose()
        await tether.aclose()
    return results


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    peers.quiet_env()
    print(f"Machine: {bench_harness.machine()}")
    with bench_harness.provider_process() as url, tempfile.TemporaryDirectory(prefix="tether-bench-ab-") as tmp:
        results = asyncio.run(_per_turn(url, Path(tmp), turns, rounds))
    base = statistics.median(results["floor"])
    print(f"Runaway at {turns} turns, median of {rounds} interleaved rounds:")
    for name, runs in results.items():
        ms = statistics.median(runs)
        print(f"  {name:<34} {ms:7.2f} ms/turn  {ms / base:5.2f}x floor")
    for name, variant in VARIANTS.items():
        _apply(*variant)
        try:
            with tempfile.TemporaryDirectory(prefix="tether-bench-ab-") as tmp:
                wall, provider, overhead = asyncio.run(bench_harness.plan_overhead(Path(tmp), None, 30))
            stop = bench_stop.measure(100)
        finally:
            _apply(False, False)
        print(f"  {name:<34} plan overhead {overhead:5.2f} ms (wall {wall:.2f} - provider {provider:.2f}); "
              f"stop p50 {stop.p50_ms:.2f} p99 {stop.p99_ms:.2f} ms")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"  ({time.perf_counter() - started:.0f} s)")
