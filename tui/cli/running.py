"""What a command that runs a run in this process works with (``run``, ``resume``, a decision
no process takes, ``replay``, the server's runs): the harness, exporting spans when
OpenTelemetry is configured, the run's Stop signal, how long it waits at an approval, and
the outcome it prints."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.models.tokens import encoding
from tether.observe.report import summary, text_summary
from tether.vocab.cancel import CancelSignal
from tether.tui.cli import context


def harness(args: argparse.Namespace, **kw: Any) -> Any:
    """The harness of a command, exporting its runs' spans when OpenTelemetry is configured
    (``--otlp URL`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``): the exporter is imported only then."""
    made = Harness(workspace=getattr(args, "workspace", None), config=context.config(args),
                   store=context.store_of(args), agent_sets=(DEMO,), operator_name=getattr(args, "who", None), **kw)
    otlp = getattr(args, "otlp", None)
    if otlp or _otel_configured():
        # lazy: OpenTelemetry's SDK and exporter, only when spans are exported (a decision loads none:
        # tests/processes/test_cold_start.py)
        from tether.observe.otel import settings, sink

        exporting = sink.otel_sink_from_env(otlp, on_dropped=made.note_dropped, state_of=made.live.get,
                                            secrets=made.secrets(), timeout=settings.CLI_EXPORT_TIMEOUT)
        if exporting is not None:
            made.sinks.append(exporting)
    return made


def harness_for(args: argparse.Namespace) -> Any:
    """A harness on the run's runs dir; the run's agent is rebuilt from what the run saved."""
    return harness(args, api_key=os.environ.get("LLM_API_KEY"))


def _otel_configured() -> bool:
    return any(os.environ.get(name) for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


async def stop_signal(args: argparse.Namespace) -> CancelSignal:
    """The run's Stop signal. With --cancel-after it fires that long after the run starts:
    the rank file is loaded first, so start-up does not eat into the time."""
    signal = CancelSignal()
    seconds = getattr(args, "cancel_after", None)
    if seconds is not None:
        await asyncio.to_thread(encoding)
        asyncio.get_running_loop().call_later(seconds, signal.cancel, f"cancelled after {seconds:g} s (--cancel-after)")
    return signal


def waiting(args: argparse.Namespace) -> float | None:
    """How long the process waits at an approval (``--wait-for-decision``), or None: it exits 5."""
    return args.decision_timeout if getattr(args, "wait_for_decision", False) else None


def emit_outcome(args: argparse.Namespace, outcome: Any) -> int:
    """A run's outcome as its summary (or ``--json``); the exit code is the run's own."""
    state = outcome.state
    if args.json:
        print(json.dumps(summary(state, outcome.tool_runs, outcome.ms)))
    else:
        print(text_summary(state, len(outcome.tool_runs), outcome.ms))
    return state.exit_code
