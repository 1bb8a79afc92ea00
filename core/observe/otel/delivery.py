"""Delivery, and what was lost on the way: a batch processor that counts the spans it could
not deliver (queue full, collector refused, still unsent at exit), and the bounded waits
that keep a collector that is down or slow from holding a run or a process's exit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

log = logging.getLogger("tether.observe.otel")

_ABORT_WAIT = 1.0  # at most this, and a tenth of shutdown's time, to stop an exporter still retrying


class _AccountingExporter(SpanExporter):
    """The exporter the batch processor calls, on its own thread: tells the processor what
    left the queue and what the collector did not take."""

    def __init__(self, inner: SpanExporter, processor: "_DropAwareProcessor") -> None:
        self.inner = inner
        self.processor = processor
        self._shut = False
        self._shut_lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.processor._taken(len(spans))
        try:
            result = self.inner.export(spans)
        except Exception:
            log.debug("span export raised", exc_info=True)
            result = SpanExportResult.FAILURE
        self.processor._done(spans, delivered=result is SpanExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        with self._shut_lock:
            if self._shut:
                return
            self._shut = True
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _DropAwareProcessor(BatchSpanProcessor):
    """A BatchSpanProcessor that says which spans were lost.

    The SDK's processor (1.45) keeps a bounded deque and, when it is full, silently pushes
    out the oldest span (a log line and an internal metric, nothing a caller can see). Here
    the count of queued spans is kept alongside: a span that would overflow the queue is
    refused before it reaches the SDK and reported, as is every span the exporter says it
    could not deliver, and, at :meth:`abandon`, every span still unsent.
    """

    def __init__(self, exporter: SpanExporter, on_lost: Callable[[ReadableSpan, str], None], *,
                 max_queue_size: int | None = None, max_export_batch_size: int | None = None,
                 schedule_delay_millis: float | None = None, export_timeout_millis: float | None = None) -> None:
        self._gate = threading.Lock()
        self._queued = 0
        self._unsent: dict[int, ReadableSpan] = {}
        self._abandoned = False
        self._on_lost = on_lost
        self.accounting = _AccountingExporter(exporter, self)
        super().__init__(self.accounting, max_queue_size=max_queue_size,
                         max_export_batch_size=max_export_batch_size,
                         schedule_delay_millis=schedule_delay_millis, export_timeout_millis=export_timeout_millis)
        # The size the SDK settled on (the argument, else OTEL_BSP_MAX_QUEUE_SIZE, else 2048).
        self._capacity = int(getattr(getattr(self, "_batch_processor", None), "_max_queue_size", 0)
                             or max_queue_size or 2048)

    def on_end(self, span: ReadableSpan) -> None:
        if not (span.context and span.context.trace_flags.sampled):
            return
        with self._gate:
            full = self._abandoned or self._queued >= self._capacity
            if not full:
                self._queued += 1
                self._unsent[id(span)] = span
        if full:
            self._on_lost(span, "queue_full")
            return
        super().on_end(span)

    def _taken(self, count: int) -> None:
        with self._gate:
            self._queued = max(0, self._queued - count)

    def _done(self, spans: Sequence[ReadableSpan], *, delivered: bool) -> None:
        with self._gate:
            known = [s for s in spans if self._unsent.pop(id(s), None) is not None]
            if self._abandoned:
                return
        if not delivered:
            for span in known:
                self._on_lost(span, "export_failed")

    def abandon(self) -> list[ReadableSpan]:
        """Stop accounting; the spans not delivered yet (queued or in flight)."""
        with self._gate:
            self._abandoned = True
            left = list(self._unsent.values())
            self._unsent.clear()
            self._queued = 0
        return left


def _in_thread(fn: Callable[[], Any], timeout: float, name: str) -> bool:
    """Run ``fn`` on a daemon thread and wait for it at most ``timeout`` seconds."""
    def target() -> None:
        try:
            fn()
        except Exception:
            log.debug("%s failed", name, exc_info=True)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(max(0.0, timeout))
    return not thread.is_alive()
