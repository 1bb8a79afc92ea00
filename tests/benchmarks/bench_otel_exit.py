"""What an OpenTelemetry collector costs a CLI command at exit (issue 31, item 4).

Four ways, one of each per round so that load changes hit them all alike (the first
round warms up, untimed), the median of each:

* none: no ``OTEL_*`` variable (the baseline: the exporter is not even imported);
* up: ``OTEL_EXPORTER_OTLP_ENDPOINT`` at an OTLP/HTTP receiver in this process that takes
  every request;
* refused: the endpoint is a loopback port nobody listens on (the issue: the exporter
  retried with backoff and the command waited 5 s at exit);
* silent: a receiver that accepts and never answers, the worst case: the command waits
  its bound, :data:`tether.observe.otel.settings.CLI_EXPORT_TIMEOUT`, and no more.

Two figures:

* the exit itself, in-process: a ``plan`` run through a :class:`~tether.harness.Harness`
  with the sink the CLI attaches, then the time ``Harness.aclose()`` takes (it shuts the
  sink down, as the command does on its way out); and once, refused, with the console's
  settings (:data:`tether.observe.otel.settings.SHUTDOWN_TIMEOUT`, the exporter's own timeout), which is
  what every CLI command paid before;
* ``tether run plan`` as a subprocess, interpreter start included (importing the exporter
  is most of what "up" adds to "none").

Each figure is checked: the receiver that is up got every run's 6 spans, and the trace of
every refused and silent run says its 6 spans were dropped.

Run: ``.venv/bin/python -m tests.benchmarks.bench_otel_exit [--repeats N]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tether.store.files.layout import TRACE_FILE
from tether.demo.agents import DEMO
from tests.benchmarks import peers

# tether.observe.otel (and with it the OpenTelemetry SDK) is imported when this section runs, not
# when `make bench` imports every section: the console's memory figures are taken before.
REPEATS = 5  # subprocess runs each way
IN_PROCESS_REPEATS = 9
SPANS = 6  # a plan run: invoke_agent, 3 chats, 2 tool calls
WAYS = ("none", "up", "refused", "silent")
LABELS = {"none": "none (no OTEL_* variable)", "up": "up (a receiver on loopback)",
          "refused": "refusing connections", "silent": "never answering (the worst case)"}


class _Receiver:
    """An OTLP/HTTP endpoint on loopback: answers every POST with an empty 200, or (``silent``)
    reads it and never answers until :meth:`stop`."""

    def __init__(self, *, silent: bool = False) -> None:
        self.requests = 0
        self.spans = 0
        self.metrics = 0
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests += 1
                if silent:
                    receiver._release.wait(60)
                    return
                if self.path.endswith("/v1/metrics"):  # a command's metrics, at its exit: counted, not spans
                    ExportMetricsServiceRequest().ParseFromString(body)
                    receiver.metrics += 1
                else:
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    receiver.spans += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="bench-otlp", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()


def _refusing_url() -> str:
    """A loopback port that was free a moment ago: a connection to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@contextmanager
def _endpoints() -> Iterator[tuple[dict[str, Callable[[], str | None]], _Receiver]]:
    """Each way's endpoint (a new refusing port each time), and the receiver that is up."""
    up, silent = _Receiver(), _Receiver(silent=True)
    try:
        yield {"none": lambda: None, "up": lambda: up.url, "refused": _refusing_url, "silent": lambda: silent.url}, up
    finally:
        up.stop()
        silent.stop()


@contextmanager
def _no_otel_env() -> Iterator[None]:
    """Without the ``OTEL_*`` variables (``quiet_env`` sets ``OTEL_SDK_DISABLED``) for a while."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("OTEL_")}
    try:
        yield
    finally:
        os.environ.update(saved)


def _dropped(runs: Path, run_id: str) -> int:
    trace = runs / run_id / TRACE_FILE
    return sum(int(json.loads(line).get("spans") or 0) for line in trace.read_text().splitlines()
               if '"telemetry_dropped"' in line)


def _check(way: str, runs: Path, run_id: str) -> None:
    if way in ("refused", "silent"):
        lost = _dropped(runs, run_id)
        assert lost == SPANS, f"{way}: the trace of {run_id} records {lost} dropped spans, not {SPANS}"


# ---- the exit itself, in-process --------------------------------------------------------------

async def _exit_s(endpoint: str | None, timeout: float | None, where: Path) -> tuple[float, str]:
    """A plan run with the sink the CLI attaches (``timeout``: its bound; None: the console's
    settings), then how long ``Harness.aclose()`` takes."""
    from tether.harness import Harness
    from tether.observe.otel.sink import otel_sink_from_env

    harness = Harness(where / "runs", where / "ws", agent_sets=(DEMO,))
    if endpoint:
        sink = otel_sink_from_env(endpoint, on_dropped=harness.note_dropped, state_of=harness.live.get,
                                  timeout=timeout)
        assert sink is not None
        harness.sinks.append(sink)
    state = harness.new_run("plan")
    await harness.run(state.run_id)
    started = time.perf_counter()
    await harness.aclose()
    return time.perf_counter() - started, state.run_id


def exit_figures(repeats: int, where: Path) -> tuple[dict[str, list[float]], float]:
    from tether.observe.otel.settings import CLI_EXPORT_TIMEOUT

    with _no_otel_env(), _endpoints() as (endpoints, up):
        times: dict[str, list[float]] = {way: [] for way in WAYS}
        for round_ in range(repeats + 1):
            for way in WAYS:
                wall, run_id = asyncio.run(_exit_s(endpoints[way](), CLI_EXPORT_TIMEOUT, where))
                _check(way, where / "runs", run_id)
                if round_:
                    times[way].append(wall)
        console, run_id = asyncio.run(_exit_s(endpoints["refused"](), None, where))
        _check("refused", where / "runs", run_id)
        assert up.spans == SPANS * (repeats + 1), f"the receiver got {up.spans} spans, not {SPANS * (repeats + 1)}"
    return times, console


# ---- tether run plan, a subprocess -------------------------------------------------------------

def _env(endpoint: str | None, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}  # quiet_env disables the SDK
    env["TETHER_HOME"] = str(home)
    if endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    return env


def _timed_run(endpoint: str | None, where: Path, run_id: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tether.tui.cli", "run", "plan", "--run-id", run_id,
                    "--runs-dir", str(where / "runs"), "--workspace", str(where / "ws")],
                   env=_env(endpoint, where), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   timeout=120)
    return time.perf_counter() - started


def command_figures(repeats: int, where: Path) -> dict[str, list[float]]:
    with _endpoints() as (endpoints, up):
        times: dict[str, list[float]] = {way: [] for way in WAYS}
        for round_ in range(repeats + 1):
            for way in WAYS:
                run_id = f"{way}-{round_}"
                wall = _timed_run(endpoints[way](), where, run_id)
                _check(way, where / "runs", run_id)
                if round_:
                    times[way].append(wall)
        assert up.spans == SPANS * (repeats + 1), f"the receiver got {up.spans} spans, not {SPANS * (repeats + 1)}"
        assert up.metrics == repeats + 1, f"the receiver got {up.metrics} metric exports, not {repeats + 1}"
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_otel_exit")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="subprocess runs each way")
    parser.add_argument("--exit-repeats", type=int, default=IN_PROCESS_REPEATS, help="in-process exits each way")
    args = parser.parse_args(argv)
    from tether.observe.otel.settings import CLI_EXPORT_TIMEOUT, SHUTDOWN_TIMEOUT

    peers.quiet_env()
    with peers.scratch_dir("otel-exit") as tmp:
        exits, console = exit_figures(args.exit_repeats, Path(tmp) / "in-process")
        commands = command_figures(args.repeats, Path(tmp) / "commands")
    width = max(len(label) for label in LABELS.values())
    print(f"A CLI command's exit with an OTLP collector (bound: CLI_EXPORT_TIMEOUT = {CLI_EXPORT_TIMEOUT:g} s)")
    exit_ms = {way: statistics.median(values) * 1000 for way, values in exits.items()}
    print(f"  the exit itself, Harness.aclose() after a plan run, in-process, median of {args.exit_repeats}:")
    for way, label in LABELS.items():
        print(f"    {label:<{width}}  {exit_ms[way]:8.1f} ms")
    print(f"    {'refusing, the console settings':<{width}}  {console * 1000:8.1f} ms  (once; "
          f"SHUTDOWN_TIMEOUT = {SHUTDOWN_TIMEOUT:g} s: what every CLI command waited before)")
    median = {way: statistics.median(values) for way, values in commands.items()}
    base = median["none"]
    print(f"  `tether run plan` as a subprocess (interpreter start included), median of {args.repeats}:")
    for way, label in LABELS.items():
        print(f"    {label:<{width}}  {median[way]:6.3f} s  x{median[way] / base:4.2f}  "
              f"{(median[way] - base) * 1000:+6.0f} ms vs none")
    refused = exit_ms["refused"] / 1000
    print(f"  the exit's wait for a refusing collector  {exit_ms['refused']:.1f} ms   "
          f"target <= {CLI_EXPORT_TIMEOUT * 1000:.0f} ms   {'met' if refused <= CLI_EXPORT_TIMEOUT else 'MISSED'}")
    print(f"  (every refused and silent run's trace records its {SPANS} spans as dropped; the receiver that is up "
          f"got all of them, and each run's metrics)")


if __name__ == "__main__":
    main()
