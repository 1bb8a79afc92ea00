"""The console under load: key-to-effect latency while runs flood it with events.

The console is set up as ``tether`` sets it up: the scripted provider in a child process
(:func:`tether.demo.provider.server.provider_process`), everything else in the console's process.
While a run goes, the benchmark presses up/down every ~20 ms, moving the selection between
the busy run and another one. Each key is delivered the way a terminal delivers it (a Key
event through the driver); its effect is the moment the newly selected run has been
painted (the app records it after the next screen refresh). Measured:

* a real run emitting over 5,000 events/s: ``slow``, its ``scan_archive`` set to report
  every entry (each report is an event, traced to disk and shown);
* a synthetic 10,000 events/s pushed through the console's event sink;
* a 0-latency ``runaway`` of 1,000 turns, and the same with the provider inside the
  console's process (the baseline: how the console ran before);
* Stop inside ``scan_archive``: key to the stopped status on screen;
* the console as a client of the store (``--store-only`` runs just these two):
  a store of 10,000 finished runs (:func:`tests.benchmarks.bench_store.build_store`): from
  the app's construction to a usable console (listed from the index's summaries), the
  first key's effect, keys walking the list (each selection loads that run's journal);
  and 20 live runs driven by 5 other processes (``runaway`` with a 50 ms model): how long
  until a run another process starts is listed after its first event, and key-to-effect
  while the console follows them all;
* memory over a 10,000-turn runaway whose model answers from memory (the scripted
  provider re-reads the whole transcript every turn, which makes 10,000 turns take hours;
  the console, the loop, the journal and the trace are the real ones).

Run: ``.venv/bin/python -m tests.benchmarks.bench_console [--turns N] [--stop-trials N] ...``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import events

from tether.models.client import ModelReply
from tether.vocab.events import ToolProgress
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.demo.provider.server import provider_process
from tether.vocab.state import Limits, Status
from tether.demo.agents import ScanArchive
from tether.tui.app import TetherApp
from tether.tui.state.options import ConsoleOptions
from tether.tui.screens.console import Shown
from tether.tui.screens.new_run import NewRunRequest

STORE_RUNS = 10_000
TARGET_USABLE_S = 2.0
TARGET_APPEAR_S = 1.0
PEERS, RUNS_PER_PEER = 5, 4
KEY_INTERVAL_S = 0.020
REAL_KEY_INTERVAL_S = 0.2  # a fast typist: every key's repaint also takes from the run's time
KEY_TIMEOUT_S = 10.0
TARGET_KEY_MS = 100.0
TARGET_STOP_MS = 50.0
TARGET_EVENTS_PER_S = 5_000


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 1e6


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class MeasuredConsole(TetherApp):
    """The console with a clock on what it shows: the app posts ``Shown`` after the refresh
    that painted a change, and this keeps when."""

    def __init__(self, options: ConsoleOptions = ConsoleOptions(), *, harness: Harness | None = None) -> None:
        super().__init__(options, harness=harness)
        self.painted: deque[tuple[str, str, float]] = deque(maxlen=1000)  # (what, run id, when)

    def on_shown(self, message: Shown) -> None:
        self.painted.append((message.what, message.run_id, message.at))


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
                      rss_peak: float, interval: float = KEY_INTERVAL_S) -> tuple[list[float], int, float]:
    """Alternate up/down every ``interval`` s while ``going()``; per key, the time until the
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
        await asyncio.sleep(max(0.0, interval - (time.perf_counter() - t0)))
    return latencies, timeouts, rss_peak


def _app(tmp: str, provider_url: str | None, **kw: Any) -> TetherApp:
    return MeasuredConsole(ConsoleOptions(runs_dir=Path(tmp) / "runs", workspace=Path(tmp) / "workspace",
                                          provider_url=provider_url, agent_sets=(DEMO,), **kw))


def _key_figures(latencies: list[float], timeouts: int) -> dict[str, Any]:
    return {"keys": len(latencies) + timeouts, "timeouts": timeouts,
            "median_ms": statistics.median(latencies) if latencies else float("nan"),
            "p99_ms": _pct(latencies, 0.99), "max_ms": max(latencies) if latencies else float("nan")}


async def _busy_run_with_keys(app: TetherApp, pilot: Any, request: NewRunRequest, rid: str,
                              use_tracemalloc: bool = False, interval: float = KEY_INTERVAL_S) -> dict[str, Any]:
    """Start ``rid`` beside a finished ``b-plan``, press keys until it stops; the figures."""
    app.create_run(NewRunRequest("plan"), run_id="b-plan")
    await app.workers.wait_for_complete()
    await pilot.pause()
    gc.collect()
    rss_before = _rss_mb()
    if use_tracemalloc:
        tracemalloc.start()
    app.create_run(request, run_id=rid)
    app.select(rid)
    app.console_screen.query_one("#runs").focus()
    events_before = app.events_seen
    started = time.perf_counter()
    latencies, timeouts, rss_peak = await _press_keys(app, rid, lambda: rid in app.active, _rss_mb(), interval)
    ran_s = time.perf_counter() - started
    emitted = app.events_seen - events_before
    traced = tracemalloc.get_traced_memory() if use_tracemalloc else None
    if use_tracemalloc:
        tracemalloc.stop()
    state = app.states[rid]
    app.select(rid)
    await pilot.pause()
    result = {
        "turns": state.turns, "status": state.status.value, "run_s": ran_s, "events": emitted,
        "events_per_s": emitted / ran_s if ran_s else 0.0, **_key_figures(latencies, timeouts),
        "rss_before_mb": rss_before, "rss_peak_mb": rss_peak,
        "tracemalloc_peak_mb": traced[1] / 1e6 if traced else None,
        "transcript_lines": app.transcript_view.line_count, "trace_lines": app.trace_view.line_count,
        "trace_buffer": len(app.trace_lines(rid)),
    }
    await app.stop_all()
    await app.workers.wait_for_complete()
    return result


async def keys_under_load(turns: int, use_tracemalloc: bool, provider_url: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        app = _app(tmp, provider_url)
        async with app.run_test(size=(160, 45)) as pilot:
            result = await _busy_run_with_keys(app, pilot, NewRunRequest("runaway", limits=Limits(max_turns=turns)),
                                               "runaway-bench", use_tracemalloc)
    assert result["status"] == Status.MAX_TURNS_EXCEEDED.value, result
    return result


class _ChattyScan:
    """``scan_archive`` reporting every entry: ``entries`` events in about ``seconds``."""

    def __init__(self, entries: int, seconds: float) -> None:
        self.values = {"total_entries": entries, "seconds": seconds, "report_every": 1, "batch": 25}

    def __enter__(self) -> None:
        self.saved = {name: getattr(ScanArchive, name) for name in self.values}
        for name, value in self.values.items():
            setattr(ScanArchive, name, value)

    def __exit__(self, *exc: object) -> None:
        for name, value in self.saved.items():
            setattr(ScanArchive, name, value)


async def real_flood(entries: int, seconds: float, provider_url: str | None,
                     interval: float = KEY_INTERVAL_S) -> dict[str, Any]:
    """A real run whose tool reports progress thousands of times a second, with keys."""
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp, _ChattyScan(entries, seconds):
        app = _app(tmp, provider_url)
        async with app.run_test(size=(160, 45)) as pilot:
            result = await _busy_run_with_keys(app, pilot, NewRunRequest("slow"), "slow-chatty", interval=interval)
    assert result["status"] == Status.COMPLETED.value, result
    return result


async def flood(rate: int, seconds: float) -> dict[str, Any]:
    """The same key loop while a synthetic run pushes ``rate`` events/s through the console's
    sink (the harness's own speed is not the limit here: this is the console's coalescing)."""
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        app = _app(tmp, None)
        async with app.run_test(size=(160, 45)) as pilot:
            app.create_run(NewRunRequest("plan"), run_id="b-plan")
            await app.workers.wait_for_complete()
            rid = "flood"
            app.create_run(NewRunRequest("runaway"), run_id=rid, start=False)
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
            result = {"events": emitted, "events_per_s": emitted / elapsed, **_key_figures(latencies, timeouts),
                      "rss_before_mb": rss_before, "rss_peak_mb": rss_peak, "trace_buffer": len(app.trace_lines(rid))}
            await app.stop_all()
    return result


async def stop_latency(trials: int, provider_url: str | None) -> list[float]:
    """Key ``s`` during scan_archive to the stopped status painted, per trial."""
    out: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        app = _app(tmp, provider_url)
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


async def _walk_keys(app: TetherApp, keys: int, interval: float, key_for: Callable[[int], str],
                     going: Callable[[], bool] = lambda: True) -> tuple[list[float], int]:
    """Press ``key_for(n)`` (up or down) ``keys`` times; per key, the time until the run it
    moved to was painted."""
    runs = app.console_screen.query_one("#runs")
    latencies: list[float] = []
    timeouts = 0
    for n in range(keys):
        if not going():
            break
        key = key_for(n)
        order = list(runs.order)
        at = order.index(app.selected) if app.selected in order else 0
        expected = order[max(0, min(len(order) - 1, at + (-1 if key == "up" else 1)))]
        t0 = time.perf_counter()
        _send_key(app, key)
        shown = await _painted_after(app, "selected", expected, t0)
        if shown is None:
            timeouts += 1
        else:
            latencies.append((shown - t0) * 1000)
        await asyncio.sleep(max(0.0, interval - (time.perf_counter() - t0)))
    return latencies, timeouts


async def store_startup(root: Path, keys: int = 100) -> dict[str, Any]:
    """A console opened on ``root`` (10,000 finished runs): construction to usable, and keys."""
    gc.collect()
    t0 = time.perf_counter()
    app = MeasuredConsole(ConsoleOptions(runs_dir=root, workspace=root.parent / "workspace", agent_sets=(DEMO,)))
    async with app.run_test(size=(160, 45)) as pilot:
        usable_s = time.perf_counter() - t0
        runs = app.console_screen.query_one("#runs")
        listed = len(runs.order)
        app.select(runs.order[-1])
        runs.focus()
        t1 = time.perf_counter()
        _send_key(app, "up")
        first = await _painted_after(app, "selected", runs.order[-2], t1)
        first_key_ms = (first - t1) * 1000 if first is not None else float("nan")
        await app.store_ready()
        watching_s = time.perf_counter() - t0
        latencies, timeouts = await _walk_keys(app, keys, KEY_INTERVAL_S * 5, lambda n: "up")
        loaded = len(app.states) - len(app.model.stubs)
        await pilot.pause()
    return {"usable_s": usable_s, "listed": listed, "first_key_ms": first_key_ms, "watching_s": watching_s,
            "loaded": loaded, **_key_figures(latencies, timeouts)}


PEER = """
import asyncio, sys
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.vocab.state import Limits

async def main(runs, ws, tag, n, latency):
    async with Harness(runs, ws, latency_ms=latency, agent_sets=(DEMO,)) as harness:
        ids = [harness.new_run("runaway", run_id=f"{tag}-{i}", limits=Limits(max_turns=100_000)).run_id
               for i in range(n)]
        await asyncio.gather(*(harness.run(rid) for rid in ids))

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])))
"""


async def live_from_peers(seconds: float, peers: int = PEERS, per_peer: int = RUNS_PER_PEER,
                          latency_ms: float = 50.0) -> dict[str, Any]:
    """``peers`` other processes each driving ``per_peer`` runaways; the console follows them."""
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        root, ws = Path(tmp) / "runs", Path(tmp) / "workspace"
        app = MeasuredConsole(ConsoleOptions(runs_dir=root, workspace=ws, agent_sets=(DEMO,)))
        procs: list[asyncio.subprocess.Process] = []
        async with app.run_test(size=(160, 45)) as pilot:
            await app.store_ready()
            expected = {f"peer{p}-{i}" for p in range(peers) for i in range(per_peer)}
            seen_at: dict[str, float] = {}
            for p in range(peers):
                procs.append(await asyncio.create_subprocess_exec(
                    sys.executable, "-c", PEER, str(root), str(ws), f"peer{p}", str(per_peer), str(latency_ms),
                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL))
            try:
                deadline = time.monotonic() + 60
                while len(seen_at) < len(expected) and time.monotonic() < deadline:
                    now = time.time()
                    for rid in expected - seen_at.keys():
                        if rid in app.states:
                            seen_at[rid] = now
                    await asyncio.sleep(0.002)
                appear = []
                for rid, when in seen_at.items():  # from the moment the other process made the run
                    appear.append((when - app.states[rid].created_at) * 1000)
                while time.monotonic() < deadline and not all(app.model.held_elsewhere(r) for r in expected):
                    await asyncio.sleep(0.01)
                live = sorted(r for r in expected if app.model.held_elsewhere(r))
                runs = app.console_screen.query_one("#runs")
                runs.focus()
                app.select(live[len(live) // 2])
                await pilot.pause()
                events_before = app.events_seen
                started = time.perf_counter()
                latencies, timeouts = await _walk_keys(
                    app, 100_000, KEY_INTERVAL_S * 5, lambda n: "up" if n % 2 == 0 else "down",
                    going=lambda: time.perf_counter() - started < seconds)
                elapsed = time.perf_counter() - started
                events = app.events_seen - events_before
                turns = sum(app.states[r].turns for r in expected if r in app.states)
            finally:
                for proc in procs:
                    if proc.returncode is None:
                        proc.kill()
                    await proc.wait()
            await app.stop_all()
    return {"runs": len(expected), "listed": len(seen_at), "live": len(live),
            "appear_median_ms": statistics.median(appear) if appear else float("nan"),
            "appear_max_ms": max(appear) if appear else float("nan"),
            "events_per_s": events / elapsed, "turns": turns, **_key_figures(latencies, timeouts)}


def store_sections(runs: int = STORE_RUNS, live_seconds: float = 10.0) -> None:
    """The console as a client of the store: a large store, and live runs of other processes."""
    from tests.benchmarks.bench_store import build_store

    if runs:
        with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
            root = Path(tmp) / "store" / "runs"
            root.parent.mkdir(parents=True)
            built = build_store(root, runs)
            r = asyncio.run(store_startup(root))
            print(f"console on a store of {r['listed']:,} finished runs (built in {built:.0f} s): usable "
                  f"{r['usable_s']:.2f} s after it was made (target <= {TARGET_USABLE_S:.0f} s), first key "
                  f"{r['first_key_ms']:.1f} ms; following the store (inotify on every run) "
                  f"{r['watching_s']:.2f} s after; {r['loaded']} runs loaded in full")
            _print_keys(r)
    if live_seconds:
        r = asyncio.run(live_from_peers(live_seconds))
        print(f"{r['runs']} live runs from {PEERS} other processes (runaway, a 50 ms model): listed "
              f"{r['appear_median_ms']:.0f} ms after the other process made them (median; max {r['appear_max_ms']:.0f} ms, "
              f"target <= {TARGET_APPEAR_S * 1000:.0f} ms); the console followed "
              f"{r['events_per_s']:,.0f} events/s of theirs")
        _print_keys(r)


def _capped_caches() -> dict[str, tuple[int, int]]:
    """Entries and capacity of every ``functools.lru_cache`` with a cap in Rich, Textual and
    the console: where tracemalloc put the console's growth over a long run."""
    out: dict[str, tuple[int, int]] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith(("rich", "textual", "tether.tui")):
            continue
        for value in list(vars(module).values()):
            for candidate in (value, *(vars(value).values() if isinstance(value, type) else ())):
                function = getattr(candidate, "__func__", candidate)
                cache_info = getattr(function, "cache_info", None)
                if callable(cache_info) and hasattr(function, "__qualname__"):
                    info = cache_info()
                    if info.maxsize:
                        out[f"{function.__module__}.{function.__qualname__}"] = (info.currsize, info.maxsize)
    return out


class _MemoryModel:
    """The runaway's model, answering from memory after 1 ms (about a loopback round trip):
    each turn one ``list_files`` call, prompt tokens growing as the scripted provider's do.
    Every ``every`` turns it notes the console process's resident memory."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.calls = 0
        self.samples: list[tuple[int, float, int]] = []  # turn, RSS MB, Python heap blocks
        self.caches: list[dict[str, tuple[int, int]]] = []  # at each sample

    def new_transcript(self) -> None:
        return None

    async def complete(self, model: str, messages: list[dict], tools: Any, **kw: Any) -> ModelReply:
        turn, self.calls = self.calls, self.calls + 1  # the assistant messages so far
        if turn and turn % self.every == 0:
            gc.collect()
            self.samples.append((turn, _rss_mb(), sys.getallocatedblocks()))
            self.caches.append(_capped_caches())
        await asyncio.sleep(0.001)
        return ModelReply(content="", tool_calls=[{"id": f"c{turn}", "type": "function",
                                                   "function": {"name": "list_files", "arguments": "{}"}}],
                          finish_reason="tool_calls", prompt_tokens=356 + 60 * turn, completion_tokens=9,
                          usage_estimated=False, provider_ms=1.0)

    async def aclose(self) -> None:
        pass


async def memory_over(turns: int, every: int) -> dict[str, Any]:
    """RSS every ``every`` turns of a ``turns``-turn runaway shown in the console, keys pressed."""
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        model = _MemoryModel(every)
        harness = Harness(Path(tmp) / "runs", Path(tmp) / "workspace", client=model, agent_sets=(DEMO,))  # type: ignore[arg-type]
        app = MeasuredConsole(harness=harness)
        rid = "runaway-10k"
        async with app.run_test(size=(160, 45)) as pilot:
            result = await _busy_run_with_keys(app, pilot, NewRunRequest("runaway", limits=Limits(max_turns=turns)),
                                               rid, interval=0.2)
            state = app.states[rid]
            result["samples"] = model.samples
            result["caches"] = model.caches
            result["messages"] = len(state.messages)
            result["transcript_mb"] = len(json.dumps(state.messages)) / 1e6
            result["transcript_items"] = len(app.transcript_view.items)
        await harness.aclose()
    return result


async def memory_without_console(turns: int, every: int) -> list[tuple[int, float, int]]:
    """The same runaway driven by the harness alone: what the run itself holds as it grows."""
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        model = _MemoryModel(every)
        async with Harness(Path(tmp) / "runs", Path(tmp) / "workspace", client=model, agent_sets=(DEMO,)) as harness:  # type: ignore[arg-type]
            state = harness.new_run("runaway", limits=Limits(max_turns=turns))
            await harness.run(state.run_id)
    return model.samples


def _growth_per_k(samples: list[tuple[int, float, int]], field: int) -> float:
    first, last = samples[0], samples[-1]
    return (last[field] - first[field]) / max(1e-9, (last[0] - first[0]) / 1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--stop-trials", type=int, default=20)
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations (slower)")
    parser.add_argument("--flood-rate", type=int, default=10_000, help="synthetic events/s (0: skip)")
    parser.add_argument("--flood-seconds", type=float, default=8.0)
    parser.add_argument("--real-entries", type=int, default=60_000, help="scan_archive reports (0: skip)")
    parser.add_argument("--real-seconds", type=float, default=4.0, help="the scan's nominal duration")
    parser.add_argument("--memory-turns", type=int, default=10_000, help="0: skip")
    parser.add_argument("--store-runs", type=int, default=STORE_RUNS, help="finished runs in the store (0: skip)")
    parser.add_argument("--live-seconds", type=float, default=10.0,
                        help="keys while 20 runs of 5 other processes go (0: skip)")
    parser.add_argument("--store-only", action="store_true", help="only the two store sections")
    args = parser.parse_args(argv)
    if args.store_only:
        store_sections(args.store_runs, args.live_seconds)
        return 0

    with provider_process() as url:
        print(f"console as `tether` runs it (the scripted provider in its own process), {os.cpu_count()} cores; "
              f"keys up/down every {KEY_INTERVAL_S * 1000:.0f} ms; target key-to-effect p99 <= {TARGET_KEY_MS:.0f} ms")
        if args.real_entries:
            r = asyncio.run(real_flood(args.real_entries, args.real_seconds, url, interval=REAL_KEY_INTERVAL_S))
            print(f"real run emitting events: `slow`, scan_archive reporting every entry: {r['events']:,} events "
                  f"in {r['run_s']:.1f} s = {r['events_per_s']:,.0f} events/s (target >= {TARGET_EVENTS_PER_S:,}); "
                  f"keys every {REAL_KEY_INTERVAL_S * 1000:.0f} ms")
            _print_keys(r)
        if args.flood_rate:
            f = asyncio.run(flood(args.flood_rate, args.flood_seconds))
            print(f"synthetic flood through the console's sink: {f['events']:,} events = "
                  f"{f['events_per_s']:,.0f} events/s; trace buffer {f['trace_buffer']} lines (bounded)")
            _print_keys(f)
        runaway = asyncio.run(keys_under_load(args.turns, args.tracemalloc, url))
        print(f"0-latency runaway, {runaway['turns']} turns in {runaway['run_s']:.1f} s "
              f"({runaway['events_per_s']:,.0f} events/s)")
        _print_keys(runaway)
        inside = asyncio.run(keys_under_load(args.turns, False, None))
        print(f"  baseline, the provider inside the console's process: {inside['run_s']:.1f} s; "
              f"key to effect median {inside['median_ms']:.1f} ms, p99 {inside['p99_ms']:.1f} ms "
              f"(own process: p99 x{runaway['p99_ms'] / inside['p99_ms']:.2f})")
        print(f"  memory: RSS {runaway['rss_before_mb']:.0f} MB before, peak {runaway['rss_peak_mb']:.0f} MB"
              + (f"; tracemalloc peak {runaway['tracemalloc_peak_mb']:.1f} MB" if runaway["tracemalloc_peak_mb"] else ""))
        if args.stop_trials:
            stops = asyncio.run(stop_latency(args.stop_trials, url))
            print(f"stop inside scan_archive, key to the stopped status on screen ({len(stops)} trials): "
                  f"median {statistics.median(stops):.1f} ms, p99 {_pct(stops, 0.99):.1f} ms, max {max(stops):.1f} ms"
                  f"   (target p99 <= {TARGET_STOP_MS:.0f} ms)")
    if args.memory_turns:
        every = max(1, args.memory_turns // 10)
        m = asyncio.run(memory_over(args.memory_turns, every))
        # The run's own growth per turn is steady, so fewer turns measure it (in a quarter of the time).
        alone_turns = min(args.memory_turns, 4 * every)
        alone = asyncio.run(memory_without_console(alone_turns, every))
        print(f"memory over a {m['turns']:,}-turn runaway (a 1 ms model answering from memory) in {m['run_s']:.0f} s, "
              f"keys every 200 ms (key to effect median {m['median_ms']:.1f} ms, p99 {m['p99_ms']:.1f} ms):")
        print("  RSS by turn: " + ", ".join(f"{t:,}: {rss:.0f} MB" for t, rss, _ in m["samples"]))
        print(f"  growth after turn {m['samples'][0][0]:,}, per 1,000 turns: RSS {_growth_per_k(m['samples'], 1):.2f} MB, "
              f"Python heap {_growth_per_k(m['samples'], 2):,.0f} blocks; the same run without a console "
              f"({alone_turns:,} turns): "
              f"{_growth_per_k(alone, 2):,.0f} blocks (the transcript the run holds to resend it: "
              f"{m['messages']:,} messages, {m['transcript_mb']:.1f} MB as JSON)")
        print(f"  the console's own views stay bounded: {m['transcript_items']} transcript items, "
              f"{m['trace_buffer']} trace lines")
        print("  " + _cache_growth(m["samples"], m["caches"]))
    store_sections(args.store_runs, args.live_seconds)
    return 0


def _cache_growth(samples: list[tuple[int, float, int]], caches: list[dict[str, tuple[int, int]]]) -> str:
    """The capped caches that grew after the first sample, with how full they are."""
    first, last = caches[0], caches[-1]
    grown = sorted(((last[k][0] - first.get(k, (0, 0))[0], k, *last[k]) for k in last), reverse=True)
    grown = [g for g in grown if g[0] > 0]
    if not grown:
        return f"capped caches (lru_cache in Rich and Textual): none grew after turn {samples[0][0]:,}"
    shown = ", ".join(f"{k.split('.', 1)[1]} +{d:,} ({n:,} of {cap:,})" for d, k, n, cap in grown[:3])
    return (f"capped caches that grew after turn {samples[0][0]:,} (lru_cache in Rich and Textual, "
            f"entries, now of cap): {shown}" + (f"; {len(grown) - 3} more" if len(grown) > 3 else ""))


def _print_keys(r: dict[str, Any]) -> None:
    print(f"  key to effect: {r['keys']} keys, {r['timeouts']} unanswered; median {r['median_ms']:.1f} ms, "
          f"p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.1f} ms   (target p99 <= {TARGET_KEY_MS:.0f} ms)")


if __name__ == "__main__":
    raise SystemExit(main())
