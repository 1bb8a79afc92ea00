"""OpenTelemetry export of runs: spans that follow the GenAI semantic conventions.

The spans are built from the event stream, the same one the trace and the console read,
so a run exported live (:class:`OtelSink`, an event sink) and the same run replayed from
its trace file afterwards (:func:`export_run`, ``tether export-otel``) come out alike:

* ``invoke_agent {agent}``: one per run per process (a run resumed in another process is
  one more span with the same ``gen_ai.conversation.id``). It starts at ``run_started``
  and ends at ``run_stopped``; provider retries and approvals are events on it; a
  ``failed`` run sets its status to ERROR. A research subagent's span nests under the
  ``execute_tool research`` span of the call that started it.
* ``chat {model}``: one per turn, from ``ts - provider_ms`` to the ``turn`` event's ``ts``,
  with the usage and the finish reason.
* ``execute_tool {tool}``: one per tool call, from ``tool_start`` to ``tool_result`` (a
  call that never started, declined or answered from the cache, gets a span of its
  recorded length); progress lines are events on it; a failed call is an ERROR. How the
  call was decided (verdict, by whom or which rule, edited or not, how long it waited) is
  an event on it too, timed when the decision was made, which is before the span starts;
  the same event is on the run's span, where a call that never runs keeps it.

Every span carries ``gen_ai.conversation.id`` = the run id; what is Tether's own
(status, cost, turn number, cached, error, ...) is under ``tether.``. Message content
(prompts, answers, tool arguments and results, approval notes) is exported only when
asked for (``capture_content``, or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=
true``), and anything that looks like an Authorization header or a bearer token is
redacted from every string that leaves, content or not.

A collector that is down or slow never slows a run: the sink only starts and ends spans
(in memory) on the run's thread; a :class:`~opentelemetry.sdk.trace.export.BatchSpanProcessor`
exports them from its own thread through a bounded queue. A span that cannot be
delivered (the queue was full, the collector refused it, or it was still unsent when
:meth:`OtelSink.shutdown`'s time ran out) is counted and reported through ``on_dropped``
(run id, count), always on the thread that calls the sink or ``shutdown``/``force_flush``,
never on the exporter's.

Nor does it slow a command's exit much: a CLI command (``tether run``, ``resume``, ...)
gives the collector at most :data:`CLI_EXPORT_TIMEOUT` (each export, the exporter's
retries included, and the wait at exit), where a long-lived process (the console) waits
up to :data:`SHUTDOWN_TIMEOUT` at exit and lets the exporter retry as the ``OTEL_EXPORTER_OTLP_*``
variables say.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanKind, Status, StatusCode

from tether.run.events import Event
from tether.run.state import StateError
from tether.store.files.layout import TRACE_FILE
from tether.store.files.store import RunStore

if TYPE_CHECKING:
    from tether.store.protocol import Store

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "CLI_EXPORT_TIMEOUT",
    "SHUTDOWN_TIMEOUT",
    "OtelExportError",
    "OtelSink",
    "build_run_spans",
    "capture_content_from_env",
    "shown_url",
    "export_configured",
    "export_run",
    "otel_sink_from_env",
    "provider_for",
    "traces_endpoint",
]

log = logging.getLogger(__name__)

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"
TRACES_PATH = "/v1/traces"
SERVICE_NAME = "tether"
DEFAULT_PROVIDER = "openai"
"""``gen_ai.provider.name`` when the endpoint's host says nothing better: Tether speaks the
OpenAI chat-completions API, whoever serves it (the conventions' "best knowledge" rule)."""
MAX_CONTENT_CHARS = 8192
"""A text part (a message's text, a tool's arguments or result) is cut to this many
characters when exported."""
REDACTED = "[redacted]"
CLI_EXPORT_TIMEOUT = 0.5
"""Seconds a CLI command gives the collector, at most: the OTLP exporter's timeout for one
export (its retries with backoff included: a retry that would not fit is not made) and
:meth:`OtelSink.shutdown`'s wait at exit. A collector that refuses connections costs the
command a few milliseconds, one that is slow at most this; a collector that is up takes the
run's spans well within it. What is not delivered in time is recorded in the run's trace
as dropped. (``OTEL_EXPORTER_OTLP_TIMEOUT`` / ``..._TRACES_TIMEOUT`` apply when lower.)"""
SHUTDOWN_TIMEOUT = 5.0
"""Seconds :meth:`OtelSink.shutdown` waits by default (a long-lived process, the console,
at exit): its exporter keeps the OTLP variables' timeout (10 s by default) and retries."""
_ABORT_WAIT = 1.0  # at most this, and a tenth of shutdown's time, to stop an exporter still retrying
_EXPORT_BATCH = 512

# The conventions' well-known provider names, by the host of the endpoint a run talks to.
_PROVIDER_HOSTS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    (".openai.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    ("api.anthropic.com", "anthropic"),
    ("api.groq.com", "groq"),
    ("api.deepseek.com", "deepseek"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.cohere.com", "cohere"),
    ("api.cohere.ai", "cohere"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("bedrock-runtime.", "aws.bedrock"),
)

# Defensive redaction: the events never carry API keys, but a tool's output or a
# provider's error may echo a header back.
_AUTH_HEADER = re.compile(
    r"""(?i)\b((?:proxy-)?authorization)(["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token|digest)\s+)?[^\s"',;}\]\\]+""")
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_SECRET_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")

_SPAN_KINDS = frozenset({"run_started", "turn", "provider_retry", "tool_start", "tool_progress", "tool_result",
                         "approval_required", "approval_decision", "run_stopped"})
# ToolResult.error values the loop writes itself, as low-cardinality error.type values.
_TOOL_ERROR_TYPES = {"unknown tool": "unknown_tool", "invalid arguments": "invalid_arguments",
                     "declined": "declined", "cancelled": "cancelled"}
_NOT_FAILURES = frozenset({"declined", "cancelled"})  # ok=False, but nothing broke


class OtelExportError(Exception):
    """The collector did not take the spans (``export_run``)."""


# ---- settings -------------------------------------------------------------------------

def traces_endpoint(url: str | None = None) -> str:
    """Where spans go. ``url`` (``--otlp``) is a base URL in the ``OTEL_EXPORTER_OTLP_ENDPOINT``
    sense (``/v1/traces`` is added unless it is already there); without it,
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as it is, else
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``, else the OTLP/HTTP default."""
    if url:
        endpoint = url.rstrip("/")
        if not endpoint.endswith(TRACES_PATH):
            endpoint += TRACES_PATH
    elif os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        endpoint = os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip()
    elif os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        endpoint = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"].strip().rstrip("/") + TRACES_PATH
    else:
        endpoint = DEFAULT_ENDPOINT
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"an OTLP endpoint must be an http(s) URL, got {shown_url(endpoint)!r}")
    return endpoint


def export_configured() -> bool:
    """True when the environment asks for OTLP export (an endpoint is set, the SDK is not disabled)."""
    if _env_true("OTEL_SDK_DISABLED") or os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def capture_content_from_env() -> bool:
    """The conventional opt-in for message content. ``true`` (and the GenAI utilities'
    ``SPAN_ONLY`` / ``SPAN_AND_EVENT`` / ``EVENT_ONLY``) turn it on; anything else leaves it off."""
    value = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower()
    return value in ("true", "1", "yes", "on", "span_only", "span_and_event", "event_only")


def provider_for(base_url: str | None) -> str:
    """``gen_ai.provider.name`` for a run whose model is at ``base_url``."""
    host = (urlsplit(base_url).hostname or "") if base_url else ""
    for pattern, name in _PROVIDER_HOSTS:
        if host == pattern or (pattern.startswith(".") and host.endswith(pattern)) \
                or (pattern.endswith(".") and host.startswith(pattern)):
            return name
    return DEFAULT_PROVIDER


def _env_export_timeout() -> float | None:
    """The exporter's timeout from ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` / ``OTEL_EXPORTER_OTLP_TIMEOUT``
    (seconds, as the Python exporter reads them), or None when unset or not a number."""
    raw = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT")
    try:
        value = float(raw) if raw else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 else None


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("true", "1", "yes", "on")


def shown_url(url: str) -> str:
    """A URL without any user:password part, for messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return parts._replace(netloc=host).geturl()


def _resource() -> Resource:
    """``service.name`` is ``tether`` unless OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES say otherwise."""
    attributes: dict[str, str] = {}
    try:
        from importlib.metadata import version

        attributes["service.version"] = version("tether")
    except Exception:  # not installed as a distribution: no version to tell
        pass
    resource = Resource.create(attributes)
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    return resource


def _quiet_sdk_logs() -> None:
    """The exporter logs each failed export. With no logging configured, Python would print
    those on stderr (over the console); a NullHandler keeps them for whoever configures
    logging. What is lost reaches the run's trace through ``on_dropped`` instead."""
    logger = logging.getLogger("opentelemetry")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


def _tracer(provider: Any) -> trace_api.Tracer:
    try:
        from importlib.metadata import version

        return provider.get_tracer("tether", version("tether"))
    except Exception:
        return provider.get_tracer("tether")


# ---- redaction and content ----------------------------------------------------------------

class _Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(sorted({s for s in secrets if s and len(s) >= 8}, key=len, reverse=True))

    def __call__(self, text: Any) -> str:
        text = str(text)
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        return _SECRET_KEY.sub(REDACTED, text)


def _cut(text: str, limit: int = MAX_CONTENT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"...[{len(text) - limit} more characters not exported]"


def _text_of(content: Any) -> str | None:
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(texts) if texts else json.dumps(content, default=str)
    return str(content)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return _cut(raw)
    return raw


def _message(message: dict[str, Any], *, finish_reason: str | None = None) -> dict[str, Any]:
    """A chat-completions message in the conventions' message shape (role + parts)."""
    role = message.get("role") or "user"
    text = _text_of(message.get("content"))
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"),
                      "response": _cut(text or "")})
    elif text:
        parts.append({"type": "text", "content": _cut(text)})
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts.append({"type": "tool_call", "id": call.get("id"), "name": fn.get("name"),
                      "arguments": _arguments(fn.get("arguments"))})
    out: dict[str, Any] = {"role": role, "parts": parts}
    if finish_reason is not None:
        out["finish_reason"] = finish_reason
    return out


def _reply_index(messages: Sequence[dict[str, Any]], turn: int, turns: int | None) -> int | None:
    """Where turn ``turn``'s reply is: the last message while the run is live (the loop
    emits the turn right after adding it), else the matching assistant message."""
    if turns is None:
        if messages and messages[-1].get("role") == "assistant":
            return len(messages) - 1
        return None
    replies = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    k = len(replies) - turns + turn - 1  # earlier assistant messages the run was made with come first
    return replies[k] if 0 <= k < len(replies) else None


# ---- span building ------------------------------------------------------------------------

class _Run:
    __slots__ = ("agent", "tools", "model", "name", "provider", "server", "last_ns")

    def __init__(self, agent: Any, model: str, name: str, provider: str, server: tuple[str, int] | None,
                 start_ns: int) -> None:
        self.agent = agent
        self.tools: dict[str, Any] = {}
        self.model = model
        self.name = name
        self.provider = provider
        self.server = server
        self.last_ns = start_ns


class _SpanBuilder:
    """Event records (``Event.record()`` dicts, or trace lines) -> spans, with explicit times.

    ``state_of(run_id)`` gives the run's state (its transcript and endpoint) when known;
    ``replay`` says the states are final (loaded from disk) rather than growing live.
    """

    def __init__(self, tracer: trace_api.Tracer, *, capture_content: bool, provider_name: str | None,
                 state_of: Callable[[str], Any] | None, redact: _Redactor, replay: bool = False) -> None:
        self.tracer = tracer
        self.capture = capture_content
        self.provider_name = provider_name
        self.state_of = state_of
        self.redact = redact
        self.replay = replay
        self.runs: dict[str, _Run] = {}
        self.last_seq: dict[str, int] = {}  # per run: an event delivered twice is built once
        self.waiting: dict[str, list[tuple[str, dict[str, Any], int]]] = {}  # events before a run's span
        self.asked: dict[tuple[str, str], int] = {}  # (run, call) -> when it first asked for a decision
        # (run, call) -> decision events waiting for the call's span (it starts when the call runs)
        self.decided: dict[tuple[str, str], list[tuple[dict[str, Any], int]]] = {}
        self._handlers: dict[str, Callable[[dict[str, Any], int], None]] = {
            "run_started": self._run_started, "turn": self._turn, "provider_retry": self._provider_retry,
            "tool_start": self._tool_start, "tool_progress": self._tool_progress, "tool_result": self._tool_result,
            "approval_required": self._approval_required, "approval_decision": self._approval_decision,
            "run_stopped": self._run_stopped,
        }

    def handle(self, record: dict[str, Any]) -> None:
        handler = self._handlers.get(record.get("kind", ""))
        run_id = record.get("run_id")
        if handler is None or not run_id:
            return
        seq = record.get("seq") or 0
        if seq:  # traced events are numbered per run, increasing across processes
            if seq <= self.last_seq.get(run_id, 0):
                return
            self.last_seq[run_id] = seq
        ts = record.get("ts") or 0
        ns = int(float(ts) * 1e9) if ts else time.time_ns()
        handler(record, ns)

    def close_all(self, why: str, ns: int | None = None) -> None:
        for run_id in list(self.runs):
            self._close(run_id, self.runs[run_id].last_ns if ns is None else ns, why)
        self.waiting.clear()

    # -- helpers
    def _state(self, run_id: str) -> Any:
        if self.state_of is None:
            return None
        try:
            return self.state_of(run_id)
        except Exception:
            return None

    def _base(self, run_id: str, operation: str) -> dict[str, Any]:
        return {"gen_ai.operation.name": operation, "gen_ai.conversation.id": run_id}

    def _start_run(self, record: dict[str, Any], ns: int, *, partial: bool = False) -> _Run:
        run_id = record["run_id"]
        state = self._state(run_id)
        model = str(record.get("model") or getattr(state, "model", "") or "")
        name = str(record.get("agent") or getattr(getattr(state, "agent", None), "name", "") or model)
        base_url = getattr(state, "base_url", None)
        provider = self.provider_name or provider_for(base_url)
        server = None
        if base_url:
            parts = urlsplit(base_url)
            if parts.hostname:
                server = (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
        parent_id = record.get("parent_run_id") or getattr(state, "parent_run_id", None)
        context: Context = Context()  # a run is a root, whatever span is current in this process
        if parent_id and parent_id in self.runs:
            parent = self.runs[parent_id]
            call_id = run_id[len(parent_id) + 1:] if run_id.startswith(parent_id + ".") else ""
            tool = parent.tools.get(call_id)
            context = trace_api.set_span_in_context(tool if tool is not None else parent.agent)
        waiting = self.waiting.pop(run_id, [])
        start = min([ns, *(w[2] for w in waiting)])
        attributes = {
            **self._base(run_id, "invoke_agent"),
            "gen_ai.provider.name": provider,
            "gen_ai.agent.name": name,
            "gen_ai.request.model": model,
            "tether.resumed": bool(record.get("resumed")),
        }
        if parent_id:
            attributes["tether.parent_run_id"] = parent_id
        if record.get("pid"):
            attributes["tether.pid"] = int(record["pid"])
        if partial:
            attributes["tether.partial"] = True  # this process saw the run only after it started
        span = self.tracer.start_span(f"invoke_agent {name}" if name else "invoke_agent", context=context,
                                      kind=SpanKind.INTERNAL, attributes=attributes, start_time=start)
        for event_name, event_attributes, event_ns in waiting:
            span.add_event(event_name, event_attributes, timestamp=event_ns)
        run = _Run(span, model, name, provider, server, ns)
        self.runs[run_id] = run
        return run

    def _run_for(self, record: dict[str, Any], ns: int) -> _Run:
        run = self.runs.get(record["run_id"])
        if run is None:
            run = self._start_run({"run_id": record["run_id"]}, ns, partial=True)
        run.last_ns = max(run.last_ns, ns)
        return run

    def _agent_event(self, record: dict[str, Any], ns: int, name: str, attributes: dict[str, Any]) -> None:
        run = self.runs.get(record["run_id"])
        if run is None:  # e.g. an approval recorded just before the run goes on: kept for its span
            self.waiting.setdefault(record["run_id"], []).append((name, attributes, ns))
            return
        run.last_ns = max(run.last_ns, ns)
        run.agent.add_event(name, attributes, timestamp=ns)

    def _close(self, run_id: str, ns: int, why: str) -> None:
        run = self.runs.pop(run_id)
        for span in run.tools.values():
            span.set_attribute("tether.incomplete", True)
            span.end(end_time=ns)
        run.tools.clear()
        run.agent.set_attributes({"tether.incomplete": True, "tether.reason": why})
        run.agent.end(end_time=ns)

    def _tool_span(self, run: _Run, record: dict[str, Any], start_ns: int, raw_args: str | None) -> Any:
        call_id, name = str(record.get("call_id") or ""), str(record.get("name") or "")
        attributes = {
            **self._base(record["run_id"], "execute_tool"),
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if self.capture and raw_args is not None:
            attributes["gen_ai.tool.call.arguments"] = self.redact(_cut(raw_args))
        span = self.tracer.start_span(f"execute_tool {name}" if name else "execute_tool",
                                      context=trace_api.set_span_in_context(run.agent),
                                      kind=SpanKind.INTERNAL, attributes=attributes, start_time=start_ns)
        for event_attributes, event_ns in self.decided.pop((record["run_id"], call_id), ()):
            span.add_event("tether.approval_decision", event_attributes, timestamp=event_ns)
        return span

    # -- handlers
    def _run_started(self, record: dict[str, Any], ns: int) -> None:
        if record["run_id"] in self.runs:  # never stopped in this stream: it is over all the same
            self._close(record["run_id"], ns, "the run started again before it was seen to stop")
        self._start_run(record, ns)

    def _turn(self, record: dict[str, Any], ns: int) -> None:
        run = self._run_for(record, ns)
        start = ns - int(float(record.get("provider_ms") or 0) * 1e6)
        finish = str(record.get("finish_reason") or "")
        attributes: dict[str, Any] = {
            **self._base(record["run_id"], "chat"),
            "gen_ai.provider.name": run.provider,
            "gen_ai.request.model": run.model,
            "gen_ai.usage.input_tokens": int(record.get("prompt_tokens") or 0),
            "gen_ai.usage.output_tokens": int(record.get("completion_tokens") or 0),
            "gen_ai.response.finish_reasons": [finish] if finish else [],
            "tether.turn": int(record.get("turn") or 0),
            "tether.run_cost_usd": float(record.get("cost_usd") or 0.0),
            "tether.usage_estimated": bool(record.get("estimated")),
            "tether.tool_calls": int(record.get("tool_calls") or 0),
        }
        if run.server:
            attributes["server.address"], attributes["server.port"] = run.server
        if record.get("ttft_ms") is not None:
            attributes["gen_ai.request.stream"] = True
            attributes["gen_ai.response.time_to_first_chunk"] = float(record["ttft_ms"]) / 1000.0
        if record.get("tokens_per_s") is not None:
            attributes["tether.tokens_per_s"] = float(record["tokens_per_s"])
        if self.capture:
            attributes.update(self._chat_content(record["run_id"], int(record.get("turn") or 0), finish))
        span = self.tracer.start_span(f"chat {run.model}" if run.model else "chat",
                                      context=trace_api.set_span_in_context(run.agent),
                                      kind=SpanKind.CLIENT, attributes=attributes, start_time=start)
        span.end(end_time=ns)

    def _chat_content(self, run_id: str, turn: int, finish: str) -> dict[str, str]:
        state = self._state(run_id)
        messages = getattr(state, "messages", None)
        if not messages:
            return {}
        index = _reply_index(messages, turn, getattr(state, "turns", None) if self.replay else None)
        if index is None:
            return {}
        inputs = [_message(m) for m in messages[:index]]
        outputs = [_message(messages[index], finish_reason=finish or None)]
        return {"gen_ai.input.messages": self.redact(json.dumps(inputs, ensure_ascii=False, default=str)),
                "gen_ai.output.messages": self.redact(json.dumps(outputs, ensure_ascii=False, default=str))}

    def _provider_retry(self, record: dict[str, Any], ns: int) -> None:
        attributes: dict[str, Any] = {"tether.attempt": int(record.get("attempt") or 0),
                                      "tether.reason": self.redact(record.get("reason") or ""),
                                      "tether.wait_s": float(record.get("wait_s") or 0.0)}
        if record.get("status") is not None:
            attributes["http.response.status_code"] = int(record["status"])
        self._agent_event(record, ns, "tether.provider_retry", attributes)

    def _tool_start(self, record: dict[str, Any], ns: int) -> None:
        run = self._run_for(record, ns)
        call_id = str(record.get("call_id") or "")
        if call_id in run.tools:  # started again without a result in between
            old = run.tools.pop(call_id)
            old.set_attribute("tether.incomplete", True)
            old.end(end_time=ns)
        run.tools[call_id] = self._tool_span(run, record, ns, record.get("args"))

    def _tool_progress(self, record: dict[str, Any], ns: int) -> None:
        run = self.runs.get(record["run_id"])
        span = run.tools.get(str(record.get("call_id") or "")) if run else None
        if span is not None:
            span.add_event("tether.tool_progress", {"tether.label": self.redact(record.get("label") or "")},
                           timestamp=ns)

    def _tool_result(self, record: dict[str, Any], ns: int) -> None:
        run = self._run_for(record, ns)
        call_id = str(record.get("call_id") or "")
        span = run.tools.pop(call_id, None)
        if span is None:  # answered without running: unknown tool, bad arguments, declined, cached
            start = ns - int(float(record.get("ms") or 0) * 1e6)
            span = self._tool_span(run, record, start, self._call_arguments(record["run_id"], call_id)
                                   if self.capture else None)
        ok, error = bool(record.get("ok")), record.get("error")
        attributes: dict[str, Any] = {"tether.ok": ok, "tether.cached": bool(record.get("cached")),
                                      "tether.ms": float(record.get("ms") or 0.0)}
        if error:
            attributes["tether.error"] = self.redact(error)
        if self.capture:
            result = self._call_result(record["run_id"], call_id)
            attributes["gen_ai.tool.call.result"] = self.redact(_cut(result if result is not None
                                                                     else str(record.get("preview") or "")))
        if not ok and error not in _NOT_FAILURES:
            attributes["error.type"] = _TOOL_ERROR_TYPES.get(str(error), "tool_error")
            span.set_status(Status(StatusCode.ERROR, self.redact(error or "the tool call failed")))
        span.set_attributes(attributes)
        span.end(end_time=ns)

    def _call_arguments(self, run_id: str, call_id: str) -> str | None:
        messages = getattr(self._state(run_id), "messages", None) or ()
        for message in reversed(messages):
            for call in message.get("tool_calls") or ():
                if call.get("id") == call_id:
                    args = (call.get("function") or {}).get("arguments")
                    return args if isinstance(args, str) else json.dumps(args, default=str)
        return None

    def _call_result(self, run_id: str, call_id: str) -> str | None:
        messages = getattr(self._state(run_id), "messages", None) or ()
        for message in reversed(messages):
            if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
                return _text_of(message.get("content")) or ""
        return None

    def _approval_required(self, record: dict[str, Any], ns: int) -> None:
        attributes = {"gen_ai.tool.call.id": str(record.get("call_id") or ""),
                      "gen_ai.tool.name": str(record.get("tool") or ""),
                      "tether.why": self.redact(record.get("why") or "")}
        if self.capture:
            attributes["gen_ai.tool.call.arguments"] = self.redact(_cut(str(record.get("args") or "")))
        self.asked.setdefault((record["run_id"], attributes["gen_ai.tool.call.id"]), ns)
        self._agent_event(record, ns, "tether.approval_required", attributes)

    def _approval_decision(self, record: dict[str, Any], ns: int) -> None:
        run_id, call_id = record["run_id"], str(record.get("call_id") or "")
        verdict = str(record.get("verdict") or "")
        attributes: dict[str, Any] = {"gen_ai.tool.call.id": call_id,
                                      "gen_ai.tool.name": str(record.get("tool") or ""),
                                      "tether.verdict": verdict,
                                      "tether.by": self.redact(str(record.get("by") or "")),
                                      "tether.rule": str(record.get("rule") or ""),
                                      "tether.edited": record.get("args") is not None}
        waited = self._waited_s(run_id, call_id, ns, complete=verdict != "pending")
        if waited is not None:
            attributes["tether.waited_s"] = waited
        if record.get("tally"):
            attributes["tether.tally"] = str(record["tally"])
        if self.capture and record.get("text"):
            attributes["tether.text"] = self.redact(_cut(str(record["text"])))
        if self.capture and record.get("args") is not None:
            attributes["tether.edited_arguments"] = self.redact(_cut(str(record["args"])))
        self._agent_event(record, ns, "tether.approval_decision", attributes)
        run = self.runs.get(run_id)
        span = run.tools.get(call_id) if run is not None else None
        if span is not None:
            span.add_event("tether.approval_decision", attributes, timestamp=ns)
        else:  # the call's span starts when it runs (or is answered): the event waits for it
            self.decided.setdefault((run_id, call_id), []).append((attributes, ns))

    def _waited_s(self, run_id: str, call_id: str, ns: int, *, complete: bool) -> float | None:
        """How long the call had waited when decided: from when it first asked, as the run's
        decision records it (it asked in another process, perhaps), else as this stream saw."""
        decision = getattr(self._state(run_id), "approvals", {}).get(call_id)
        asked_at = getattr(decision, "asked_at", None)
        seen = self.asked.pop((run_id, call_id), None) if complete else self.asked.get((run_id, call_id))
        if asked_at is None and seen is not None:
            asked_at = seen / 1e9
        return None if asked_at is None else round(max(0.0, ns / 1e9 - float(asked_at)), 3)

    def _run_stopped(self, record: dict[str, Any], ns: int) -> None:
        run = self._run_for(record, ns)
        for span in run.tools.values():  # a call the run stopped in the middle of
            span.set_attribute("tether.incomplete", True)
            span.end(end_time=ns)
        run.tools.clear()
        status, reason = str(record.get("status") or ""), self.redact(record.get("reason") or "")
        attributes: dict[str, Any] = {"tether.status": status, "tether.reason": reason,
                                      "tether.turns": int(record.get("turns") or 0),
                                      "tether.cost_usd": float(record.get("cost_usd") or 0.0)}
        interruption = record.get("interruption")
        if isinstance(interruption, dict):
            attributes["tether.interruption.type"] = str(interruption.get("type") or "")
            shown = interruption if self.capture else {k: v for k, v in interruption.items() if k != "args"}
            attributes["tether.interruption"] = self.redact(json.dumps(shown, ensure_ascii=False, default=str))
        run.agent.set_attributes(attributes)
        if status == "failed":
            run.agent.set_attribute("error.type", "run_failed")
            run.agent.set_status(Status(StatusCode.ERROR, reason))
        run.agent.end(end_time=ns)
        del self.runs[record["run_id"]]


# ---- the live sink ------------------------------------------------------------------------

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
    return sink


# ---- after the fact -----------------------------------------------------------------------

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
    if isinstance(store, RunStore):
        prefix = run_id + "."
        candidates = sorted(p.name for p in store.root.iterdir()
                            if p.name.startswith(prefix) and (p / TRACE_FILE).is_file()) if store.root.is_dir() else []
    else:
        prefix = run_id + "."
        candidates = sorted(rid for rid in store.run_ids() if rid.startswith(prefix))
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
        store = RunStore(store)
    if isinstance(store, RunStore):
        path = store.run_dir(run_id) / TRACE_FILE
        if not path.is_file():
            raise StateError(f"no trace for run {run_id} at {path}")
    elif not store.exists(run_id) or next(iter(store.read_trace(run_id)), None) is None:
        raise StateError(f"no trace for run {run_id} in {getattr(store, 'where', 'the store')}")
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
    :class:`~tether.run.state.StateError` when there is no such run."""
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
