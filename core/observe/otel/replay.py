"""After the fact: a finished run's spans (its subagents' nested under it) built from its
trace in the store, with the recorded times, and sent to a collector
(``tether export-otel``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from tether.observe.otel.genai import _Redactor
from tether.observe.otel.settings import _quiet_sdk_logs, _resource, _tracer, shown_url, traces_endpoint
from tether.observe.otel.spans import _SpanBuilder
from tether.vocab.state import StateError
from tether.store.protocol import Store
from tether.store.spec import open_store

_EXPORT_BATCH = 512


class OtelExportError(Exception):
    """The collector did not take the spans (``export_run``)."""


class _Collected(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


class _LastWords(logging.Handler):
    """Keeps the exporter's last complaint, for the error message."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.last = record.getMessage()
        except Exception:
            pass


def _family(store: Store, run_id: str) -> list[str]:
    """The run and its subagents (their ids start with the parent's and a dot), parents first."""
    found = [run_id]
    prefix = run_id + "."
    candidates = store.traced_ids(prefix)
    if candidates:
        known = {run_id}
        for child in sorted(candidates, key=lambda c: c.count(".")):
            parent = next((r.get("parent_run_id") for r in store.read_trace(child)
                           if r.get("kind") == "run_started"), None)
            if parent in known:
                known.add(child)
                found.append(child)
    return found


def build_run_spans(store: Store | Path | str, run_id: str, *, capture_content: bool = False,
                    provider_name: str | None = None, secrets: Iterable[str] = ()) -> list[ReadableSpan]:
    """A finished run's spans (and its subagents', nested), from its trace in ``store`` (a
    :class:`~tether.store.protocol.Store`, or a runs dir), with the recorded times. Runs left open
    at the end of their trace (a killed process) are ended at their last event with
    ``tether.incomplete``."""
    if isinstance(store, (Path, str)):
        store = open_store(Path(store))
    path = store.trace_file(run_id)
    if path is not None:
        if not path.is_file():
            raise StateError(f"no trace for run {run_id} at {path}")
    elif not store.exists(run_id) or next(iter(store.read_trace(run_id)), None) is None:
        raise StateError(f"no trace for run {run_id} in {store.where}")
    family = _family(store, run_id)
    states: dict[str, Any] = {}
    for rid in family:
        try:
            states[rid] = store.load(rid)
        except StateError:
            pass
    records: list[tuple[float, int, int, dict[str, Any]]] = []
    for order, rid in enumerate(family):
        for record in store.read_trace(rid):
            if record.get("run_id") == rid:
                records.append((float(record.get("ts") or 0.0), order, int(record.get("seq") or 0), record))
    records.sort(key=lambda r: r[:3])
    collected = _Collected()
    provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(collected))
    builder = _SpanBuilder(_tracer(provider), capture_content=capture_content, provider_name=provider_name,
                           state_of=states.get, redact=_Redactor([*secrets, os.environ.get("LLM_API_KEY") or ""]),
                           replay=True)
    for *_, record in records:
        builder.handle(record)
    builder.close_all("the trace ends before the run stopped (its process was killed?)")
    provider.shutdown()
    return collected.spans


def export_run(store: Store | Path | str, run_id: str, exporter_or_endpoint: SpanExporter | str | None = None, *,
               capture_content: bool = False, provider_name: str | None = None, secrets: Iterable[str] = (),
               timeout: float | None = None) -> int:
    """Send a finished run's spans (its subagents' nested under it) to ``exporter_or_endpoint``:
    a SpanExporter, or an OTLP/HTTP URL (see :func:`traces_endpoint`; None: the environment's).
    Blocking (it waits for the collector): call it off the event loop. Returns the number of
    spans sent; raises :class:`OtelExportError` when the collector does not take them and
    :class:`~tether.vocab.state.StateError` when there is no such run."""
    spans = build_run_spans(store, run_id, capture_content=capture_content, provider_name=provider_name,
                            secrets=secrets)
    if isinstance(exporter_or_endpoint, SpanExporter):
        exporter, endpoint, owned = exporter_or_endpoint, None, False
    else:
        endpoint = traces_endpoint(exporter_or_endpoint)
        _quiet_sdk_logs()
        exporter, owned = OTLPSpanExporter(endpoint=endpoint, timeout=timeout), True
    words = _LastWords()
    otel_log = logging.getLogger("opentelemetry.exporter")
    otel_log.addHandler(words)
    try:
        for i in range(0, len(spans), _EXPORT_BATCH):
            if exporter.export(spans[i:i + _EXPORT_BATCH]) is not SpanExportResult.SUCCESS:
                where = f"the collector at {shown_url(endpoint)}" if endpoint else "the exporter"
                raise OtelExportError(f"{where} did not take the spans of run {run_id}"
                                      + (f": {words.last}" if words.last else ""))
    finally:
        otel_log.removeHandler(words)
        if owned:
            exporter.shutdown()
    return len(spans)
