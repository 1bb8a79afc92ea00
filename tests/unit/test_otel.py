"""OpenTelemetry export: the spans' shape, content capture, replay of a trace, and a real
OTLP/HTTP collector on loopback (up, down, and slow)."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tether.vocab.events import (
    ApprovalDecision,
    ApprovalRequired,
    Event,
    ProviderRetry,
    RunStarted,
    RunStopped,
    TextDelta,
    ToolProgress,
    ToolResult,
    ToolStart,
    Turn,
)
from tether.observe.otel import sink as otel_sink
from tether.observe.otel.replay import OtelExportError, export_run
from tether.observe.otel.settings import CLI_EXPORT_TIMEOUT, SHUTDOWN_TIMEOUT, traces_endpoint
from tether.observe.otel.sink import OtelSink, otel_sink_from_env
from tether.vocab.state import RunState, StateError
from tether.store.files.layout import TRACE_FILE
from tether.store.files.store import RunStore
from tether.demo.agents import DEMO

from tests.support import still_console

T0 = 1_700_000_000.0
PARENT = "helper-20240101-000000-abc123"
CHILD = f"{PARENT}.call_1"
LEAKY_ARGS = '{"question": "why? curl -H \'Authorization: Bearer sk-abcdefghijklmnopqrstuvwx\'"}'
CONTENT_KEYS = {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.input.messages",
                "gen_ai.output.messages", "tether.vocab.text"}
OTEL_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME",
            "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "LLM_API_KEY",
            "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")


def ns(t: float) -> int:
    return int(t * 1e9)


def stamp(event: Event, seq: int, ts: float) -> Event:
    event.seq, event.ts = seq, ts
    return event


def research_run() -> list[Event]:
    """A parent that asks a research subagent, calls an unknown tool, and stops waiting
    for an approval; the child reads a file and answers. Timestamps as a trace records them."""
    interruption = {"type": "needs_approval", "call_id": "call_3", "tool": "delete_file",
                    "args": '{"path": "access.log"}', "why": "delete_file needs approval"}
    steps: list[tuple[float, Event]] = [
        (0.0, RunStarted(run_id=PARENT, model="big-model", resumed=False, pid=42, agent="helper")),
        (0.5, ProviderRetry(run_id=PARENT, attempt=1, status=429, reason="rate limited", wait_s=0.25)),
        (1.0, Turn(run_id=PARENT, turn=1, prompt_tokens=100, completion_tokens=20, total_tokens=120,
                   cost_usd=0.001, finish_reason="tool_calls", provider_ms=800.0, tool_calls=2)),
        (1.1, ToolStart(run_id=PARENT, call_id="call_1", name="research", args=LEAKY_ARGS)),
        (1.2, RunStarted(run_id=CHILD, model="small-model", resumed=False, parent_run_id=PARENT, pid=42,
                         agent="helper")),
        (1.4, Turn(run_id=CHILD, turn=1, prompt_tokens=50, completion_tokens=10, total_tokens=60,
                   cost_usd=0.0002, finish_reason="tool_calls", provider_ms=100.0, tool_calls=1, ttft_ms=40.0)),
        (1.5, ToolStart(run_id=CHILD, call_id="c_1", name="read_file", args='{"path": "errors.log"}')),
        (1.55, ToolProgress(run_id=CHILD, call_id="c_1", name="read_file", label="read 1 of 1 files")),
        (1.6, ToolResult(run_id=CHILD, call_id="c_1", name="read_file", ms=100.0, ok=True,
                         preview="worker 7 timed out")),
        (1.9, Turn(run_id=CHILD, turn=2, prompt_tokens=70, completion_tokens=15, total_tokens=85,
                   cost_usd=0.0004, finish_reason="stop", provider_ms=200.0)),
        (1.95, RunStopped(run_id=CHILD, status="completed", reason="the model answered", turns=2,
                          cost_usd=0.0004)),
        (2.0, ToolResult(run_id=PARENT, call_id="call_1", name="research", ms=900.0, ok=True,
                         preview="errors.log mentions a timeout")),
        (2.05, ToolResult(run_id=PARENT, call_id="call_2", name="nope", ms=0.0, ok=False, error="unknown tool",
                          preview="There is no tool named nope.")),
        (2.5, Turn(run_id=PARENT, turn=2, prompt_tokens=150, completion_tokens=25, total_tokens=175,
                   cost_usd=0.0021, finish_reason="tool_calls", provider_ms=300.0, tool_calls=1)),
        (2.6, ApprovalRequired(run_id=PARENT, call_id="call_3", tool="delete_file", args='{"path": "access.log"}',
                               why="delete_file needs approval")),
        (2.6, RunStopped(run_id=PARENT, status="interrupted", reason="waiting for approval of delete_file (call_3)",
                         turns=2, cost_usd=0.0021, interruption=interruption)),
    ]
    seqs: dict[str, int] = {}
    out = []
    for dt, event in steps:
        seqs[event.run_id] = seqs.get(event.run_id, 0) + 1
        out.append(stamp(event, seqs[event.run_id], T0 + dt))
    return out


def memory_sink(**kw: Any) -> tuple[OtelSink, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelSink(provider, **kw), exporter, provider


def by_name(spans: Any, name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def one(spans: Any, name: str) -> ReadableSpan:
    found = by_name(spans, name)
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def parent_of(span: ReadableSpan, spans: Any) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(s for s in spans if s.context.span_id == span.parent.span_id)


def signature(spans: Any) -> list[tuple]:
    """What a span is, without its ids: name, parent's name, times, attributes, events, status."""
    out = []
    for s in spans:
        parent = parent_of(s, spans)
        attributes = tuple(sorted((k, tuple(v) if isinstance(v, tuple | list) else v)
                                  for k, v in s.attributes.items()))
        events = tuple((e.name, e.timestamp, tuple(sorted(e.attributes.items()))) for e in s.events)
        out.append((s.name, parent.name if parent else None, s.start_time, s.end_time, attributes, events,
                    s.status.status_code))
    return sorted(out, key=repr)


def all_strings(spans: Any) -> str:
    texts = []
    for s in spans:
        texts += [str(v) for v in s.attributes.values()]
        for e in s.events:
            texts += [str(v) for v in e.attributes.values()]
    return "\n".join(texts)


def write_trace(runs_dir: Path, events: list[Event]) -> None:
    for event in events:
        directory = runs_dir / event.run_id
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / TRACE_FILE, "a", encoding="utf-8") as f:
            f.write(json.dumps(event.record(), separators=(",", ":")) + "\n")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in OTEL_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def threads_stop() -> Iterator[None]:
    """Every thread a test starts (exporter workers, servers, helpers) is gone after it."""
    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        thread.join(30)
    left = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    assert not left, f"threads still running: {left}"


# ---- the spans' shape ---------------------------------------------------------------------

def test_live_spans_follow_the_genai_conventions(clean_env):
    sink, exporter, provider = memory_sink()
    for event in research_run():
        sink(event)
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == sorted([
        "invoke_agent helper", "invoke_agent helper", "chat big-model", "chat big-model",
        "chat small-model", "chat small-model", "execute_tool research", "execute_tool read_file",
        "execute_tool nope"])
    parent_agent = next(s for s in by_name(spans, "invoke_agent helper")
                        if s.attributes["gen_ai.conversation.id"] == PARENT)
    child_agent = next(s for s in by_name(spans, "invoke_agent helper")
                       if s.attributes["gen_ai.conversation.id"] == CHILD)
    research = one(spans, "execute_tool research")

    # One trace; the subagent nests under the research call that started it.
    assert {s.context.trace_id for s in spans} == {parent_agent.context.trace_id}
    assert parent_agent.parent is None
    assert parent_of(research, spans) is parent_agent
    assert parent_of(child_agent, spans) is research
    assert parent_of(one(spans, "execute_tool read_file"), spans) is child_agent
    assert all(parent_of(s, spans) is child_agent for s in by_name(spans, "chat small-model"))
    assert all(parent_of(s, spans) is parent_agent for s in by_name(spans, "chat big-model"))

    # The run id is the conversation id of every span.
    for span in spans:
        run = CHILD if span in (child_agent, one(spans, "execute_tool read_file"),
                                *by_name(spans, "chat small-model")) else PARENT
        assert span.attributes["gen_ai.conversation.id"] == run, span.name

    # The agent span: from run_started to run_stopped, Tether's own under tether.
    assert parent_agent.start_time == ns(T0) and parent_agent.end_time == ns(T0 + 2.6)
    assert parent_agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert parent_agent.attributes["gen_ai.agent.name"] == "helper"
    assert parent_agent.attributes["gen_ai.provider.name"] == "openai"
    assert parent_agent.attributes["gen_ai.request.model"] == "big-model"
    assert parent_agent.attributes["tether.status"] == "interrupted"
    assert parent_agent.attributes["tether.turns"] == 2
    assert parent_agent.attributes["tether.cost_usd"] == pytest.approx(0.0021)
    assert parent_agent.attributes["tether.interruption.type"] == "needs_approval"
    assert parent_agent.status.status_code is StatusCode.UNSET  # waiting is not failing
    assert child_agent.attributes["tether.parent_run_id"] == PARENT
    assert child_agent.attributes["tether.status"] == "completed"
    events = [(e.name, e.timestamp) for e in parent_agent.events]
    assert events == [("tether.provider_retry", ns(T0 + 0.5)), ("tether.approval_required", ns(T0 + 2.6))]
    retry = parent_agent.events[0].attributes
    assert retry["http.response.status_code"] == 429 and retry["tether.attempt"] == 1
    assert parent_agent.events[1].attributes["gen_ai.tool.name"] == "delete_file"

    # A chat span covers the model call: it ends at the turn, provider_ms before.
    first = min(by_name(spans, "chat big-model"), key=lambda s: s.start_time)
    assert first.end_time == ns(T0 + 1.0) and first.start_time == ns(T0 + 1.0) - 800_000_000
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "big-model"
    assert first.attributes["gen_ai.usage.input_tokens"] == 100
    assert first.attributes["gen_ai.usage.output_tokens"] == 20
    assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert first.attributes["tether.turn"] == 1 and first.attributes["tether.tool_calls"] == 2
    streamed = min(by_name(spans, "chat small-model"), key=lambda s: s.start_time)
    assert streamed.attributes["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.04)
    assert streamed.attributes["gen_ai.request.stream"] is True

    # Tool spans: from tool_start to tool_result; progress as events; failures are errors.
    read = one(spans, "execute_tool read_file")
    assert read.start_time == ns(T0 + 1.5) and read.end_time == ns(T0 + 1.6)
    assert read.attributes["gen_ai.tool.name"] == "read_file"
    assert read.attributes["gen_ai.tool.call.id"] == "c_1"
    assert read.attributes["gen_ai.operation.name"] == "execute_tool"
    assert read.attributes["tether.ok"] is True and read.attributes["tether.cached"] is False
    assert [(e.name, e.attributes["tether.label"]) for e in read.events] == [
        ("tether.tool_progress", "read 1 of 1 files")]
    assert read.status.status_code is StatusCode.UNSET
    nope = one(spans, "execute_tool nope")  # never started: a span of its recorded length
    assert nope.start_time == nope.end_time == ns(T0 + 2.05)
    assert nope.status.status_code is StatusCode.ERROR
    assert nope.attributes["error.type"] == "unknown_tool"
    assert nope.attributes["tether.error"] == "unknown tool"

    # No content unless asked for, and the leaked key is nowhere.
    for span in spans:
        assert not CONTENT_KEYS & set(span.attributes), span.name
        assert all(not CONTENT_KEYS & set(e.attributes) for e in span.events)
        assert "args" not in json.loads(span.attributes.get("tether.interruption", "{}"))
    assert "sk-abcdefghijklmnop" not in all_strings(spans)
    provider.shutdown()


def test_an_event_delivered_twice_is_built_once(clean_env):
    once, once_exporter, once_provider = memory_sink()
    twice, twice_exporter, twice_provider = memory_sink()
    for event in research_run():
        once(event)
        twice(event)
        twice(event)  # a sink registered twice for a subagent's events
    assert signature(twice_exporter.get_finished_spans()) == signature(once_exporter.get_finished_spans())
    once_provider.shutdown()
    twice_provider.shutdown()


def test_a_failed_run_and_a_failed_tool_are_errors_a_declined_call_is_not(clean_env):
    sink, exporter, provider = memory_sink()
    run = "failing-1"
    for i, event in enumerate([
        RunStarted(run_id=run, model="m", resumed=True, agent=""),
        ToolResult(run_id=run, call_id="a", name="delete_file", ms=0.0, ok=False, error="declined"),
        ToolStart(run_id=run, call_id="b", name="write_file", args="{}"),
        ToolResult(run_id=run, call_id="b", name="write_file", ms=5.0, ok=False, error="disk on fire"),
        RunStopped(run_id=run, status="failed", reason="tool write_file failed: disk on fire", turns=1,
                   cost_usd=0.01),
    ]):
        sink(stamp(event, i + 1, T0 + i))
    spans = exporter.get_finished_spans()
    agent = one(spans, "invoke_agent m")  # no agent name: the model's
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.status.description == "tool write_file failed: disk on fire"
    assert agent.attributes["error.type"] == "run_failed"
    assert agent.attributes["tether.resumed"] is True
    declined = one(spans, "execute_tool delete_file")
    assert declined.status.status_code is StatusCode.UNSET
    assert declined.attributes["tether.error"] == "declined" and "error.type" not in declined.attributes
    failed = one(spans, "execute_tool write_file")
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "tool_error"
    provider.shutdown()


def test_events_that_are_not_spans_are_ignored_and_shutdown_ends_open_runs(clean_env):
    sink, exporter, provider = memory_sink()
    sink(stamp(RunStarted(run_id="open-1", model="m", resumed=False, agent="a"), 1, T0))
    sink(TextDelta(run_id="open-1", turn=1, text="hel"))  # not traced, no ts: not a span either
    sink(stamp(ToolStart(run_id="open-1", call_id="x", name="slow_tool", args="{}"), 2, T0 + 1))
    assert exporter.get_finished_spans() == ()
    assert sink.shutdown(timeout=5)
    spans = exporter.get_finished_spans()
    assert {s.name for s in spans} == {"invoke_agent a", "execute_tool slow_tool"}
    assert all(s.attributes["tether.incomplete"] is True for s in spans)
    sink(stamp(RunStarted(run_id="late-1", model="m", resumed=False), 1, T0))  # after shutdown: nothing
    assert len(exporter.get_finished_spans()) == 2
    provider.shutdown()


def test_an_approval_decision_opens_the_span_of_the_run_it_resumes(clean_env):
    sink, exporter, provider = memory_sink()
    run = "approve-1"
    sink(stamp(ApprovalDecision(run_id=run, call_id="call_3", tool="delete_file", verdict="approved",
                                text="go ahead", by="operator"), 5, T0))
    sink(stamp(RunStarted(run_id=run, model="m", resumed=True, agent="a"), 6, T0 + 0.01))
    sink(stamp(RunStopped(run_id=run, status="completed", reason="the model answered", turns=3, cost_usd=0.1),
               7, T0 + 1))
    agent = one(exporter.get_finished_spans(), "invoke_agent a")
    assert agent.start_time == ns(T0)
    assert [e.name for e in agent.events] == ["tether.approval_decision"]
    assert agent.events[0].attributes["tether.verdict"] == "approved"
    assert "tether.vocab.text" not in agent.events[0].attributes  # the operator's note is content
    provider.shutdown()


# ---- content --------------------------------------------------------------------------------

class LiveState(SimpleNamespace):
    """What ``Harness.live`` holds for a run, as far as the sink looks at it."""


def test_content_is_exported_only_when_asked_for_and_keys_never(clean_env):
    system = {"role": "system", "content": "You help."}
    user = {"role": "user", "content": "Which file mentions a timeout?"}
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "research", "arguments": LEAKY_ARGS}}]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "errors.log: " + "x" * 300}
    states = {PARENT: LiveState(messages=[system, user], base_url="https://api.groq.com/openai/v1"),
              CHILD: LiveState(messages=[], base_url=None)}

    def feed(sink: OtelSink) -> None:
        states[PARENT].messages[:] = [system, user]
        for event in research_run():
            if event.run_id == PARENT and event.kind == "turn" and event.turn == 1:
                states[PARENT].messages.append(call)
            if event.run_id == PARENT and event.kind == "tool_result" and event.call_id == "call_1":
                states[PARENT].messages.append(result)
            sink(event)

    sink, exporter, provider = memory_sink(state_of=states.get, secrets=["sk-abcdefghijklmnopqrstuvwx"])
    feed(sink)
    off = exporter.get_finished_spans()
    assert all(not CONTENT_KEYS & set(s.attributes) for s in off)
    agent = next(s for s in off if s.name == "invoke_agent helper" and s.parent is None)
    assert agent.attributes["gen_ai.provider.name"] == "groq"  # from the run's endpoint
    provider.shutdown()

    sink, exporter, provider = memory_sink(state_of=states.get, capture_content=True)
    feed(sink)
    spans = exporter.get_finished_spans()
    research = one(spans, "execute_tool research")
    arguments = research.attributes["gen_ai.tool.call.arguments"]
    assert "Authorization: [redacted]" in arguments and "why?" in arguments
    assert research.attributes["gen_ai.tool.call.result"] == result["content"]  # the whole result, not the preview
    read = one(spans, "execute_tool read_file")  # the child's state has no transcript: the preview
    assert read.attributes["gen_ai.tool.call.result"] == "worker 7 timed out"
    chat = min(by_name(spans, "chat big-model"), key=lambda s: s.start_time)
    assert json.loads(chat.attributes["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "You help."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Which file mentions a timeout?"}]}]
    output = json.loads(chat.attributes["gen_ai.output.messages"])
    assert output[0]["role"] == "assistant" and output[0]["finish_reason"] == "tool_calls"
    assert output[0]["parts"][0]["type"] == "tool_call" and output[0]["parts"][0]["id"] == "call_1"
    assert output[0]["parts"][0]["arguments"]["question"].startswith("why?")
    agent = next(s for s in spans if s.name == "invoke_agent helper" and s.parent is None)
    assert "args" in json.loads(agent.attributes["tether.interruption"])
    assert "gen_ai.tool.call.arguments" in agent.events[1].attributes
    assert "sk-abcdefghijklmnop" not in all_strings(spans)
    provider.shutdown()


# ---- settings -------------------------------------------------------------------------------

def test_endpoint_and_settings_from_the_environment(clean_env, threads_stop):
    assert otel_sink_from_env(None) is None  # nothing set: no export
    assert traces_endpoint("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_endpoint("http://localhost:6006/v1/traces") == "http://localhost:6006/v1/traces"
    assert traces_endpoint("https://cloud.langfuse.com/api/public/otel/") == \
        "https://cloud.langfuse.com/api/public/otel/v1/traces"
    with pytest.raises(ValueError):
        traces_endpoint("collector:4318")

    clean_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9/base/")
    sink = otel_sink_from_env(None)
    assert sink is not None and sink.endpoint == "http://127.0.0.1:9/base/v1/traces"
    assert sink.capture_content is False
    assert sink.tracer_provider.resource.attributes["service.name"] == "tether"
    assert sink.shutdown(timeout=5)

    clean_env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/traces-here")
    clean_env.setenv("OTEL_SERVICE_NAME", "my-agents")
    clean_env.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    sink = otel_sink_from_env(None)
    assert sink is not None and sink.endpoint == "http://127.0.0.1:9/traces-here"
    assert sink.capture_content is True
    assert sink.tracer_provider.resource.attributes["service.name"] == "my-agents"
    assert sink.shutdown(timeout=5)

    sink = otel_sink_from_env("http://127.0.0.1:9")  # --otlp wins
    assert sink is not None and sink.endpoint == "http://127.0.0.1:9/v1/traces"
    assert sink.shutdown(timeout=5)

    clean_env.setenv("OTEL_SDK_DISABLED", "true")
    assert otel_sink_from_env("http://127.0.0.1:9") is None


# ---- replay -----------------------------------------------------------------------------------

def test_a_trace_replays_as_the_same_spans_as_it_made_live(clean_env, tmp_path: Path):
    events = research_run()
    write_trace(tmp_path / "runs", events)
    (tmp_path / "runs" / "unrelated-run").mkdir()
    write_trace(tmp_path / "runs", [stamp(RunStarted(run_id="unrelated-run", model="m", resumed=False), 1, T0)])

    exporter = InMemorySpanExporter()
    count = export_run(tmp_path / "runs", PARENT, exporter)
    replayed = exporter.get_finished_spans()
    assert count == len(replayed) == 9
    assert "invoke_agent m" not in {s.name for s in replayed}

    sink, live_exporter, provider = memory_sink()
    for event in research_run():
        sink(event)
    assert signature(replayed) == signature(live_exporter.get_finished_spans())
    provider.shutdown()

    # The child alone replays as a root of its own.
    child = InMemorySpanExporter()
    assert export_run(tmp_path / "runs", CHILD, child) == 4
    assert one(child.get_finished_spans(), "invoke_agent helper").parent is None

    with pytest.raises(StateError):
        export_run(tmp_path / "runs", "no-such-run", InMemorySpanExporter())


def test_replay_of_a_killed_run_and_of_content_from_the_journal(clean_env, tmp_path: Path):
    runs = tmp_path / "runs"
    run = "killed-1"
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "scan", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "t1", "content": "scanned 10 entries"},
                {"role": "assistant", "content": "Bearer abcdefghijklmnop is my answer"}]
    RunStore(runs).create(RunState(run_id=run, model="m", messages=messages, turns=2,
                                   base_url="https://api.openai.com/v1"))
    write_trace(runs, [
        stamp(RunStarted(run_id=run, model="m", resumed=False, agent="a"), 1, T0),
        stamp(Turn(run_id=run, turn=1, prompt_tokens=1, completion_tokens=1, total_tokens=2, cost_usd=0.0,
                   finish_reason="tool_calls", provider_ms=10.0, tool_calls=1), 2, T0 + 1),
        stamp(ToolStart(run_id=run, call_id="t1", name="scan", args="{}"), 3, T0 + 2),
        stamp(ToolResult(run_id=run, call_id="t1", name="scan", ms=5.0, ok=True, preview="scanned"), 4, T0 + 3),
        stamp(Turn(run_id=run, turn=2, prompt_tokens=1, completion_tokens=1, total_tokens=2, cost_usd=0.0,
                   finish_reason="stop", provider_ms=10.0), 5, T0 + 4),
    ])  # ... and the process was killed before run_stopped
    exporter = InMemorySpanExporter()
    assert export_run(runs, run, exporter, capture_content=True) == 4
    spans = exporter.get_finished_spans()
    agent = one(spans, "invoke_agent a")
    assert agent.attributes["tether.incomplete"] is True and agent.end_time == ns(T0 + 4)
    assert agent.attributes["gen_ai.provider.name"] == "openai"
    last = max(by_name(spans, "chat m"), key=lambda s: s.start_time)
    assert last.attributes["server.address"] == "api.openai.com" and last.attributes["server.port"] == 443
    assert json.loads(last.attributes["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "Bearer [redacted] is my answer"}]
    assert len(json.loads(last.attributes["gen_ai.input.messages"])) == 3
    assert one(spans, "execute_tool scan").attributes["gen_ai.tool.call.result"] == "scanned 10 entries"


async def test_a_harness_run_exports_live_as_it_replays(runs_dir, workspace):
    from tether.harness import Harness

    sink, exporter, provider = memory_sink()
    async with Harness(runs_dir, workspace, sinks=[sink], agent_sets=(DEMO,)) as h:
        state = h.new_run("research")
        out = await h.run(state.run_id)
    live = exporter.get_finished_spans()
    child = out.state.children[0]
    agents = {s.attributes["gen_ai.conversation.id"]: s for s in live if s.name.startswith("invoke_agent")}
    assert set(agents) == {state.run_id, child}
    research = one(live, "execute_tool research")
    assert parent_of(agents[child], live) is research
    assert len([s for s in live if s.name.startswith("chat")]) == out.state.turns + h.load(child).turns

    replayed = InMemorySpanExporter()
    assert export_run(runs_dir, state.run_id, replayed) == len(live)

    def shape(spans: Any) -> list[tuple]:
        return sorted(((s.name, p.name if (p := parent_of(s, spans)) else None, s.attributes.get("tether.turn"),
                        s.attributes.get("gen_ai.tool.call.id")) for s in spans), key=repr)

    assert shape(replayed.get_finished_spans()) == shape(live)
    provider.shutdown()


# ---- a real collector on loopback --------------------------------------------------------------

class Collector:
    """An OTLP/HTTP receiver: POST /v1/traces, protobuf bodies. ``hold`` keeps each request
    waiting until :attr:`release` is set (a collector that is slow to answer)."""

    def __init__(self, *, hold: bool = False) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.waiting = 0
        self.hold = hold
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.requests.append(request)
                collector.headers.append({k.lower(): v for k, v in self.headers.items()})
                if collector.hold:
                    collector.waiting += 1
                    collector.arrived.set()
                    collector.release.wait(120)
                    collector.waiting -= 1
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="test-collector", daemon=True)
        self.thread.start()

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """(resource attributes, span) for every span received."""
        out = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = attrs(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    out += [(resource, span) for span in scope_spans.spans]
        return out

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def attrs(key_values: Any) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in key_values}


@pytest.fixture
def collector(threads_stop) -> Iterator[Collector]:
    c = Collector()
    yield c
    c.stop()


@pytest.fixture
def slow_collector(threads_stop) -> Iterator[Collector]:
    c = Collector(hold=True)
    yield c
    c.stop()


class ThreadSpy(SpanExporter):
    """Passes spans on and remembers on which threads ``export`` ran."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.threads: set[int] = set()

    def export(self, spans: Any) -> SpanExportResult:
        self.threads.add(threading.get_ident())
        return self.inner.export(spans)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_spans_reach_an_otlp_http_collector(clean_env, collector: Collector):
    clean_env.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic cGstbGYtMTpzay1sZi0x")
    dropped: list[tuple[str, int]] = []
    sink = otel_sink_from_env(collector.url, on_dropped=lambda run, n: dropped.append((run, n)))
    assert sink is not None
    for event in research_run():
        sink(event)
    assert sink.shutdown(timeout=10)
    assert dropped == []
    received = collector.spans()
    names = sorted(span.name for _, span in received)
    assert names == sorted(["invoke_agent helper", "invoke_agent helper", "chat big-model", "chat big-model",
                            "chat small-model", "chat small-model", "execute_tool research",
                            "execute_tool read_file", "execute_tool nope"])
    assert {resource["service.name"] for resource, _ in received} == {"tether"}
    assert collector.headers[0]["authorization"] == "Basic cGstbGYtMTpzay1sZi0x"
    spans = {span.name + "/" + attrs(span.attributes)["gen_ai.conversation.id"]: span for _, span in received}
    research = spans[f"execute_tool research/{PARENT}"]
    child = spans[f"invoke_agent helper/{CHILD}"]
    assert child.parent_span_id == research.span_id and child.trace_id == research.trace_id
    chat = min((s for _, s in received if s.name == "chat big-model"), key=lambda s: s.start_time_unix_nano)
    a = attrs(chat.attributes)
    assert a["gen_ai.usage.input_tokens"] == 100 and a["gen_ai.usage.output_tokens"] == 20
    assert a["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert a["gen_ai.request.model"] == "big-model" and a["gen_ai.conversation.id"] == PARENT
    assert chat.end_time_unix_nano == ns(T0 + 1.0)
    tool = attrs(research.attributes)
    assert tool["gen_ai.tool.name"] == "research" and tool["gen_ai.tool.call.id"] == "call_1"
    assert "gen_ai.tool.call.arguments" not in tool


def test_export_run_sends_a_finished_run_to_a_collector(clean_env, collector: Collector, tmp_path: Path):
    write_trace(tmp_path / "runs", research_run())
    assert export_run(tmp_path / "runs", PARENT, collector.url) == 9
    assert len(collector.spans()) == 9
    with pytest.raises(OtelExportError):
        export_run(tmp_path / "runs", PARENT, f"http://127.0.0.1:{free_port()}", timeout=1)


def test_a_collector_that_is_down_never_holds_up_the_run(clean_env, threads_stop):
    spy = ThreadSpy(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{free_port()}/v1/traces", timeout=2))
    here = threading.get_ident()
    reports: list[tuple[str, int, int]] = []

    def on_dropped(run_id: str, count: int) -> None:
        reports.append((run_id, count, threading.get_ident()))
        sink(Event(run_id=run_id))  # the lead's wiring may emit an event back through the sinks

    sink = OtelSink(exporter=spy, on_dropped=on_dropped, max_queue_size=2, max_export_batch_size=1,
                    schedule_delay_millis=10)
    runs = [f"down-{i}" for i in range(4)]
    for run in runs:
        sink(stamp(RunStarted(run_id=run, model="m", resumed=False, agent="a"), 1, T0))
        sink(stamp(Turn(run_id=run, turn=1, prompt_tokens=1, completion_tokens=1, total_tokens=2, cost_usd=0.0,
                        finish_reason="stop", provider_ms=1.0), 2, T0 + 1))
        sink(stamp(RunStopped(run_id=run, status="completed", reason="the model answered", turns=1,
                              cost_usd=0.0), 3, T0 + 2))
    assert sink.dropped["queue_full"] > 0
    assert any(r[0] in runs for r in reports)  # reported while the runs went on
    sink.shutdown(timeout=0.5)  # bounded: past its time it gives up on the collector
    assert here not in spy.threads  # the exporter never ran on the run's thread
    assert {thread for *_, thread in reports} == {here}  # nor did on_dropped run on the exporter's
    lost: dict[str, int] = {}
    for run, count, _ in reports:
        lost[run] = lost.get(run, 0) + count
    assert lost == {run: 2 for run in runs}  # every span of every run is accounted for


def test_a_slow_collector_never_holds_up_the_run(clean_env, slow_collector: Collector):
    spy = ThreadSpy(OTLPSpanExporter(endpoint=f"{slow_collector.url}/v1/traces", timeout=60))
    here = threading.get_ident()
    reports: list[tuple[str, int, int]] = []
    sink = OtelSink(exporter=spy, on_dropped=lambda run, n: reports.append((run, n, threading.get_ident())),
                    max_queue_size=4, max_export_batch_size=1, schedule_delay_millis=10)

    def one_run(run: str) -> None:
        sink(stamp(RunStarted(run_id=run, model="m", resumed=False, agent="a"), 1, T0))
        sink(stamp(ToolStart(run_id=run, call_id="c", name="t", args="{}"), 2, T0 + 1))
        sink(stamp(ToolResult(run_id=run, call_id="c", name="t", ms=1.0, ok=True), 3, T0 + 2))
        sink(stamp(RunStopped(run_id=run, status="completed", reason="done", turns=0, cost_usd=0.0), 4, T0 + 3))

    one_run("slow-0")
    assert slow_collector.arrived.wait(30)  # the exporter's thread is now held by the collector
    for i in range(1, 6):
        one_run(f"slow-{i}")
    assert slow_collector.waiting == 1  # the run's calls returned while the export was still held
    assert here not in spy.threads
    assert sink.dropped["queue_full"] > 0 and reports
    assert sink.shutdown(timeout=0.2) is False
    assert slow_collector.waiting == 1  # shutdown returned without waiting for the collector
    assert {thread for *_, thread in reports} == {here}
    assert sum(count for _, count, _ in reports) == 12  # nothing was delivered: all reported


def test_tether_run_exports_its_run_when_an_endpoint_is_set(clean_env, collector: Collector, tmp_path: Path):
    """The CLI wires the exporter from OTEL_EXPORTER_OTLP_ENDPOINT: a plain `tether run`."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in OTEL_ENV}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.url
    result = subprocess.run([sys.executable, "-m", "tether.tui.cli", "run", "plan", "--run-id", "exp",
                             "--runs-dir", str(tmp_path / "runs"), "--workspace", str(tmp_path / "ws")],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    names = sorted(span.name for _, span in collector.spans())
    assert names == sorted(["invoke_agent plan", "chat plan", "chat plan", "chat plan",
                            "execute_tool list_files", "execute_tool read_file"])


async def test_the_console_exports_its_own_runs(clean_env, collector: Collector, tmp_path: Path):
    from tests.support import SIZE, finish, settle

    app = still_console(runs_dir=tmp_path / "runs", workspace=tmp_path / "ws", start=["plan"],
                    otlp=collector.url, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await finish(pilot, app)
        await app.action_quit()
    names = [span.name for _, span in collector.spans()]
    assert "invoke_agent plan" in names and names.count("chat plan") == 3


# ---- a CLI command's exit: a short, fixed bound on the wait for the collector (issue 31) ----------

class TimeoutSpy(OTLPSpanExporter):
    """The OTLP exporter, remembering the timeout it was made with."""

    made: list[float | None] = []

    def __init__(self, *args: Any, timeout: float | None = None, **kw: Any) -> None:
        TimeoutSpy.made.append(timeout)
        super().__init__(*args, timeout=timeout, **kw)


@pytest.fixture
def timeout_spy(clean_env) -> list[float | None]:
    TimeoutSpy.made = []
    clean_env.setattr(otel_sink, "OTLPSpanExporter", TimeoutSpy)
    return TimeoutSpy.made


def test_a_cli_command_gives_the_collector_a_short_bound_the_console_its_longer_one(clean_env, timeout_spy,
                                                                                       threads_stop, tmp_path: Path):
    import argparse

    from tether.tui.cli.running import harness as cli_harness

    assert 0 < CLI_EXPORT_TIMEOUT <= 0.5 < SHUTDOWN_TIMEOUT
    url = f"http://127.0.0.1:{free_port()}"
    cli = otel_sink_from_env(url, timeout=CLI_EXPORT_TIMEOUT)
    assert cli is not None and cli.shutdown_timeout == CLI_EXPORT_TIMEOUT
    assert timeout_spy == [CLI_EXPORT_TIMEOUT]  # each export, its retries included, is capped too
    cli.shutdown()

    clean_env.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.2")  # a shorter timeout of the user's still applies
    shorter = otel_sink_from_env(url, timeout=CLI_EXPORT_TIMEOUT)
    assert shorter is not None and timeout_spy[-1] == 0.2 and shorter.shutdown_timeout == CLI_EXPORT_TIMEOUT
    shorter.shutdown()
    clean_env.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "30")  # a longer one does not lift the bound
    longer = otel_sink_from_env(url, timeout=CLI_EXPORT_TIMEOUT)
    assert longer is not None and timeout_spy[-1] == CLI_EXPORT_TIMEOUT
    longer.shutdown()
    clean_env.delenv("OTEL_EXPORTER_OTLP_TIMEOUT")

    console = otel_sink_from_env(url)  # what the console attaches: the exporter's own timeout and retries
    assert console is not None and console.shutdown_timeout == SHUTDOWN_TIMEOUT and timeout_spy[-1] is None
    console.shutdown(timeout=1)

    # and the CLI's commands (tether run, resume, approve, ...) attach the bounded one
    clean_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    args = argparse.Namespace(runs_dir=tmp_path / "runs", workspace=tmp_path / "ws", otlp=None, config=None)
    harness = cli_harness(args)
    sinks = [sink for sink in harness.sinks if isinstance(sink, OtelSink)]
    assert len(sinks) == 1 and sinks[0].shutdown_timeout == CLI_EXPORT_TIMEOUT
    assert timeout_spy[-1] == CLI_EXPORT_TIMEOUT
    sinks[0].shutdown()


def test_with_the_cli_bound_a_refusing_collector_is_not_retried_and_every_span_is_reported(
        clean_env, threads_stop, caplog: pytest.LogCaptureFixture):
    import logging

    caplog.set_level(logging.DEBUG, logger="opentelemetry")
    url = f"http://127.0.0.1:{free_port()}/v1/traces"
    # Without the bound, the exporter retries a refused connection after a backoff (what
    # held a CLI command ~5 s at exit); the log says so, which is what is checked below.
    unbounded = OTLPSpanExporter(endpoint=url, timeout=10)
    spans = build_run_spans_of(research_run())
    exporting = threading.Thread(target=unbounded.export, args=(spans,))
    exporting.start()
    for _ in range(200):
        if any("retrying" in r.getMessage() for r in caplog.records):
            break
        exporting.join(0.05)
    unbounded.shutdown()  # ends the backoff at once
    exporting.join(10)
    assert any("retrying" in r.getMessage() for r in caplog.records)
    caplog.clear()

    reports: list[tuple[str, int]] = []
    sink = otel_sink_from_env(url.removesuffix("/v1/traces"), timeout=CLI_EXPORT_TIMEOUT,
                              on_dropped=lambda run, n: reports.append((run, n)))
    assert sink is not None
    for event in research_run():
        sink(event)
    assert sink.shutdown() is False  # with the sink's own (CLI) bound
    assert not any("retrying" in r.getMessage() for r in caplog.records)  # no retry was waited for
    assert sink.dropped == {"export_failed": 9}  # the export failed fast: nothing left "unsent" at the deadline
    lost: dict[str, int] = {}
    for run, count in reports:
        lost[run] = lost.get(run, 0) + count
    assert lost == {run: sum(1 for s in spans if s.attributes["gen_ai.conversation.id"] == run)
                    for run in (PARENT, CHILD)}  # every span of both runs, by run


def build_run_spans_of(events: list[Event]) -> list[ReadableSpan]:
    sink, memory, provider = memory_sink()
    for event in events:
        sink(event)
    provider.shutdown()
    return list(memory.get_finished_spans())


def _tether_run(tmp_path: Path, endpoint: str, run_id: str) -> Any:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in OTEL_ENV}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    return subprocess.run([sys.executable, "-m", "tether.tui.cli", "run", "plan", "--run-id", run_id,
                           "--runs-dir", str(tmp_path / "runs"), "--workspace", str(tmp_path / "ws")],
                          env=env, capture_output=True, text=True, timeout=120)


def _trace(tmp_path: Path, run_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "runs" / run_id / TRACE_FILE).read_text().splitlines()]


def test_tether_run_with_a_refusing_collector_completes_and_records_the_dropped_spans(clean_env, tmp_path: Path):
    result = _tether_run(tmp_path, f"http://127.0.0.1:{free_port()}", "refused")
    assert result.returncode == 0, result.stderr
    assert "status=completed" in result.stdout
    assert result.stderr == ""  # the exporter's complaints stay out of the terminal
    trace = _trace(tmp_path, "refused")
    stopped = [r for r in trace if r["kind"] == "run_stopped"]
    assert len(stopped) == 1 and stopped[0]["status"] == "completed"
    assert sum(r["spans"] for r in trace if r["kind"] == "telemetry_dropped") == 6  # all of the run's spans


def test_tether_run_with_a_collector_that_never_answers_records_the_spans_as_dropped(
        clean_env, slow_collector: Collector, tmp_path: Path):
    result = _tether_run(tmp_path, slow_collector.url, "silent")
    assert result.returncode == 0, result.stderr
    assert slow_collector.requests  # the spans were offered, and never answered
    trace = _trace(tmp_path, "silent")
    assert [r["status"] for r in trace if r["kind"] == "run_stopped"] == ["completed"]
    assert sum(r["spans"] for r in trace if r["kind"] == "telemetry_dropped") == 6
