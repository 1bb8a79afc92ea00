"""The live export: an event sink that builds a run's spans as its events happen and hands
them to a bounded batch processor, and the sink the CLI and the console attach from the
environment.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from tether.observe.otel.delivery import _ABORT_WAIT, _DropAwareProcessor, _in_thread
from tether.observe.otel.genai import _Redactor
from tether.observe.otel.settings import (
    SHUTDOWN_TIMEOUT, _env_export_timeout, _env_true, _quiet_sdk_logs, _resource, _tracer, capture_content_from_env,
    export_configured, traces_endpoint,
)
from tether.observe.otel.spans import _SPAN_KINDS, _SpanBuilder
from tether.vocab.events import Event
from tether.observe.otel.metrics import CostMetrics, metrics_endpoint, metrics_wanted

log = logging.getLogger("tether.observe.otel")


class OtelSink:
    """An event sink that exports runs as OpenTelemetry spans (GenAI conventions).

    Without ``tracer_provider``, the sink makes its own (service name ``tether`` unless
    ``OTEL_SERVICE_NAME`` says otherwise; not the global one) exporting through
    ``exporter`` (default: OTLP/HTTP at :func:`traces_endpoint`, headers and timeout from
    the ``OTEL_EXPORTER_OTLP_*`` variables) with a bounded batch processor; spans lost on
    the way are reported through ``on_dropped(run_id, count)``. With ``tracer_provider``,
    spans go wherever its processors send them (nothing is reported as dropped).

    ``state_of(run_id)`` may give a run's live state (``Harness.live.get``): its endpoint
    names the provider and the server, and with ``capture_content`` its transcript gives
    the chat spans' input and output messages and the tool calls' full results (without
    it, a result is the event's 200-character preview). ``secrets`` are redacted from
    every exported string, as are Authorization headers and bearer tokens.

    Call it on the run's event loop (it never blocks: spans are ended in memory and
    exported on the processor's thread); call :meth:`shutdown` once at exit, from where
    blocking for up to ``shutdown_timeout`` seconds (default :data:`SHUTDOWN_TIMEOUT`; a
    CLI command's: :data:`CLI_EXPORT_TIMEOUT`) is fine.
    """

    def __init__(
        self,
        tracer_provider: Any = None,
        *,
        exporter: SpanExporter | None = None,
        capture_content: bool = False,
        on_dropped: Callable[[str, int], None] | None = None,
        state_of: Callable[[str], Any] | None = None,
        provider_name: str | None = None,
        secrets: Iterable[str] = (),
        max_queue_size: int | None = None,
        max_export_batch_size: int | None = None,
        schedule_delay_millis: float | None = None,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
    ) -> None:
        if tracer_provider is not None and exporter is not None:
            raise ValueError("give a tracer_provider or an exporter, not both")
        self.capture_content = capture_content
        self.on_dropped = on_dropped
        self.dropped: Counter[str] = Counter()
        """Spans lost so far, by why: ``queue_full``, ``export_failed``, ``unsent_at_shutdown``."""
        self.endpoint: str | None = None
        self.metrics: Any = None
        """The runs' tokens and cost as metrics (tether.observe.otel.metrics), when attached."""
        self.shutdown_timeout = shutdown_timeout
        """What :meth:`shutdown` waits at most when not told otherwise."""
        self._lock = threading.RLock()
        self._lost_lock = threading.Lock()
        self._lost: Counter[str] = Counter()
        self._closed = False
        self._processor: _DropAwareProcessor | None = None
        if tracer_provider is None:
            _quiet_sdk_logs()
            if exporter is None:
                self.endpoint = traces_endpoint()
                exporter = OTLPSpanExporter(endpoint=self.endpoint)
            else:
                self.endpoint = getattr(exporter, "_endpoint", None)
            if max_queue_size is not None and max_export_batch_size is None:
                max_export_batch_size = min(max_queue_size, 512)
            self._processor = _DropAwareProcessor(
                exporter, self._span_lost, max_queue_size=max_queue_size,
                max_export_batch_size=max_export_batch_size, schedule_delay_millis=schedule_delay_millis)
            tracer_provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
            tracer_provider.add_span_processor(self._processor)
            self._owns_provider = True
        else:
            self._owns_provider = False
        self.tracer_provider = tracer_provider
        self._builder = _SpanBuilder(_tracer(tracer_provider), capture_content=capture_content,
                                     provider_name=provider_name, state_of=state_of,
                                     redact=_Redactor(secrets))

    @property
    def state_of(self) -> Callable[[str], Any] | None:
        return self._builder.state_of

    @state_of.setter
    def state_of(self, value: Callable[[str], Any] | None) -> None:
        self._builder.state_of = value

    def __call__(self, event: Event) -> None:
        if self.metrics is not None and not self._closed:
            self.metrics(event)
        if event.kind in _SPAN_KINDS and not self._closed:
            try:
                with self._lock:
                    self._builder.handle(event.record())
            except Exception:  # telemetry must never break the run it watches
                log.exception("OpenTelemetry sink failed on %s", event.kind)
        if self._lost:
            self._report_drops()

    # -- lost spans
    def _span_lost(self, span: ReadableSpan, why: str) -> None:
        run_id = str((span.attributes or {}).get("gen_ai.conversation.id", ""))
        with self._lost_lock:
            self._lost[run_id] += 1
            self.dropped[why] += 1

    def _report_drops(self) -> None:
        with self._lost_lock:
            lost, self._lost = self._lost, Counter()
        if self.on_dropped is None:
            return
        for run_id, count in lost.items():
            try:
                self.on_dropped(run_id, count)
            except Exception:
                log.exception("on_dropped failed for run %s", run_id)

    # -- flushing and closing
    def force_flush(self, timeout: float = 5.0) -> bool:
        """Export what is queued now; wait at most ``timeout`` seconds. Blocking: not for the
        event loop's thread. True when everything queued was handed over in time."""
        done = _in_thread(self.tracer_provider.force_flush, timeout, "tether-otel-flush")
        self._report_drops()
        return done

    def shutdown(self, timeout: float | None = None) -> bool:
        """End the spans of runs still open (``tether.incomplete``), export what is queued,
        and stop the exporter's thread, waiting at most ``timeout`` seconds (default:
        :attr:`shutdown_timeout`); spans still unsent then are reported as dropped.
        Idempotent. True when all was delivered in time."""
        timeout = self.shutdown_timeout if timeout is None else max(0.0, timeout)
        with self._lock:
            if self._closed:
                return True
            self._closed = True
        if self.metrics is not None:  # within the same wait: what it takes, the spans do not get
            began = time.monotonic()
            _in_thread(lambda: self.metrics.shutdown(timeout / 4), timeout / 4, "tether-otel-metrics")
            timeout = max(0.0, timeout - (time.monotonic() - began))
        with self._lock:
            self._builder.close_all("the process stopped exporting before the run stopped", time.time_ns())
        if not self._owns_provider:
            done = _in_thread(lambda: self.tracer_provider.force_flush(int(timeout * 1000)), timeout,
                              "tether-otel-flush")
            self._report_drops()
            return done
        assert self._processor is not None
        abort = min(_ABORT_WAIT, timeout / 10)  # kept out of the wait for delivery: the total stays in timeout
        done = _in_thread(self.tracer_provider.shutdown, timeout - abort, "tether-otel-shutdown")
        if not done:  # a collector that is down or slow: stop retrying, count what is left
            _in_thread(self._processor.accounting.shutdown, abort, "tether-otel-abort")
        for span in self._processor.abandon():
            self._span_lost(span, "unsent_at_shutdown")
        self._report_drops()
        return done and not self.dropped


def otel_sink_from_env(otlp_url: str | None = None, *, on_dropped: Callable[[str, int], None] | None = None,
                       state_of: Callable[[str], Any] | None = None, secrets: Iterable[str] = (),
                       capture_content: bool | None = None, timeout: float | None = None) -> OtelSink | None:
    """The sink the CLI and the console attach: exporting to ``otlp_url`` (``--otlp``), else
    to the endpoint ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``
    name; None when neither is set (or ``OTEL_SDK_DISABLED=true``). Content is captured when
    ``capture_content`` or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says so.

    ``timeout``: the most the collector may hold the process, in seconds: it caps the
    exporter's timeout (each export, retries included) and is :meth:`OtelSink.shutdown`'s
    wait; a CLI command passes :data:`CLI_EXPORT_TIMEOUT`. None (the console): the
    exporter's timeout from the OTLP variables and :data:`SHUTDOWN_TIMEOUT` at exit."""
    if _env_true("OTEL_SDK_DISABLED"):
        return None
    if not otlp_url and not export_configured():
        return None
    endpoint = traces_endpoint(otlp_url)
    keys = [*secrets, os.environ.get("LLM_API_KEY") or ""]
    export_timeout: float | None = None
    if timeout is not None:
        timeout = max(0.0, timeout)
        env_timeout = _env_export_timeout()
        export_timeout = timeout if env_timeout is None else min(timeout, env_timeout)
    sink = OtelSink(exporter=OTLPSpanExporter(endpoint=endpoint, timeout=export_timeout),
                    capture_content=capture_content_from_env() if capture_content is None else capture_content,
                    on_dropped=on_dropped, state_of=state_of, secrets=keys,
                    shutdown_timeout=SHUTDOWN_TIMEOUT if timeout is None else timeout)
    sink.endpoint = endpoint

    if metrics_wanted():
        sink.metrics = CostMetrics(endpoint=metrics_endpoint(endpoint), state_of=state_of, timeout=export_timeout)
    return sink
