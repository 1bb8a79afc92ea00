"""Serving the scripted provider over HTTP with uvicorn.

``serve`` is the blocking entry point behind ``tether provider``. ``running_provider``
runs the same app on a free loopback port inside the caller's event loop (tests).
``provider_process`` runs it in a child process, for the console's embedded default:
parsing and counting a transcript that grows every turn is CPU work, and in the
console's process it would compete with the screen for the one event loop (and the GIL).
Both always stop what they started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import uvicorn

from tether.models.processes import free_port, stop_process, wait_until_serving
from tether.demo.provider.app import create_app
from tether.demo.provider.faults import FaultPlan
from tether.models.tokens import TokenCounter

_LOG_LEVEL = "warning"
_SHUTDOWN_GRACE_S = 2.0


def serve(
    host: str = "127.0.0.1",
    port: int = 8787,
    latency_ms: float = 0,
    fail_spec: str | None = None,
    retry_after: float = 1.0,
    until_stdin_closes: bool = False,
) -> None:
    """Serve the scripted provider (see :func:`serve_app`). A bad ``fail_spec`` raises
    ValueError before anything binds."""
    faults = FaultPlan.parse(fail_spec) if fail_spec else None
    serve_app(create_app(latency_ms=latency_ms, faults=faults, retry_after=retry_after), host, port,
              until_stdin_closes=until_stdin_closes)


def serve_app(app: Any, host: str, port: int, *, until_stdin_closes: bool = False) -> None:
    """Serve ``app`` until SIGINT or SIGTERM, whatever becomes of stdin (``… < /dev/null &``
    is a server in the background); with ``until_stdin_closes``, also until the parent that
    holds our stdin goes away, even if it was killed (a child's lifeline). A stream still open
    at the signal (a held one) is cut after the shutdown grace."""
    if until_stdin_closes:
        threading.Thread(target=_stop_at_stdin_eof, name="stdin-watch", daemon=True).start()
    uvicorn.run(app, host=host, port=port, log_level=_LOG_LEVEL, access_log=False,
                timeout_graceful_shutdown=_SHUTDOWN_GRACE_S)


def _stop_at_stdin_eof() -> None:
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.buffer.read(4096):
            pass
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's graceful shutdown


@contextlib.contextmanager
def provider_process(*, latency_ms: float = 0.0, fail_spec: str | None = None,
                     start_timeout_s: float = 30.0) -> Iterator[str]:
    """``tether provider`` in a child process on a free loopback port; yield its base URL
    once it answers; stop it on exit. The child also stops when this process dies (it
    watches its stdin), so a killed console leaves no server behind."""
    port = free_port()
    command = [sys.executable, "-m", "tether.tui.cli", "provider", "--host", "127.0.0.1", "--port", str(port),
               "--latency-ms", repr(latency_ms), "--until-stdin-closes"]
    if fail_spec:
        command += ["--fail", fail_spec]
    with child_server(command, port, "the scripted provider", start_timeout_s) as url:
        yield url


@contextlib.contextmanager
def child_server(command: list[str], port: int, what: str, start_timeout_s: float) -> Iterator[str]:
    """``command`` (a server that stops when its stdin closes) in a child process: its
    ``/v1`` base URL on ``port`` once it answers, with the tail of its stderr in the error
    when it does not; stopped on exit."""
    url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryFile() as errors:  # not the terminal: the console owns it
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            why = wait_until_serving(proc, url, start_timeout_s)
            if why:
                errors.seek(0)
                said = errors.read()[-600:].decode("utf-8", "replace").strip()
                raise RuntimeError(f"{what} on port {port} {why}" + (f": {said}" if said else ""))
            yield url
        finally:
            if proc.stdin is not None:
                proc.stdin.close()
            stop_process(proc)


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that can be awaited until it listens, and leaves signals alone:
    the host process (pytest, the console) owns Ctrl+C, not a server it embeds."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.listening.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def running_provider(
    *,
    latency_ms: float = 0,
    faults: FaultPlan | None = None,
    retry_after: float = 1.0,
    counter: TokenCounter | None = None,
) -> AsyncIterator[str]:
    """Run the provider on 127.0.0.1 (a free port) in this event loop; yield its base URL,
    e.g. ``http://127.0.0.1:40123/v1``; stop the server on exit."""
    app = create_app(latency_ms=latency_ms, faults=faults, retry_after=retry_after, counter=counter)
    async with running_app(app) as url:
        yield url


@contextlib.asynccontextmanager
async def running_app(app: Any) -> AsyncIterator[str]:
    """Serve any ASGI chat-completions app on a free loopback port in this event loop;
    yield its ``/v1`` base URL; stop the server on exit."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level=_LOG_LEVEL,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=_SHUTDOWN_GRACE_S,
    )
    server = _EmbeddedServer(config)
    serving = asyncio.create_task(server.serve())
    try:
        await _until_listening(server, serving)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        await serving  # also re-raises whatever stopped a server that never listened


async def _until_listening(server: _EmbeddedServer, serving: asyncio.Task[None]) -> None:
    listening = asyncio.create_task(server.listening.wait())
    try:
        await asyncio.wait({serving, listening}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        listening.cancel()
    if not server.listening.is_set():
        raise RuntimeError("the scripted provider stopped before it started listening")
