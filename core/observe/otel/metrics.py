"""What runs cost, as OpenTelemetry metrics (issue 41, item 6): the GenAI semantic conventions'
``gen_ai.client.token.usage`` histogram (``gen_ai.token.type`` input or output) and a counter
``tether.cost`` in USD, each with the model (``gen_ai.request.model``), the agent
(``tether.agent``) and the source (``tether.source``: tether, acp, claude-code, …), so Grafana or
Prometheus can draw spend per agent, model and day as ``tether costs`` does.

Sent through the same OTLP/HTTP settings as the spans (:func:`otel_sink_from_env` attaches it):
the traces endpoint's ``/v1/traces`` becomes ``/v1/metrics``, or
``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` as it is; ``OTEL_METRICS_EXPORTER=none`` turns them off.
Each model call (a ``turn`` event) records its tokens and what it cost the run itself (a
subagent's calls are its own run's). Exported every :data:`EXPORT_EVERY_MS` and at shutdown.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader

from tether.observe.otel.settings import TRACES_PATH, _resource
from tether.vocab.events import Event
from tether.vocab.audit import run_source

EXPORT_EVERY_MS = 30_000
METRICS_PATH = "/v1/metrics"


def metrics_endpoint(traces: str) -> str:
    """Where the metrics go: ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``, else beside the spans."""
    named = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip()
    if named:
        return named
    return traces.removesuffix(TRACES_PATH) + METRICS_PATH


def metrics_wanted() -> bool:
    return os.environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() != "none"


class CostMetrics:
    """An event sink recording each model call's tokens and cost (see the module). ``reader``
    for tests (an in-memory one); else an OTLP/HTTP exporter to ``endpoint``."""

    def __init__(self, *, endpoint: str | None = None, reader: MetricReader | None = None,
                 state_of: Callable[[str], Any] | None = None, timeout: float | None = None) -> None:
        if reader is None:
            # lazy: the OTLP exporter loads only when an endpoint is set (tests/processes/test_cold_start.py)
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint, timeout=timeout),
                                                   export_interval_millis=EXPORT_EVERY_MS)
        self.provider = MeterProvider(resource=_resource(), metric_readers=[reader], shutdown_on_exit=False)
        meter = self.provider.get_meter("tether")
        self.tokens = meter.create_histogram("gen_ai.client.token.usage", unit="{token}",
                                             description="Tokens used by a model call, input and output")
        self.cost = meter.create_counter("tether.cost", unit="USD", description="What the model calls cost")
        self.state_of = state_of
        self._runs: dict[str, dict[str, str]] = {}
        self._spent: dict[str, float] = {}

    def __call__(self, event: Event) -> None:
        try:
            if event.kind == "run_started":
                self._started(event)
            elif event.kind == "turn":
                self._turn(event)
        except Exception:  # telemetry must never break the run it watches
            logging.getLogger(__name__).exception("OpenTelemetry metrics failed on %s", event.kind)

    def _started(self, event: Any) -> None:
        state = self.state_of(event.run_id) if self.state_of is not None else None
        source = "tether"
        if state is not None:
            source = run_source(state)
            self._spent[event.run_id] = state.cost_usd - state.child_cost_usd
        self._runs[event.run_id] = {"gen_ai.request.model": event.model, "gen_ai.operation.name": "chat",
                                    "tether.agent": event.agent or event.model, "tether.source": source}

    def _turn(self, event: Any) -> None:
        attributes = self._runs.get(event.run_id) or {"gen_ai.operation.name": "chat"}
        self.tokens.record(event.prompt_tokens, {**attributes, "gen_ai.token.type": "input"})
        self.tokens.record(event.completion_tokens, {**attributes, "gen_ai.token.type": "output"})
        state = self.state_of(event.run_id) if self.state_of is not None else None
        own = (state.cost_usd - state.child_cost_usd) if state is not None else event.cost_usd
        spent = max(0.0, own - self._spent.get(event.run_id, 0.0))
        self._spent[event.run_id] = own
        if spent:
            self.cost.add(spent, attributes)

    def shutdown(self, timeout: float) -> None:
        """Export what was recorded and stop (blocking, at most about ``timeout`` seconds)."""
        self.provider.shutdown(timeout_millis=max(1.0, timeout * 1000))
