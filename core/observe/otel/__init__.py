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

The rooms: :mod:`~tether.observe.otel.settings` (where spans go and how long a process
waits: the ``OTEL_*`` variables), :mod:`~tether.observe.otel.genai` (the GenAI conventions'
attributes: provider names, message shapes, content cut and redacted),
:mod:`~tether.observe.otel.spans` (event records -> the spans of a run),
:mod:`~tether.observe.otel.delivery` (the batch processor that counts lost spans, and the
bounded waits at exit), :mod:`~tether.observe.otel.sink` (the live event sink) and
:mod:`~tether.observe.otel.replay` (a finished run's spans, from its trace).
"""
