"""``make bench``: every benchmark, one after the other, each with how long it took and
how fast the host was (:func:`~tests.benchmarks.bench_harness.host_speed_ms`) before it.

``--only NAME[,NAME...]`` runs only those (the names below: ``provider``, ``acp``...)."""

import argparse
import time
from collections.abc import Callable

from tests.benchmarks import bench_agents_check
from tests.benchmarks import (bench_acp, bench_agents, bench_changes, bench_checkpoints, bench_cold_start, bench_console, bench_costs, bench_decisions,
                               bench_harness, bench_otel_exit, bench_pgstore, bench_provider, bench_sandbox, bench_stop, bench_store,
                               bench_stream, bench_tracked, bench_web, bench_workers, bench_workspaces)

BENCHES: list[tuple[str, str, Callable[[], object]]] = [
    ("provider", "provider", bench_provider.main),
    ("harness", "harness", lambda: bench_harness.main([])),
    ("console", "console", lambda: bench_console.main([])),
    ("stream", "streaming on the console", bench_stream.main),
    ("store", "store", lambda: bench_store.main([])),
    ("pgstore", "store on PostgreSQL", bench_pgstore.main),
    ("decisions", "the record of decisions", lambda: bench_decisions.main([])),
    ("costs", "tether costs over 100,000 runs on each store", lambda: bench_costs.main([])),
    ("stop", "stop across processes", bench_stop.main_remote),
    ("cold-start", "each command's cold start: its imports as a new process", lambda: bench_cold_start.main([])),
    ("otel-exit", "a CLI command's exit with an OTLP collector down", lambda: bench_otel_exit.main([])),
    ("workers", "workers on PostgreSQL", bench_workers.main),
    ("waiting", "2 workers at concurrency 8 beside 1,000 runs waiting for approval",
     lambda: bench_workers.main(["--configs", "2x8", "--waiting", "1000"])),
    ("acp", "ACP agents under Tether", lambda: bench_acp.main([])),
    ("agents", "tether agents with five ACP agents, cold and warm", lambda: bench_agents.main([])),
    ("agents-check", "tether agents --check with five real ACP agents, cold", lambda: bench_agents_check.main([])),
    ("sandbox", "the OS sandbox's added start time for an agent", lambda: bench_sandbox.main([])),
    ("tracked", "the run API per reported event", lambda: bench_tracked.main([])),
    ("web", "tether serve: notifications, links, the approvals page, memory", lambda: bench_web.main([])),
    ("workspaces", "a run's own workspace against git worktree add, 10,000 files", lambda: bench_workspaces.main([])),
    ("changes", "a write in a run's workspace to the console's Changes pane", lambda: bench_changes.main([])),
    ("checkpoints", "checkpoints against git commit, step 1,000 against 10, rewind, undo, fork",
     lambda: bench_checkpoints.main([])),
]


def _section(name: str, run: Callable[[], object]) -> None:
    speed = bench_harness.host_speed_ms()
    started = time.perf_counter()
    run()
    print(f"[{name}: {time.perf_counter() - started:.0f} s; host speed check before it: {speed:.1f} ms]\n",
          flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="make bench: every benchmark, or some")
    parser.add_argument("--only", help="comma-separated names: " + ", ".join(key for key, _, _ in BENCHES))
    args = parser.parse_args()
    chosen = {name.strip() for name in args.only.split(",")} if args.only else {key for key, _, _ in BENCHES}
    unknown = chosen - {key for key, _, _ in BENCHES}
    if unknown:
        parser.error(f"no benchmark named {', '.join(sorted(unknown))}")
    for key, title, run in BENCHES:
        if key in chosen:
            _section(title, run)
    print(f"[host speed check at the end: {bench_harness.host_speed_ms():.1f} ms]")
