"""The runs' tokens and cost as OpenTelemetry metrics (issue 41, item 6): the GenAI conventions'
``gen_ai.client.token.usage`` histogram and a ``tether.cost`` counter, with the model, agent and
source, sent to a loopback OTLP/HTTP receiver through the same settings as the spans."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
)

from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.observe.otel.sink import otel_sink_from_env


class Receiver:
    """POST /v1/metrics (protobuf) kept; /v1/traces answered and dropped."""

    def __init__(self) -> None:
        self.metrics: list[ExportMetricsServiceRequest] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/v1/metrics":
                    request = ExportMetricsServiceRequest()
                    request.ParseFromString(body)
                    receiver.metrics.append(request)
                    reply = ExportMetricsServiceResponse().SerializeToString()
                else:
                    reply = b""
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        out = []
        for request in self.metrics:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        if metric.name != name:
                            continue
                        data = metric.histogram if metric.HasField("histogram") else metric.sum
                        for p in data.data_points:
                            attrs = {a.key: a.value.string_value for a in p.attributes}
                            out.append((attrs, p))
        return out

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


async def test_token_usage_and_cost_reach_a_loopback_collector_by_model_agent_and_source(tmp_path: Path):
    receiver = Receiver()
    try:
        async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as h:
            sink = otel_sink_from_env(receiver.url, state_of=h.live.get, timeout=5.0)
            assert sink is not None and sink.metrics is not None
            h.sinks.append(sink)
            out = await h.run(h.new_run("plan").run_id)
        sink.shutdown(5.0)
    finally:
        receiver.stop()
    state = out.state
    tokens = receiver.points("gen_ai.client.token.usage")
    by_type = {attrs["gen_ai.token.type"]: p for attrs, p in tokens}
    assert by_type["input"].sum == state.prompt_tokens and by_type["output"].sum == state.completion_tokens
    assert by_type["input"].count == state.turns
    attrs = tokens[0][0]
    assert (attrs["gen_ai.request.model"], attrs["tether.agent"], attrs["tether.source"]) == ("plan", "plan", "tether")
    ((cost_attrs, cost),) = receiver.points("tether.cost")
    assert abs(cost.as_double - state.cost_usd) < 1e-9 and cost_attrs["tether.agent"] == "plan"
