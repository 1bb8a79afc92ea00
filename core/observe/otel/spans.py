"""The spans of a run: event records (live events, or trace lines replayed) turned into the
``invoke_agent``, ``chat`` and ``execute_tool`` spans, with the times the events recorded.
One builder serves the live sink and the replay, so that both give the same spans.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode

from tether.observe.otel.genai import (
    _NOT_FAILURES, _TOOL_ERROR_TYPES, _cut, _message, _Redactor, _reply_index, _text_of, provider_for,
)

_SPAN_KINDS = frozenset({"run_started", "turn", "provider_retry", "tool_start", "tool_progress", "tool_result",
                         "approval_required", "approval_decision", "run_stopped"})


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
            attributes["tether.vocab.text"] = self.redact(_cut(str(record["text"])))
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
