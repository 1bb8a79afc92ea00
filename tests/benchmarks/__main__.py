"""``make bench``: every benchmark, one after the other, each with how long it took and
how fast the host was (:func:`~tests.benchmarks.bench_harness.host_speed_ms`) before it."""

import time
from collections.abc import Callable

from tests.benchmarks import (bench_console, bench_harness, bench_otel_exit, bench_pgstore, bench_provider, bench_stop,
                               bench_store, bench_stream, bench_workers)


def _section(name: str, run: Callable[[], object]) -> None:
    speed = bench_harness.host_speed_ms()
    started = time.perf_counter()
    run()
    print(f"[{name}: {time.perf_counter() - started:.0f} s; host speed check before it: {speed:.1f} ms]\n",
          flush=True)


if __name__ == "__main__":
    _section("provider", bench_provider.main)
    _section("harness", lambda: bench_harness.main([]))
    _section("console", bench_console.main)
    _section("streaming on the console", bench_stream.main)
    _section("store", lambda: bench_store.main([]))
    _section("store on PostgreSQL", bench_pgstore.main)
    _section("stop across processes", bench_stop.main_remote)
    _section("a CLI command's exit with an OTLP collector down", lambda: bench_otel_exit.main([]))
    _section("workers on PostgreSQL", bench_workers.main)
    print(f"[host speed check at the end: {bench_harness.host_speed_ms():.1f} ms]")
