"""One ACP agent process and its session, driven from Tether's side of the protocol.

``AcpSession`` is the only thing the harness needs to run an ACP agent as a Tether run:

    session = AcpSession(["opencode", "acp"], workspace=repo, env=env, on_event=sink)
    async with session:                      # start the agent, ``initialize`` (session.info)
        await session.new_session()          # ``session/new`` in the workspace
        ended = await session.prompt("Fix the failing test")   # TurnEnded(stop_reason)

Everything the agent does arrives as ``tether.acp.events`` (to ``on_event`` and to every
``events()`` stream); a permission request arrives as ``PermissionAsked(request)`` and the agent
waits until someone calls ``request.decide(option_id)`` or ``request.cancel()``.

The JSON-RPC itself is the ``acp`` package's (``ClientSideConnection``); this module adds what a
supervisor needs around it: the process's lifetime, timeouts, a dead agent reported with its exit
status and stderr, cancel with a grace period and then a kill, and a close that leaves no process
behind whatever happens, asyncio cancellation included.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from acp import PROTOCOL_VERSION, Client, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation, InitializeResponse
from pydantic import ValidationError

from tether.acp import process
from tether.acp.errors import AcpError, AgentDied, AgentProtocolError, AgentStartError, exit_words
from tether.acp.events import AcpEvent, AgentExited, AgentInfo, BadFrame, ConfigOptions, TurnEnded
from tether.acp.handler import ClientHandler
from tether.acp.stream import EventStream
from tether.acp.transport import CheckedTransport
from tether.acp.config import choose_model, offered_value
from tether.acp.translate import config_list, prompt_usage, quota_usage
from tether.agents.sandbox import Sandbox

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_INIT_TIMEOUT_S = 30.0  # initialize took 1.3–7.7 s cold here; a non-agent never answers
DEFAULT_CANCEL_GRACE_S = 5.0
DEFAULT_MAX_BAD_FRAMES = 20  # in a row: then the session ends, in words
_CLOSE_SESSION_S = 2.0  # how long session/close may take at the end before the process is ended
_EOF_WAIT_S = 0.5  # on close, how long an agent may take to exit by itself once its stdin is closed
_EXIT_WAIT_S = 2.0  # after the connection drops, how long to wait for the exit status
_SEND_TIMEOUT_S = 1.0  # for session/cancel to reach the agent's stdin
_LIST_PAGES = 20  # session/list pages followed at most

EventSink = Callable[[AcpEvent], None]


class AcpSession:
    """An ACP agent process, its connection and (after ``new_session``) one session."""

    def __init__(self, command: Sequence[str], *, workspace: Path, env: Mapping[str, str] | None = None,
                 on_event: EventSink | None = None, init_timeout_s: float = DEFAULT_INIT_TIMEOUT_S,
                 cancel_grace_s: float = DEFAULT_CANCEL_GRACE_S, max_bad_frames: int = DEFAULT_MAX_BAD_FRAMES,
                 client_name: str = "tether", client_version: str = "0", sandbox: Sandbox | None = None,
                 fs: bool = True, mode: str | None = None, model: str | None = None) -> None:
        self.command = list(command)
        self.fs = fs
        """Whether the client's ``fs/*`` is advertised (false: the agent does its own file I/O)."""
        self.mode = mode
        """The session mode to set after ``session/new`` (``session/set_mode``)."""
        self.model = model
        """The model to choose with ``session/set_config_option`` after ``session/new``, where the
        agent lists a ``model`` option (:func:`tether.acp.config.choose_model`)."""
        self.resumed = False
        """Whether the last follow-up went on through ``session/resume`` (no replay), not ``session/load``."""
        self.workspace = Path(workspace).resolve()  # ACP wants an absolute cwd
        self.cancel_grace_s = cancel_grace_s
        self.sandbox = sandbox
        """The OS sandbox the agent runs in (its private temp folder is removed on close)."""
        self.info: AgentInfo | None = None
        self.session_id: str | None = None
        self.returncode: int | None = None
        self._env = dict(env or {})
        self.on_event = on_event
        """Where every event goes, as it happens (may be set after the session started)."""
        self._init_timeout_s = init_timeout_s
        self._max_bad_frames = max_bad_frames
        self._client_info = Implementation(name=client_name, version=client_version)
        self._streams: list[EventStream] = []
        self._handler = ClientHandler(self.workspace, self._emit)
        self._stderr = process.StderrTail()
        self._proc: asyncio.subprocess.Process | None = None
        self._transport: CheckedTransport | None = None
        self._conn: ClientSideConnection | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._exited: asyncio.Task[int | None] | None = None
        self._turn_done: asyncio.Event | None = None  # set while no turn runs
        self._killed = False  # Tether killed the agent after an unanswered cancel
        self._stopped = False  # Tether ended the agent (a kill after cancel, a protocol failure)
        self._closing: asyncio.Task[None] | None = None

    # -- lifetime ---------------------------------------------------------------------------

    async def __aenter__(self) -> AcpSession:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> AgentInfo:
        """Start the agent and ``initialize`` it; AgentStartError (in words) if it is not an ACP agent."""
        if self._proc is not None:
            raise AcpError("this ACP session was already started")
        try:
            self._proc = await process.spawn(self.command, cwd=self.workspace, env=self._env, sandbox=self.sandbox)
            assert self._proc.stdout is not None and self._proc.stdin is not None and self._proc.stderr is not None
            self._tasks.append(asyncio.create_task(self._stderr.drain(self._proc.stderr), name="acp-stderr"))
            self._exited = asyncio.create_task(self._watch(self._proc), name="acp-exit")
            self._transport = CheckedTransport(self._proc.stdout, self._proc.stdin, on_bad=self._bad_frame,
                                               max_consecutive=self._max_bad_frames)
            # The handler implements the part of acp.Client that Tether offers (no terminal, no
            # elicitation): acp's router answers the rest "method not found".
            self._conn = ClientSideConnection(cast(Client, self._handler), self._transport)
            capabilities = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=self.fs,
                                                                        write_text_file=self.fs), terminal=False,
                                              # a shell call's output in its updates (tether.acp.terminal)
                                              field_meta={"terminal_output": True})
            response = await self._call(
                self._conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities,
                                      client_info=self._client_info),
                "initialize", timeout_s=self._init_timeout_s)
        except BaseException as exc:
            await self._close_quietly()
            if isinstance(exc, AgentDied):
                raise AgentStartError(f"{self._name()} is not an ACP agent: it {exit_words(exc.returncode)} "
                                      f"before answering initialize{_said(exc.stderr_tail)}") from None
            if isinstance(exc, AgentProtocolError):
                raise AgentStartError(f"{self._name()} is not an ACP agent: {exc}") from None
            if type(exc) is AcpError:  # it answered, with an error
                raise AgentStartError(f"{self._name()} is not a usable ACP agent: {exc}") from None
            raise
        self.info = agent_info(response)
        return self.info

    async def new_session(self, mcp_servers: Sequence[Any] = ()) -> str:
        """``session/new`` in the workspace; returns the session id."""
        conn = self._require_conn()
        response = await self._call(conn.new_session(cwd=str(self.workspace), mcp_servers=list(mcp_servers)),
                                    "session/new")
        self.session_id = response.session_id
        self._handler.session_id = response.session_id
        await self._choose(response.session_id, response, "session/new")
        return response.session_id

    async def _choose(self, session_id: str, response: Any, source: str) -> None:
        """The agent file's ``mode`` and ``model``, chosen in the session ``source`` (``session/new``,
        ``session/resume``, ``session/load``) answered with ``response``. A resumed or loaded
        session is set only where its answer says it is in another mode or model: Claude's and
        Codex's adapters resume a session in their default model, not the one it was chosen."""
        conn = self._require_conn()
        modes = getattr(response, "modes", None)
        current = getattr(modes, "current_mode_id", None)
        if self.mode is not None and (source == "session/new" or (current is not None and current != self.mode)):
            await self._set_mode(session_id, modes)
        options = config_list(getattr(response, "config_options", None))
        if options:
            self._emit(ConfigOptions(options, source))
        if self.model is not None:
            change = choose_model(self.info.name if self.info else self._name(), self.model, options)
            if change is not None:
                value = offered_value(self.model, options)
                answer = await self._call(conn.set_config_option(config_id=change, session_id=session_id, value=value),
                                          f"session/set_config_option {change} to {value!r}")
                self._emit(ConfigOptions(config_list(answer.config_options), "session/set_config_option"))

    async def _set_mode(self, session_id: str, modes: Any) -> None:
        """``session/set_mode`` to :attr:`mode`; AcpError in words when the agent has no such mode
        or refuses it."""
        conn = self._require_conn()
        known = [m.id for m in getattr(modes, "available_modes", None) or ()]
        if known and self.mode not in known:
            name = self.info.name if self.info else self._name()
            raise AcpError(f"{name} has no session mode {self.mode!r} (the agent file's mode): its modes are "
                           f"{', '.join(known)}")
        await self._call(conn.set_session_mode(mode_id=str(self.mode), session_id=session_id),
                         f"session/set_mode to {self.mode!r}")

    def session_capability(self, name: str) -> bool:
        """Whether the agent advertised ``sessionCapabilities.NAME`` (list, resume, close, fork)."""
        caps = (self.info.capabilities if self.info else {}).get("sessionCapabilities") or {}
        return isinstance(caps, dict) and caps.get(name) is not None

    async def resume_session(self, session_id: str, mcp_servers: Sequence[Any] = ()) -> str:
        """``session/resume`` of an earlier session: the agent goes on in it without replaying
        its history; AcpError if it does not advertise ``sessionCapabilities.resume``."""
        conn = self._require_conn()
        if not self.session_capability("resume"):
            raise AcpError(f"{self._name()} cannot resume a session (it does not advertise session/resume)")
        response = await self._call(conn.resume_session(cwd=str(self.workspace), session_id=session_id,
                                                        mcp_servers=list(mcp_servers)), "session/resume")
        self.session_id = session_id
        self._handler.session_id = session_id
        self.resumed = True
        await self._choose(session_id, response, "session/resume")
        return session_id

    async def fork_session(self, session_id: str, mcp_servers: Sequence[Any] = ()) -> str:
        """``session/fork`` of an earlier session into the workspace as cwd: a new session with
        its whole conversation; AcpError if it does not advertise ``sessionCapabilities.fork``."""
        conn = self._require_conn()
        if not self.session_capability("fork"):
            raise AcpError(f"{self._name()} cannot fork a session (it does not advertise session/fork)")
        response = await self._call(conn.fork_session(cwd=str(self.workspace), session_id=session_id,
                                                      mcp_servers=list(mcp_servers)), "session/fork")
        self.session_id = response.session_id
        self._handler.session_id = response.session_id
        return response.session_id

    async def list_sessions(self) -> list[dict[str, Any]]:
        """The agent's own sessions in the workspace (``session/list``), each ``{sessionId,
        cwd, title, updatedAt}``; AcpError if it does not advertise ``sessionCapabilities.list``."""
        conn = self._require_conn()
        if not self.session_capability("list"):
            raise AcpError(f"{self._name()} cannot list its sessions (it does not advertise session/list)")
        listed: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES):  # an agent that pages without end is not followed forever
            response = await self._call(conn.list_sessions(cwd=str(self.workspace), cursor=cursor), "session/list")
            listed += [s.model_dump(mode="json", by_alias=True, exclude_none=True) for s in response.sessions or ()]
            cursor = response.next_cursor
            if not cursor:
                break
        return listed

    async def session_choices(self, cwd: Path) -> tuple[list[dict[str, str]], str | None, tuple[dict[str, Any], ...]]:
        """What a new session offers, without choosing any: its modes (each ``{id, name}``), the
        current one, and its config options (:func:`~tether.acp.translate.config_list`), from a
        ``session/new`` in ``cwd`` (a folder of no run: the workspace's own list of sessions stays
        as it was), closed again where the agent advertises ``session/close``. New run offers them."""
        conn = self._require_conn()
        response = await self._call(conn.new_session(cwd=str(cwd), mcp_servers=[]), "session/new")
        modes = getattr(response, "modes", None)
        offered = [{"id": m.id, "name": m.name or m.id} for m in getattr(modes, "available_modes", None) or ()]
        options = config_list(getattr(response, "config_options", None))
        if self.session_capability("close"):
            with contextlib.suppress(Exception):  # a refusal is no failure: the process ends soon after
                await asyncio.wait_for(conn.close_session(session_id=response.session_id), _CLOSE_SESSION_S)
        return offered, getattr(modes, "current_mode_id", None), options

    async def follow_up(self, session_id: str, mcp_servers: Sequence[Any] = ()) -> str:
        """Go on in an earlier session: ``session/resume`` where the agent has it (no replay),
        else ``session/load``."""
        if self.session_capability("resume"):
            return await self.resume_session(session_id, mcp_servers)
        return await self.load_session(session_id, mcp_servers)

    async def load_session(self, session_id: str, mcp_servers: Sequence[Any] = ()) -> str:
        """``session/load`` of an earlier session (a follow-up after the agent process is gone);
        AcpError in words if the agent does not advertise ``loadSession``. The agent replays the
        session's history as updates before it answers."""
        conn = self._require_conn()
        if self.info is None or not self.info.load_session:
            raise AcpError(f"{self._name()} cannot load an earlier session (it does not advertise loadSession)")
        response = await self._call(conn.load_session(cwd=str(self.workspace), session_id=session_id,
                                                      mcp_servers=list(mcp_servers)), "session/load")
        self.session_id = session_id
        self._handler.session_id = session_id
        await self._choose(session_id, response, "session/load")
        return session_id

    async def close(self) -> None:
        """End the agent and its process group; idempotent. Completes even when the caller is
        cancelled meanwhile, and then re-raises the cancellation."""
        if self._closing is None:
            self._closing = asyncio.create_task(self._close(), name="acp-close")
        cancelled = False
        while not self._closing.done():
            try:
                await asyncio.shield(self._closing)
            except asyncio.CancelledError:
                cancelled = True
        if cancelled:
            raise asyncio.CancelledError
        self._closing.result()

    # -- turns -------------------------------------------------------------------------------

    async def prompt(self, prompt: str | Sequence[Any]) -> TurnEnded:
        """One ``session/prompt``: returns when the agent answers it, or ``TurnEnded("cancelled",
        killed=True)`` when Tether ended the agent meanwhile (a kill after an unanswered cancel,
        or ``close()``). AgentDied if the agent died by itself."""
        conn = self._require_conn()
        if self.session_id is None:
            raise AcpError("no ACP session yet: call new_session() first")
        if self._turn_done is not None and not self._turn_done.is_set():
            raise AcpError("a turn is already running in this ACP session")
        blocks = [text_block(prompt)] if isinstance(prompt, str) else list(prompt)
        self._turn_done = asyncio.Event()
        self._killed = False
        self._handler.cancelling = False
        try:
            response = await self._call(conn.prompt(session_id=self.session_id, prompt=blocks), "session/prompt")
        except AgentDied:
            if not (self._killed or self._closing is not None):
                raise
            ended = TurnEnded("cancelled", killed=True)  # Tether ended the agent: not a crash
        else:
            usage = prompt_usage(response.usage) or quota_usage(response.field_meta)
            if usage is not None:
                self._emit(usage)
            ended = TurnEnded(str(response.stop_reason))
        finally:
            self._turn_done.set()
        self._emit(ended)
        return ended

    async def cancel(self, grace_s: float | None = None) -> bool:
        """``session/cancel``, answer every pending permission request ``cancelled``, and wait for
        the turn to end; an agent still in the turn after the grace has its process group killed.
        Returns True if it had to be killed."""
        self._handler.cancelling = True
        if self._conn is not None and self.session_id is not None and self._alive():
            # Bounded: an agent that stopped reading its stdin must not hold the cancel up.
            with contextlib.suppress(ConnectionError, OSError, RuntimeError, asyncio.TimeoutError):
                await asyncio.wait_for(self._conn.cancel(session_id=self.session_id), _SEND_TIMEOUT_S)
        self._handler.cancel_pending()
        turn = self._turn_done
        if turn is None or turn.is_set():
            return False
        grace = self.cancel_grace_s if grace_s is None else grace_s
        try:
            await asyncio.wait_for(asyncio.shield(turn.wait()), grace)
            return False
        except asyncio.TimeoutError:
            pass
        self._killed = self._stopped = True
        if self._proc is not None:
            await process.stop(self._proc)
        await turn.wait()
        return True

    # -- events ------------------------------------------------------------------------------

    def events(self) -> EventStream:
        """A stream of every event from now on, ending when the session is closed. Subscribed at
        the call, so nothing between this call and the first ``async for`` step is lost."""
        stream = EventStream(lambda: self._streams.remove(stream))
        self._streams.append(stream)
        if self._closing is not None and self._closing.done():
            stream.end()
        return stream

    @property
    def pid(self) -> int | None:
        """The process (and process group) id Tether started: the launcher the agent runs under."""
        return self._proc.pid if self._proc is not None else None

    @property
    def gone(self) -> bool:
        """Whether the agent's process has ended (it died, was killed, or was closed)."""
        return self._closing is not None or (self._proc is not None and (
            self._proc.returncode is not None or (self._exited is not None and self._exited.done())))

    @property
    def stderr_tail(self) -> str:
        return self._stderr.text()

    @property
    def bad_frames(self) -> int:
        return self._transport.bad_frames if self._transport is not None else 0

    # -- internals ---------------------------------------------------------------------------

    def _emit(self, event: AcpEvent) -> None:
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:
                logger.exception("an ACP event sink failed on %s", type(event).__name__)
        for stream in list(self._streams):
            stream.put(event)

    def _bad_frame(self, count: int, sample: str) -> None:
        self._emit(BadFrame(count, sample))

    def _name(self) -> str:
        shown = " ".join(self.command)
        return f"`{shown if len(shown) <= 80 else shown[:77] + '...'}`"

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    def _require_conn(self) -> ClientSideConnection:
        if self._conn is None:
            raise AcpError("the ACP session is not started")
        if self._closing is not None:
            raise AcpError("the ACP session is closed")
        return self._conn

    async def _watch(self, proc: asyncio.subprocess.Process) -> int | None:
        code = await process.reap(proc)
        self.returncode = code
        await asyncio.sleep(0)  # let the stderr drain take the last bytes first
        expected = self._stopped or self._closing is not None
        self._emit(AgentExited(code, self._stderr.text(), expected))
        return code

    async def _call(self, request: Awaitable[T], what: str, timeout_s: float | None = None) -> T:
        """Await a request to the agent, watching the agent: a dead agent, a run of bad frames
        or a timeout each become an AcpError that says which."""
        call = asyncio.ensure_future(request)
        assert self._exited is not None
        try:
            done, _ = await asyncio.wait({call, self._exited}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            call.cancel()
            with contextlib.suppress(BaseException):
                await call
            raise
        if call in done:
            try:
                return call.result()
            except RequestError as exc:
                raise AcpError(f"the agent refused {what}: {exc}{_data(exc.data)}") from None
            except ValidationError as exc:  # an answer, but not the shape ACP gives it
                raise AgentProtocolError(f"its answer to {what} is malformed: {_first_problem(exc)}") from None
            except ConnectionError:
                pass  # the connection dropped: say why below
        else:
            call.cancel()
            with contextlib.suppress(BaseException):
                await call
            if not done:
                raise AgentStartError(f"{self._name()} did not answer {what} within {timeout_s:g} s: "
                                      f"is it an ACP agent?{_said(self._stderr.text())}")
        raise await self._why_gone(what)

    async def _why_gone(self, what: str) -> AcpError:
        if self._transport is not None and self._transport.gave_up:
            self._stopped = True
            if self._proc is not None:
                await process.stop(self._proc)
            return AgentProtocolError(f"{self._name()} sent {self._transport.consecutive_bad} malformed frames in a "
                                      f"row during {what}; the session was ended")
        assert self._exited is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._exited), _EXIT_WAIT_S)
        code = self._proc.returncode if self._proc is not None else None
        tail = self._stderr.text()
        return AgentDied(f"the agent {self._name()} {exit_words(code)} during {what}{_said(tail)}", code, tail)

    async def _close(self) -> None:
        self._handler.closing = True
        self._handler.cancel_pending()
        try:
            await self._close_session()
            if self._proc is not None:
                await process.stop(self._proc, eof_wait_s=_EOF_WAIT_S)
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._conn.close(), _EXIT_WAIT_S)
        finally:
            if self._exited is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(self._exited), _EXIT_WAIT_S)
                self._tasks.append(self._exited)
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(BaseException):
                    await task
            if self._turn_done is not None:
                self._turn_done.set()
            for stream in list(self._streams):
                stream.end()
            if self.sandbox is not None:
                await asyncio.to_thread(self.sandbox.remove_tmp)

    async def _close_session(self) -> None:
        """``session/close`` before the process ends, where the agent advertises it (it frees
        what the agent holds for the session); a refusal or a silence is no failure."""
        if (self._conn is None or self.session_id is None or self._stopped or self.returncode is not None
                or self._proc is None or self._proc.returncode is not None or not self.session_capability("close")):
            return
        try:
            await asyncio.wait_for(self._conn.close_session(session_id=self.session_id), _CLOSE_SESSION_S)
        except Exception as exc:  # noqa: BLE001 - the process is ended next whatever it said
            logger.info("%s: session/close went unanswered (%s)", self._name(), type(exc).__name__)

    async def _close_quietly(self) -> None:
        with contextlib.suppress(Exception):
            await self.close()


def agent_info(response: InitializeResponse) -> AgentInfo:
    """The name, version, auth methods and capabilities ``initialize`` returned."""
    agent = response.agent_info
    capabilities = response.agent_capabilities
    auth = tuple(str(getattr(m, "id", "")) for m in response.auth_methods or ())
    return AgentInfo(
        name=agent.name if agent else "unknown", version=agent.version if agent else "unknown",
        title=agent.title if agent else None, protocol_version=response.protocol_version, auth_methods=auth,
        load_session=bool(capabilities and capabilities.load_session),
        capabilities=capabilities.model_dump(mode="json", by_alias=True, exclude_none=True) if capabilities else {},
    )


def _said(tail: str) -> str:
    if not tail:
        return ""
    last = tail.strip().splitlines()[-3:]
    return "; its stderr ends: " + " | ".join(line.strip() for line in last)


def _first_problem(exc: ValidationError) -> str:
    """The first thing wrong with an answer, by its ACP field name: ``protocolVersion is
    missing`` (pydantic's own text is four lines and a link)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    key = ".".join(str(part) for part in first["loc"]) or "the result"
    words = f"{key} is missing" if first["type"] == "missing" else f"{key}: {str(first['msg']).lower()}"
    more = len(errors) - 1
    return words + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def _data(data: Any) -> str:
    return f" ({data})" if data else ""
