"""MCP servers as tool catalogs.

An agent lists :class:`MCPServer` s; a run enters :func:`mcp_tools`, which starts them,
lists their tools and yields them as :class:`MCPTool` objects that the loop calls like any
other tool. Leaving the block stops every server, however it is left.

    async with mcp_tools([MCPServer("time", command=sys.executable, args=("-m", "mcp_server_time"),
                                    trust_annotations=True)]) as tools:
        ...  # tools: [MCPTool get_current_time, MCPTool convert_time]

How it is built (on facts measured with mcp 2.3 and the reference time server):

* **One supervisor task per server.** The SDK's client context must be entered and left in
  the same task ("exit cancel scope in a different task" otherwise). Each server gets a task
  of its own, started by :func:`mcp_tools`, that is the only one ever to enter or leave that
  server's client: the first start, every restart and the final stop. Tool calls, from
  whichever task the loop runs them in (``CancelSignal.guard`` runs each in a task of its own),
  only send requests on the live session and ask the supervisor for a (re)start. So a run
  driven from one task, several tasks or none in particular all keep the SDK's rule.
* **Cancellation reaches the SDK once, or never.** The supervisors are never cancelled with
  ``Task.cancel()`` (a second cancel breaks through the SDK's shielded shutdown and leaks the
  server): they are told to stop with an event, and a start-up is cut off with an anyio
  cancel scope, which respects the SDK's shields. A Stop during a call cancels the call's own
  task once, through ``ctx.signal.guard``; the SDK then sends ``notifications/cancelled`` and
  the session stays usable. Leaving :func:`mcp_tools` waits for the supervisors to finish
  (a cancellation arriving meanwhile is held and re-raised once they have).
* **Handshake.** ``mode="legacy"`` (the ``initialize`` handshake): the default ``"auto"`` first
  probes a newer handshake with a fixed 10 s timeout. Start-up (spawn, handshake and the tool
  listing) is bounded by ``MCPServer.startup_timeout_s``: a server that never answers fails
  with :class:`MCPStartError` instead of hanging.
* **Processes.** Every stdio server runs under ``python -m tether.agents.mcp_launcher`` (see that
  module), which closes the SDK's two process leaks: grandchildren of a server that exits
  cleanly, and a server that ignores EOF when the harness is SIGKILLed.
* **A dead server** (it crashed, or closed the connection) fails the call in flight with a
  :class:`~tether.agents.tools.base.ToolError` that quotes the end of its stderr; the next call
  restarts it. Tools keep the names and schemas of the first listing.
* **Policy.** Tool annotations are hints the spec calls untrusted: they set read_only,
  needs_approval and idempotent only for a server with ``trust_annotations=True``. An
  untrusted server's tools all write and need approval, and the approval's reason says so.
* **Names.** A tool keeps the server's name for it unless that collides (``time.get_current_time``
  then). The model is offered each tool under :func:`~tether.agents.tools.base.offered_name`
  (``time__get_current_time``: hosted endpoints refuse dots and more), and the run loop maps
  its calls back; two tools that would be offered under one name are refused at start.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import json
import logging
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Collection, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import jsonschema

from tether.run.cancel import RunCancelled
from tether.agents.tools.base import Tool, ToolContext, ToolError, offered_name

if TYPE_CHECKING:
    import anyio
    from mcp import Client
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

STOP_WAIT_S = 15.0
"""How long leaving :func:`mcp_tools` waits for the servers to stop before it cancels their
supervisors (the SDK's own shutdown is bounded at about 6 s; the launcher makes it far less)."""

PREFIX_SEPARATOR = "."
"""Between a server's name and its tool's when names collide (``time.get_current_time``): the
name the trace, the console and the approvals show. The model is offered the name rewritten by
:func:`~tether.agents.tools.base.offered_name` (``time__get_current_time``), since OpenAI's API and
others accept only ``[A-Za-z0-9_-]{1,64}`` in function names."""

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")
_ANY_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}


@dataclass(frozen=True)
class MCPServer:
    """An MCP server an agent uses: a program spoken to over stdio, or a URL (streamable HTTP).

    ``env`` is added to the environment Tether runs in. ``trust_annotations``: take the
    server's tool annotations (read-only, destructive, idempotent) as policy; without it
    every tool of the server writes and needs approval. ``startup_timeout_s`` bounds the
    start (spawn, handshake, tool listing).
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    cwd: str | None = None
    url: str | None = None
    trust_annotations: bool = False
    startup_timeout_s: float = 20.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"an MCP server's name must be 1 to 64 letters, digits, '_', '-' or '.' "
                             f"(not starting with '.'), not {self.name!r}")
        who = f"the MCP server {self.name!r}"
        if (self.command is None) == (self.url is None):
            raise ValueError(f"{who} needs exactly one of a command (stdio) or a url (streamable HTTP)")
        if self.command is not None:
            if not isinstance(self.command, str) or not self.command.strip():
                raise ValueError(f"{who}: the command must be a non-empty string")
        if isinstance(self.args, str) or not all(isinstance(a, str) for a in self.args):
            raise ValueError(f"{who}: args must be a list of strings, not {self.args!r}")
        object.__setattr__(self, "args", tuple(self.args))
        if self.url is not None:
            if self.args:
                raise ValueError(f"{who} has a url, so it takes no args")
            if not isinstance(self.url, str) or not re.match(r"https?://[^/\s]+", self.url):
                raise ValueError(f"{who}: the url must start with http:// or https:// and name a host, "
                                 f"not {self.url!r}")
            if self.env or self.cwd is not None:
                raise ValueError(f"{who} has a url: env and cwd apply only to a server Tether starts (a command)")
        if not isinstance(self.env, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()):
            raise ValueError(f"{who}: env must map names to strings")
        object.__setattr__(self, "env", dict(self.env))
        if self.cwd is not None:
            if not isinstance(self.cwd, (str, os.PathLike)):
                raise ValueError(f"{who}: cwd must be a folder path, not {self.cwd!r}")
            object.__setattr__(self, "cwd", os.fspath(self.cwd))
        if not isinstance(self.trust_annotations, bool):
            raise ValueError(f"{who}: trust_annotations must be true or false")
        timeout = self.startup_timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
                or timeout <= 0:
            raise ValueError(f"{who}: startup_timeout_s must be a positive number of seconds, not {timeout!r}")

    def describe(self) -> str:
        """The command line or the URL, as errors quote it."""
        if self.url is not None:
            return f"url: {self.url}"
        return "command: " + shlex.join([self.command or "", *self.args])


class MCPStartError(Exception):
    """A server failed to start; the message names the server and ends with the tail of its stderr."""

    def __init__(self, message: str, *, server: str, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.server = server
        self.stderr_tail = stderr_tail


# ---- tools -------------------------------------------------------------------------------

class MCPTool(Tool):
    """One tool of an MCP server, called on that server's session.

    ``name`` is the server's name for it unless it collides with another tool of the agent,
    then ``<server>.<name>``; ``remote_name`` is what the server calls it. The model is offered
    it as ``offered_name(name)`` (see :func:`~tether.agents.tools.base.offered_name`).
    """

    def __init__(self, link: _Link, listed: ListedTool, name: str) -> None:
        self._link = link
        self.name = name
        self.remote_name = listed.name
        self.server = link.spec.name
        self.source = f"mcp:{link.spec.name}"
        self.ref = None
        self.annotations = listed.annotations
        self.parameters, self.schema_problem = usable_schema(listed.input_schema)
        description = (listed.description or "").strip() or (
            listed.annotations.title if listed.annotations and listed.annotations.title else "")
        if not description:
            description = f"{listed.name} (a tool of the MCP server {self.server}, which gave no description)"
        if self.schema_problem:
            description += (f"\n(Its input schema could not be used: {self.schema_problem}. Any arguments are "
                            "accepted here; the server checks them.)")
            log.warning("MCP server %r, tool %r: input schema not usable (%s); accepting any arguments",
                        self.server, listed.name, self.schema_problem)
        self.description = description
        self.read_only, self.needs_approval, self.idempotent = policy(listed.annotations, link.spec.trust_annotations)

    def __repr__(self) -> str:
        return f"<MCPTool {self.name} ({self.source})>"

    def approval_reason(self) -> str:
        """An untrusted server's tool needs approval because its annotations are not believed,
        not because of what they say: the reason says that, and how to trust the server."""
        if self._link.spec.trust_annotations:
            return super().approval_reason()
        said = annotation_words(self.annotations)
        untrusted = f"the MCP server {self.server!r} is not trusted"
        _, trusted_needs_approval, _ = policy(self.annotations, True)
        if trusted_needs_approval:
            own = ("this tool gives no annotations" if self.annotations is None
                   else f"this tool's annotations ({said}) ask for approval too")
            return f"{untrusted}, so each of its tools counts as one that writes; {own}, so trusting it would not help"
        return (f"{untrusted}, so its tools' annotations ({said}) are not believed; trust it with "
                f"trust_annotations = true under [mcp.{_toml_key(self.server)}] in the agent file to use them")

    def check_args(self, args: dict[str, Any]) -> str | None:
        try:
            return super().check_args(args)
        except Exception as exc:  # e.g. a $ref the validator cannot resolve: leave the checking to the server
            log.debug("MCP tool %s: arguments not checked here (%s)", self.name, exc)
            return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        """Call the tool. A Stop cancels the request (the server is told); a tool error, a
        refusal or a dead server is a :class:`ToolError` in words."""
        phase = ["waiting"]  # waiting -> starting (a restart) -> sent
        try:
            result = await ctx.signal.guard(self._link.call(self.remote_name, args, ctx, phase))
        except RunCancelled:
            if phase[0] == "sent":
                ctx.partial = f"the MCP request was cancelled (notifications/cancelled sent to {self.server})"
            elif phase[0] == "starting":
                ctx.partial = f"the MCP server {self.server} was restarting; nothing was sent to it"
            raise
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"the MCP tool {self.remote_name} reported an error and gave no message")
        return text


def policy(annotations: Any, trusted: bool) -> tuple[bool, bool, bool]:
    """(read_only, needs_approval, idempotent) from a tool's annotations.

    Untrusted: writes, needs approval, not idempotent, whatever the server says. Trusted: the
    spec's reading, with its defaults for what is left out (not read-only, destructive, not
    idempotent): read-only needs no approval; otherwise only a tool that declares itself not
    destructive goes without approval."""
    if not trusted:
        return False, True, False
    read_only = bool(annotations is not None and annotations.read_only_hint is True)
    if read_only:
        return True, False, True
    destructive = annotations is None or annotations.destructive_hint is not False
    idempotent = bool(annotations is not None and annotations.idempotent_hint is True)
    return False, destructive, idempotent


def annotation_words(annotations: Any) -> str:
    """What a tool's annotations say about policy, in words ("read-only", "not destructive, idempotent")."""
    if annotations is None:
        return "none given"
    if annotations.read_only_hint is True:
        words = ["read-only"]
    else:
        words = {True: ["destructive"], False: ["not destructive"]}.get(annotations.destructive_hint, [])
    if annotations.idempotent_hint is True:
        words.append("idempotent")
    return ", ".join(words) or "no hints about writing"


def _toml_key(name: str) -> str:
    """A server's name as a key of the agent file's [mcp.<name>] table (quoted when it must be)."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def usable_schema(schema: Any) -> tuple[dict[str, Any], str | None]:
    """The tool's input schema, or an object schema that accepts anything and why."""
    if not isinstance(schema, dict):
        return dict(_ANY_OBJECT), "it is not a JSON object"
    if schema.get("type") != "object":
        return dict(_ANY_OBJECT), 'its root is not {"type": "object"}'
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return dict(_ANY_OBJECT), f"it is not a valid JSON schema ({exc.message})"
    except Exception as exc:  # e.g. an unresolvable $schema or $ref
        return dict(_ANY_OBJECT), f"it could not be checked ({exc})"
    return schema, None


def result_text(result: CallToolResult) -> str:
    """A tool result as the text the model reads: text blocks joined, other blocks described in
    words, and the structured content as JSON when there is no text."""
    parts: list[str] = []
    has_text = False
    for block in result.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
            has_text = True
        elif kind in ("image", "audio"):
            parts.append(f"[{block.mime_type}, {_decoded_size(block.data)} bytes]")
        elif kind == "resource_link":
            words = f"[resource link {block.uri}"
            if getattr(block, "name", None):
                words += f" ({block.name})"
            parts.append(words + "]")
        elif kind == "resource":
            res = block.resource
            if getattr(res, "text", None) is not None:
                parts.append(f"[resource {res.uri}]\n{res.text}")
                has_text = True
            else:
                mime = getattr(res, "mime_type", None) or "binary"
                parts.append(f"[resource {res.uri}, {mime}, {_decoded_size(getattr(res, 'blob', ''))} bytes]")
        else:
            parts.append(f"[a {kind or type(block).__name__} block]")
    if not has_text and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


# ---- one server --------------------------------------------------------------------------

def launcher_argv(spec: MCPServer) -> list[str]:
    """The command line that starts a stdio server under the launcher."""
    assert spec.command is not None
    return [sys.executable, "-m", "tether.agents.mcp_launcher", "--parent", str(os.getpid()), "--", spec.command, *spec.args]


class _Link:
    """One MCP server: its live client, and the supervisor task that alone enters and
    leaves that client (start, restart, stop)."""

    def __init__(self, spec: MCPServer, stderr_path: Path | None) -> None:
        self.spec = spec
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
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

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
        import anyio
        import anyio.lowlevel

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
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp_types import Implementation

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
            argv = launcher_argv(spec)
            params = StdioServerParameters(command=argv[0], args=argv[1:], env={**os.environ, **spec.env},
                                           cwd=spec.cwd)
            client = Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None, client_info=info,
                            message_handler=on_message)
        return await stack.enter_async_context(client)

    # -- words -----------------------------------------------------------------------------
    def _why(self, failure: BaseException) -> str:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

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
        from importlib.metadata import version

        return version("tether")
    except Exception:
        return "0"


# ---- the catalog -------------------------------------------------------------------------

def catalog(listings: Sequence[tuple[_Link, Sequence[ListedTool]]], reserved: Collection[str]) -> list[MCPTool]:
    """Every server's tools, named: a name two servers share, or one the agent already uses,
    is prefixed by the server (``time.get_current_time``).

    Raises :class:`MCPStartError` when two tools would be offered to the model under one name
    (:func:`~tether.agents.tools.base.offered_name`: ``a.b`` and ``a__b`` both go as ``a__b``): the
    model could not tell them apart, and a call of that name could not be mapped back."""
    own: list[tuple[_Link, list[ListedTool]]] = []
    for link, tools in listings:
        seen: dict[str, ListedTool] = {}
        for listed in tools:
            if listed.name in seen:
                log.warning("MCP server %r lists the tool %r twice; the first is kept", link.spec.name, listed.name)
                continue
            seen[listed.name] = listed
        own.append((link, list(seen.values())))
    counts = Counter(listed.name for _, tools in own for listed in tools)
    taken = set(reserved)
    out: list[MCPTool] = []
    for link, tools in own:
        for listed in tools:
            name = listed.name
            if counts[name] > 1 or name in taken:
                name = f"{link.spec.name}{PREFIX_SEPARATOR}{listed.name}"
                base, n = name, 2
                while name in taken:
                    name, n = f"{base}_{n}", n + 1
            taken.add(name)
            out.append(MCPTool(link, listed, name))
    _refuse_shared_offered_names(out, reserved)
    return out


def _refuse_shared_offered_names(tools: Sequence[MCPTool], reserved: Collection[str]) -> None:
    offered: dict[str, str] = {offered_name(name): f"the agent's own tool {name!r}" for name in reserved}
    for tool in tools:
        wire = offered_name(tool.name)
        other = offered.get(wire)
        if other is None:  # tool names are unique already: a name taken here is another tool's
            offered[wire] = f"the tool {_tool_words(tool)} of the MCP server {tool.server!r}"
            continue
        spec = tool._link.spec  # noqa: SLF001
        why = (f"its tool {_tool_words(tool)} would be offered to the model as {wire!r}, and so would {other}; "
               f"model endpoints accept only letters, digits, '_' and '-' in a tool name (at most 64), so the "
               f"two cannot be told apart: rename this server or the other tool")
        raise MCPStartError(f"MCP server {spec.name!r} failed to start: {why} ({spec.describe()}).", server=spec.name)


def _tool_words(tool: MCPTool) -> str:
    return repr(tool.name) if tool.name == tool.remote_name else f"{tool.remote_name!r} (named {tool.name!r})"


@asynccontextmanager
async def mcp_tools(servers: Sequence[MCPServer], *, reserved: Collection[str] = (),
                    stderr_dir: Path | None = None) -> AsyncIterator[list[Tool]]:
    """Start every server (concurrently), list its tools, yield them as :class:`MCPTool` s;
    stop every server on exit, however the block exits (exception, cancellation).

    ``reserved``: the names of the agent's other tools (an MCP tool with one of them is
    prefixed by its server). ``stderr_dir``: where each server's stderr goes
    (``mcp-<name>.stderr.log``, appended to); by default a temporary folder removed on exit.
    Raises :class:`MCPStartError` (after stopping the others) if a server fails to start.
    """
    servers = list(servers)
    names = Counter(s.name for s in servers)
    twice = sorted(n for n, c in names.items() if c > 1)
    if twice:
        raise ValueError(f"two MCP servers are named {twice[0]!r}; each needs a name of its own")
    if not servers:
        yield []
        return
    temp: str | None = None
    if any(s.command is not None for s in servers):
        if stderr_dir is None:
            temp = tempfile.mkdtemp(prefix="tether-mcp-")
            folder = Path(temp)
        else:
            folder = Path(stderr_dir)
            folder.mkdir(parents=True, exist_ok=True)
    links = [_Link(s, folder / f"mcp-{s.name}.stderr.log" if s.command is not None else None) for s in servers]
    try:
        for link in links:
            link.launch()
        attempts = [link.request_start() for link in links]
        await asyncio.wait(attempts)
        failures = [a.exception() for a in attempts]
        errors = [e for e in failures if e is not None]
        if errors:
            first = errors[0]
            if len(errors) == 1 and isinstance(first, MCPStartError):
                raise first
            words = "\n\n".join(str(e) for e in errors)
            raise MCPStartError(words, server=getattr(first, "server", servers[0].name),
                                stderr_tail=getattr(first, "stderr_tail", ""))
        yield list(catalog([(link, a.result()) for link, a in zip(links, attempts)], reserved))
    finally:
        try:
            await _stop(links)
        finally:
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)


async def _stop(links: Sequence[_Link]) -> None:
    """Stop every server and wait for it; a cancellation arriving meanwhile is re-raised after."""
    for link in links:
        link.request_stop()
    pending = {link.task for link in links if link.task is not None}
    cancelled = False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STOP_WAIT_S
    forced = False
    while pending:
        try:
            _, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - loop.time()))
        except asyncio.CancelledError:
            cancelled = True  # held: the servers are stopped before this block is left
            continue
        if pending and loop.time() >= deadline:
            if forced:
                log.warning("MCP supervisors %s did not stop; abandoning them", [t.get_name() for t in pending])
                break
            forced = True
            for task in pending:
                if not task.cancelling():
                    task.cancel()  # last resort, once
            deadline = loop.time() + 5.0
    for link in links:
        task = link.task
        if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
            log.warning("MCP server %r: its supervisor failed: %r", link.spec.name, task.exception())
        attempt = link._attempt
        if attempt is not None and attempt.done() and not attempt.cancelled():
            attempt.exception()  # retrieved: a start nobody waited for (the block was cancelled) is not news
    if cancelled:
        raise asyncio.CancelledError
