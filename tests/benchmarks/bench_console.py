"""The console under load: key-to-effect latency while a 0-latency runaway floods events.

A runaway of 1,000 turns (max_turns 1000, the embedded scripted provider with no added
latency) runs in the console, headless, while the benchmark presses up/down every ~20 ms,
moving the selection between the runaway (the heaviest run to show) and another run.
Each key is delivered the way a terminal delivers it (a Key event through the driver);
its effect is the moment the newly selected run has been painted (the app records it
after the next screen refresh). Also measured: Stop inside ``scan_archive``, key to the
stopped status on screen; events/s the runaway emitted; resident memory.

Run: ``.venv/bin/python -m tests.benchmarks.bench_console [--turns N] [--stop-trials N]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import events

from core.events import ToolProgress
from core.state import Limits, Status
from tui.app import TetherApp
from tui.components.dialogs import NewRunRequest

KEY_INTERVAL_S = 0.020
KEY_TIMEOUT_S = 10.0
TARGET_KEY_MS = 100.0
TARGET_STOP_MS = 50.0


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 1e6


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # KiB on Linux


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _send_key(app: TetherApp, key: str) -> None:
    event = events.Key(key, None)
    event.set_sender(app)
    assert app._driver is not None
    app._driver.send_message(event)


async def _painted_after(app: TetherApp, what: str, rid: str, t0: float, timeout: float = KEY_TIMEOUT_S) -> float | None:
    deadline = t0 + timeout
    while time.perf_counter() < deadline:
        for kind, run_id, when in reversed(app.painted):
            if when < t0:
                break
            if kind == what and run_id == rid:
                return when
        await asyncio.sleep(0.0005)
    return None


async def _press_keys(app: TetherApp, rid: str, going: Callable[[], bool],
                      rss_peak: float) -> tuple[list[float], int, float]:
    """Alternate up/down every KEY_INTERVAL_S while ``going()``; per key, the time until the
    new selection was painted. Returns the latencies (ms), the keys never answered, peak RSS."""
    latencies: list[float] = []
    timeouts = 0
    up = True
    while going():
        expected = "b-plan" if up else rid
        t0 = time.perf_counter()
        _send_key(app, "up" if up else "down")
        shown = await _painted_after(app, "selected", expected, t0)
        if shown is None:
            timeouts += 1
        else:
            latencies.append((shown - t0) * 1000)
        up = not up
        rss_peak = max(rss_peak, _rss_mb())
        await asyncio.sleep(max(0.0, KEY_INTERVAL_S - (time.perf_counter() - t0)))
    return latencies, timeouts, rss_peak


async def keys_under_load(turns: int, use_tracemalloc: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        app = TetherApp(runs_dir=Path(tmp) / "runs", workspace=Path(tmp) / "workspace")
        async with app.run_test(size=(160, 45)) as pilot:
            app.create_run(NewRunRequest("plan"), run_id="a-plan")
            await app.workers.wait_for_complete()
            app.create_run(NewRunRequest("plan"), run_id="b-plan")
            await app.workers.wait_for_complete()
            await pilot.pause()
            gc.collect()
            rss_before = _rss_mb()
            if use_tracemalloc:
                tracemalloc.start()
            rid = "runaway-bench"
            app.create_run(NewRunRequest("runaway", limits=Limits(max_turns=turns)), run_id=rid)
            app.select(rid)
            app.console_screen.query_one("#runs").focus()
            events_before = app.events_seen
            started = time.perf_counter()
            latencies, timeouts, rss_peak = await _press_keys(app, rid, lambda: rid in app.active, _rss_mb())
            ran_s = time.perf_counter() - started
            emitted = app.events_seen - events_before
            traced = tracemalloc.get_traced_memory() if use_tracemalloc else None
            if use_tracemalloc:
                tracemalloc.stop()
            state = app.states[rid]
            transcript = app.transcript_view
            trace = app.trace_view
            result = {
                "turns": state.turns,
                "status": state.status.value,
                "run_s": ran_s,
                "events": emitted,
                "events_per_s": emitted / ran_s if ran_s else 0.0,
                "keys": len(latencies) + timeouts,
                "timeouts": timeouts,
                "median_ms": statistics.median(latencies) if latencies else float("nan"),
                "p99_ms": _pct(latencies, 0.99),
                "max_ms": max(latencies) if latencies else float("nan"),
                "rss_before_mb": rss_before,
                "rss_peak_mb": rss_peak,
                "tracemalloc_peak_mb": traced[1] / 1e6 if traced else None,
                "transcript_lines": transcript.line_count,
                "trace_lines": trace.line_count,
                "trace_buffer": len(app.trace_lines(rid)),
            }
            await app.stop_all()
            await app.workers.wait_for_complete()
    assert result["status"] == Status.MAX_TURNS_EXCEEDED.value, result
    return result


async def flood(rate: int, seconds: float) -> dict[str, Any]:
    """The same key loop while a synthetic run pushes ``rate`` events/s through the console's
    sink (the harness's own speed is not the limit here: this is the console's coalescing)."""
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        app = TetherApp(runs_dir=Path(tmp) / "runs", workspace=Path(tmp) / "workspace")
        async with app.run_test(size=(160, 45)) as pilot:
            app.create_run(NewRunRequest("plan"), run_id="b-plan")
            await app.workers.wait_for_complete()
            rid = "flood"
            state = app.create_run(NewRunRequest("runaway"), run_id=rid, start=False)
            app.harness.live[rid] = app.states[rid]  # shown as a live run
            app.select(rid)
            await pilot.pause()
            gc.collect()
            rss_before = _rss_mb()
            emitted = 0
            stop = asyncio.Event()

            async def emit() -> None:
                nonlocal emitted
                t0 = time.perf_counter()
                while not stop.is_set():
                    due = int((time.perf_counter() - t0) * rate)
                    while emitted < due:
                        emitted += 1
                        app._sink(ToolProgress(run_id=rid, seq=emitted, ts=time.time(), call_id="c1",
                                               name="scan_archive", label=f"scanned {emitted} entries"))
                    await asyncio.sleep(0.001)

            task = asyncio.create_task(emit())
            started = time.perf_counter()
            latencies, timeouts, rss_peak = await _press_keys(
                app, rid, lambda: time.perf_counter() - started < seconds, rss_before)
            stop.set()
            await task
            elapsed = time.perf_counter() - started
            app.harness.live.pop(rid, None)
            del state
            result = {
                "events": emitted, "events_per_s": emitted / elapsed, "keys": len(latencies) + timeouts,
                "timeouts": timeouts, "median_ms": statistics.median(latencies) if latencies else float("nan"),
                "p99_ms": _pct(latencies, 0.99), "max_ms": max(latencies) if latencies else float("nan"),
                "rss_before_mb": rss_before, "rss_peak_mb": rss_peak,
                "trace_buffer": len(app.trace_lines(rid)),
            }
            await app.stop_all()
    return result


async def stop_latency(trials: int) -> list[float]:
    """Key ``s`` during scan_archive to the stopped status painted, per trial."""
    out: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        app = TetherApp(runs_dir=Path(tmp) / "runs", workspace=Path(tmp) / "workspace")
        async with app.run_test(size=(160, 45)) as pilot:
            for n in range(trials):
                rid = f"slow-{n}"
                app.create_run(NewRunRequest("slow"), run_id=rid)
                app.select(rid)
                deadline = time.monotonic() + 30
                while not any("tool_start" in line for line in app.trace_lines(rid)):
                    if time.monotonic() > deadline:
                        raise TimeoutError("scan_archive did not start")
                    await pilot.pause(0.005)
                await pilot.pause(0.05)
                t0 = time.perf_counter()
                _send_key(app, "s")
                shown = await _painted_after(app, "stopped", rid, t0)
                await app.workers.wait_for_complete()
                if shown is not None and app.states[rid].status is Status.INTERRUPTED:
                    out.append((shown - t0) * 1000)
            await app.stop_all()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--stop-trials", type=int, default=20)
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations (slower)")
    parser.add_argument("--flood-rate", type=int, default=10_000, help="synthetic events/s (0: skip)")
    parser.add_argument("--flood-seconds", type=float, default=10.0)
    args = parser.parse_args(argv)

    r = asyncio.run(keys_under_load(args.turns, args.tracemalloc))
    print(f"console under load: 0-latency runaway, {r['turns']} turns ({r['status']}) in {r['run_s']:.1f} s, "
          f"{r['events']:,} events = {r['events_per_s']:,.0f} events/s")
    print(f"  keys (up/down every {KEY_INTERVAL_S * 1000:.0f} ms): {r['keys']} pressed, {r['timeouts']} unanswered "
          f"within {KEY_TIMEOUT_S:g} s")
    print(f"  key to effect (selection painted): median {r['median_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
          f"max {r['max_ms']:.1f} ms   (target p99 <= {TARGET_KEY_MS:.0f} ms)")
    mem = (f"  memory: RSS {r['rss_before_mb']:.0f} MB before the run, peak {r['rss_peak_mb']:.0f} MB during it "
           f"(process peak {_peak_rss_mb():.0f} MB)")
    if r["tracemalloc_peak_mb"] is not None:
        mem += f"; tracemalloc peak {r['tracemalloc_peak_mb']:.1f} MB"
    print(mem)
    print(f"  views bounded: transcript {r['transcript_lines']} lines, trace view {r['trace_lines']} lines, "
          f"trace buffer {r['trace_buffer']} lines")
    if args.flood_rate:
        f = asyncio.run(flood(args.flood_rate, args.flood_seconds))
        print(f"console under a synthetic flood: {f['events']:,} events in {args.flood_seconds:g} s = "
              f"{f['events_per_s']:,.0f} events/s through the sink")
        print(f"  key to effect: {f['keys']} keys, {f['timeouts']} unanswered; median {f['median_ms']:.1f} ms, "
              f"p99 {f['p99_ms']:.1f} ms, max {f['max_ms']:.1f} ms   (target p99 <= {TARGET_KEY_MS:.0f} ms)")
        print(f"  memory: RSS {f['rss_before_mb']:.0f} MB before, peak {f['rss_peak_mb']:.0f} MB; "
              f"trace buffer {f['trace_buffer']} lines (bounded)")
    if args.stop_trials:
        stops = asyncio.run(stop_latency(args.stop_trials))
        print(f"stop inside scan_archive, key to the stopped status on screen ({len(stops)} trials): "
              f"median {statistics.median(stops):.1f} ms, p99 {_pct(stops, 0.99):.1f} ms, max {max(stops):.1f} ms"
              f"   (target p99 <= {TARGET_STOP_MS:.0f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
