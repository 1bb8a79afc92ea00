"""``tether export-otel``: a recorded run sent to an OpenTelemetry collector as the spans it
would have had (:mod:`tether.observe.otel.replay`), long after it ran."""

from __future__ import annotations

import argparse
import asyncio
import sys

from tether.observe.otel.replay import OtelExportError, export_run
from tether.observe.otel.settings import capture_content_from_env, shown_url, traces_endpoint
from tether.tui.cli import context


async def export_otel(args: argparse.Namespace) -> int:
    """``tether export-otel RUN_ID [--store URL|DIR] [--otlp URL] [--capture-content] [--timeout S]``."""
    store = context.store_of(args)
    endpoint = traces_endpoint(getattr(args, "otlp", None))
    capture = bool(getattr(args, "capture_content", False)) or capture_content_from_env()
    try:
        count = await asyncio.to_thread(export_run, store, args.run_id, endpoint, capture_content=capture,
                                        timeout=getattr(args, "timeout", None))
    except OtelExportError as exc:
        print(f"tether: {exc}", file=sys.stderr)
        return 1
    print(f"exported {count} spans of run {args.run_id} to {shown_url(endpoint)}")
    return 0


COMMANDS = {"export-otel": export_otel}
