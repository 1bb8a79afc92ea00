"""Where spans go and how long a process gives the collector: the ``OTEL_*`` variables read
once, here, for the live sink and the replay alike (the OTLP exporter's own conventions,
so that a collector set up for other programs works for Tether unchanged).
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import version
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import Resource

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"
TRACES_PATH = "/v1/traces"
SERVICE_NAME = "tether"
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
        return provider.get_tracer("tether", version("tether"))
    except Exception:
        return provider.get_tracer("tether")
