"""One MCP server, live: the supervisor task that alone enters and leaves the SDK's client
(start, restart, stop), and the calls sent on its session from whichever task runs them.
Also the words for what went wrong, from the server's stderr and the launcher's lines.

It imports the MCP SDK at module level: it is loaded only through
:mod:`tether.agents.mcp.catalog`, which the harness imports when an agent names an MCP server,
so the quick commands never load ``mcp`` (tests/processes/test_cold_start.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
import re
import sys
from collections.abc import Coroutine
from importlib.metadata import version
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, Implementation

from tether.agents.mcp.server import MCPServer, MCPStartError
from tether.agents.sandbox import Sandbox
from tether.agents.tools.base import ToolContext
from tether.agents.tool_errors import ToolError
from tether.vocab.cancel import RunCancelled

if TYPE_CHECKING:
    from mcp_types import CallToolResult
    from mcp_types import Tool as ListedTool

log = logging.getLogger("tether.agents.mcp")
# The SDK logs a server's protocol garbage with a traceback; Tether reports it in words (the
# start error quotes the line), and an unconfigured logging's last resort would print it over
# the console's screen.
logging.getLogger("mcp").addHandler(logging.NullHandler())
T = TypeVar("T")

STDERR_TAIL_LINES = 20
"""How many lines of a server's stderr an error quotes."""



def launcher_argv(spec: MCPServer, sandbox: Sandbox | None = None) -> list[str]:
    """The command line that starts a stdio server under the launcher (in ``sandbox`` if given)."""
    assert spec.command is not None
    return [sys.executable, "-m", "tether.agents.mcp_launcher", "--parent", str(os.getpid()),
            *(sandbox.options() if sandbox is not None else ()), "--", spec.command, *spec.args]


class _Link:
    """One MCP server: its live client, and the supervisor task that alone enters and
    leaves that client (start, restart, stop)."""

    def __init__(self, spec: MCPServer, stderr_path: Path | None, sandbox: Sandbox | None = None) -> None:
        self.spec = spec
        self.sandbox = sandbox
        self.stderr_path = stderr_path
        self.client: Client | None = None
        self._loop = asyncio.get_running_loop()
        self._attempt: asyncio.Future[list[ListedTool]] | None = None
        self._wake = asyncio.Event()
        self._close = asyncio.Event()
        self._ended: asyncio.Future[None] | None = None  # resolved when the current session is gone
        self._stopping = False
        self._starting_scope: anyio.CancelScope | None = None
        self._stderr_offset = 0
        self._stdout_noise: str | None = None  # the first line on stdout that was not JSON-RPC
        self.task: asyncio.Task[None] | None = None

    # -- asked by mcp_tools and by the tools ---------------------------------------------
    def launch(self) -> None:
        self.task = self._loop.create_task(self._supervise(), name=f"mcp-supervisor-{self.spec.name}")

    def request_start(self) -> asyncio.Future[list[ListedTool]]:
        if self._attempt is None or self._attempt.done():
            self._attempt = self._loop.create_future()
            self._wake.set()
        return self._attempt

    def request_stop(self) -> None:
        self._stopping = True
        self._close.set()
        self._wake.set()
        if self._starting_scope is not None:
            self._starting_scope.cancel()  # an anyio scope: it respects the SDK's shielded clean-up

    async def call(self, name: str, args: dict[str, Any], ctx: ToolContext, phase: list[str]) -> CallToolResult:
        """Send ``tools/call`` on the live session, starting the server again first if it died."""
        if asyncio.get_running_loop() is not self._loop:
            raise ToolError(f"the MCP server {self.spec.name} belongs to another event loop; "
                            "its tools can only be called from the loop that started it")
        client = self.client
        if client is None or _closed(client):
            if client is not None:
                self._drop(client)  # it died between two calls
            phase[0] = "starting"
            client = await self._restart()
        phase[0] = "sent"

        async def progress(done: float, total: float | None, message: str | None) -> None:
            ctx.progress(message or (f"{done:g} of {total:g}" if total else f"{done:g}"))

        try:
            return await _cancelled_once(client.call_tool(name, args, progress_callback=progress,
                                                          meta={"tether/idempotency_key": ctx.idempotency_key}))
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._drop(client)
                if self._stopping:
                    raise ToolError(f"the MCP server {self.spec.name!r} was stopped during the call "
                                    "(its tools were being put away)") from None
                await self._wait_ended()
                raise ToolError(f"the MCP server {self.spec.name!r} closed the connection during the call "
                                f"(it may have crashed); {await self._stderr_words()}") from None
            raise ToolError(f"the MCP server {self.spec.name!r} refused the call: {exc.message}") from None
        except (asyncio.CancelledError, RunCancelled):
            raise
        except Exception as exc:  # a result that fails the tool's output schema, or the protocol
            raise ToolError(f"the MCP server {self.spec.name!r} returned a result Tether could not use: "
                            f"{_one_line(exc)}") from None

    async def _restart(self) -> Client:
        if self._stopping:
            raise ToolError(f"the MCP server {self.spec.name!r} has been stopped")
        attempt = self.request_start()
        try:
            await asyncio.shield(attempt)  # a Stop of this call must not cancel the start itself
        except MCPStartError as exc:
            raise ToolError(f"the MCP server {self.spec.name!r} had stopped and could not be started again: "
                            f"{exc}") from None
        if self.client is None:
            raise ToolError(f"the MCP server {self.spec.name!r} stopped right after it was started again")
        return self.client

    def _drop(self, client: Client) -> None:
        """Mark a session dead: its supervisor closes it, and the next call starts a new one."""
        if self.client is client:
            self.client = None
            self._close.set()

    async def _wait_ended(self) -> None:
        """Give the supervisor a moment to close a dead session (the SDK reaps the launcher,
        which has written the exit status to stderr by then)."""
        ended = self._ended
        if ended is not None and not ended.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(ended), 5.0)

    # -- the supervisor ------------------------------------------------------------------
    async def _supervise(self) -> None:
        try:
            while not self._stopping:
                await self._wake.wait()
                self._wake.clear()
                attempt = self._attempt
                if self._stopping or attempt is None or attempt.done():
                    continue
                await self._session(attempt)
        finally:
            attempt = self._attempt
            if attempt is not None and not attempt.done():
                attempt.set_exception(self._start_error("it was stopped while it was starting", ""))

    async def _session(self, attempt: asyncio.Future[list[ListedTool]]) -> None:
        """Start the server, serve calls until told to close, then close it (all in this task)."""
        self._close.clear()
        self._stdout_noise = None
        self._ended = self._loop.create_future()
        timeout = self.spec.startup_timeout_s
        scope = anyio.CancelScope(deadline=anyio.current_time() + timeout)
        self._starting_scope = scope
        up = False
        failure: BaseException | None = None
        try:
            with scope:
                async with AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    tools = await _list_tools(client)
                    if scope.cancel_called:  # the deadline passed just now: deliver it, a failed start
                        await anyio.lowlevel.checkpoint()
                    scope.deadline = math.inf
                    self._starting_scope = None
                    up = True
                    self.client = client
                    if not attempt.done():
                        attempt.set_result(tools)
                    if not self._stopping:
                        await self._close.wait()
                    if self.client is client:
                        self.client = None
        except Exception as exc:  # start-up errors arrive wrapped in exception groups
            failure = exc
        finally:
            self._starting_scope = None
            self.client = None
            if not self._ended.done():
                self._ended.set_result(None)
        if up:
            if failure is not None:
                log.debug("MCP server %r: error while closing: %r", self.spec.name, failure)
            return
        if attempt.done():
            return
        if failure is None and scope.cancelled_caught and not self._stopping:
            why = f"it did not answer the MCP handshake within {timeout:g} s"
        else:
            why = "it was stopped while it was starting"
        tail = await self._stderr_tail()
        if failure is not None:
            why = _launcher_words(tail) or self._why(failure)
        if self._stdout_noise:
            why += f"; it wrote to stdout what is not an MCP message: {self._stdout_noise!r}"
        attempt.set_exception(self._start_error(why, tail))

    async def _connect(self, stack: AsyncExitStack) -> Client:
        info = Implementation(name="tether", version=_version())
        spec = self.spec

        async def on_message(message: Any) -> None:
            # Transport errors (a line on stdout that is not JSON-RPC) arrive here; keep the first.
            if isinstance(message, Exception) and self._stdout_noise is None:
                self._stdout_noise = _offending_input(message)

        if spec.url is not None:
            client = Client(spec.url, mode="legacy", cache=None, client_info=info, message_handler=on_message)
        else:
            assert self.stderr_path is not None
            # Private like the run's other files: a server's stderr may echo what its tools read.
            fd = os.open(self.stderr_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            errlog = stack.enter_context(open(fd, "a", encoding="utf-8", errors="replace"))
            self._stderr_offset = errlog.tell()
            argv = launcher_argv(spec, self.sandbox)
            env = {**os.environ, **spec.env, **(self.sandbox.env() if self.sandbox is not None else {})}
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=spec.cwd)
            client = Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None, client_info=info,
                            message_handler=on_message)
        return await stack.enter_async_context(client)

    # -- words -----------------------------------------------------------------------------
    def _why(self, failure: BaseException) -> str:
        leaves = [e for e in _leaves(failure) if not isinstance(e, asyncio.CancelledError)] or [failure]
        exc = next((e for e in leaves if isinstance(e, MCPError)), leaves[0])
        if isinstance(exc, MCPError):
            if exc.code == CONNECTION_CLOSED:
                if self.spec.url is not None:
                    return "the connection closed during the MCP handshake"
                return "it closed the connection before the MCP handshake finished (it exited, or is not an MCP server)"
            return f"it refused the MCP handshake: {exc.message}"
        if isinstance(exc, FileNotFoundError) and self.spec.cwd and not os.path.isdir(self.spec.cwd):
            return f"its folder {self.spec.cwd} does not exist"
        if isinstance(exc, OSError) and type(exc).__module__ == "builtins":
            return f"it could not be started: {exc.strerror or exc}"
        if type(exc).__module__.split(".")[0].startswith("httpx"):
            return f"it could not be reached: {_one_line(exc) or type(exc).__name__}"
        return f"{type(exc).__name__}: {_one_line(exc)}" if str(exc) else type(exc).__name__

    def _start_error(self, why: str, tail: str) -> MCPStartError:
        message = f"MCP server {self.spec.name!r} failed to start: {why} ({self.spec.describe()})."
        if self.spec.url is None:
            message += f" Its stderr ends:\n{tail}" if tail else " It wrote nothing to stderr."
        return MCPStartError(message, server=self.spec.name, stderr_tail=tail)

    async def _stderr_tail(self) -> str:
        if self.stderr_path is None:
            return ""
        return await asyncio.to_thread(stderr_tail, self.stderr_path, self._stderr_offset)

    async def _stderr_words(self) -> str:
        if self.spec.url is not None:
            return "it is reached by URL, so Tether has no stderr of it"
        tail = await self._stderr_tail()
        return f"its stderr ends:\n{tail}" if tail else "it wrote nothing to stderr"


def stderr_tail(path: Path, offset: int = 0, lines: int = STDERR_TAIL_LINES) -> str:
    """The last ``lines`` lines written to ``path`` since ``offset`` (long lines shortened)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = max(offset, size - 64 * 1024)
            f.seek(start)
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    kept = [line if len(line) <= 400 else line[:400] + "…" for line in text.rstrip("\n").split("\n")]
    return "\n".join(kept[-lines:]).strip("\n")


async def _cancelled_once(request: Coroutine[Any, Any, T]) -> T:
    """Await an SDK request in a task of its own that is cancelled at most once, however often
    the caller is (a Stop and a shutdown at the same moment): a second cancel would break
    through the SDK's shielded send of ``notifications/cancelled``."""
    inner = asyncio.ensure_future(request)
    try:
        return await asyncio.shield(inner)
    except asyncio.CancelledError:
        if not inner.done():
            inner.cancel()
            while not inner.done():
                try:
                    await asyncio.wait({inner})
                except asyncio.CancelledError:
                    pass  # the one cancel is on its way; the request ends within milliseconds
        if not inner.cancelled():
            inner.exception()  # retrieved: a result or error that came too late is dropped
        raise


def _launcher_words(tail: str) -> str | None:
    """What the launcher said about a server that ended before the handshake, if it did."""
    for line in reversed(tail.splitlines()):
        said = line.removeprefix("tether.agents.mcp_launcher: ")
        if said == line:
            continue
        if said.startswith("cannot start "):
            return "its command could not be run: " + said.removeprefix("cannot start ")
        match = re.fullmatch(r"the server \((.*)\) (exited with code \d+|was killed by signal \w+)", said)
        if match:
            return f"it {match.group(2)} before the MCP handshake finished"
    return None


def _offending_input(exc: Exception) -> str:
    """The text a transport could not parse, shortened (or the error's own words)."""
    errors = getattr(exc, "errors", None)
    try:
        value = errors()[0].get("input") if callable(errors) else None
    except Exception:
        value = None
    text = value if isinstance(value, str) else _one_line(exc)
    return text if len(text) <= 120 else text[:120] + "…"


def _closed(client: Client) -> bool:
    """Whether the session's connection has already closed (the server died while idle). Reads
    a private flag of the SDK's dispatcher; a version without it reads as open."""
    try:
        dispatcher = client.session._dispatcher  # noqa: SLF001
    except RuntimeError:
        return True
    return bool(getattr(dispatcher, "_closed", False))


async def _list_tools(client: Client) -> list[ListedTool]:
    tools: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang the start
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


@functools.cache
def _version() -> str:
    try:
        return version("tether")
    except Exception:
        return "0"
