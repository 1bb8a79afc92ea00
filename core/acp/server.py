"""Tether as an ACP agent: ``tether acp [--config FILE] [--store URL|DIR]``.

An editor (Zed, JetBrains, Toad) or any ACP client starts this over stdio, and Tether's own
agents run as its sessions: each session is a run on the store (the session id is the run
id), so every Tether console sees it, decides its calls and can stop it, while the editor
streams it. The agents are those of the agent file, else the demo's scripted scenarios, and
are offered both as session modes and as a session config option (``agent``), since the
protocol has both and editors support one or the other.

The JSON-RPC is the ``acp`` package's (``AgentSideConnection``); this module is the part
of ``acp.Agent`` Tether offers, and a lifetime that ends cleanly: on stdin's end (or
SIGTERM) every running run is stopped, in words, and awaited, and nothing is left running.
:mod:`tether.acp.serving` holds the session, the translation of events and the approvals.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import logging
import os
import signal
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import acp
from acp import PROTOCOL_VERSION, RequestError, schema
from acp.agent.connection import AgentSideConnection

from tether.acp.serving.session import ServedSession
from tether.acp.transport import CheckedTransport
from tether.acp.serving.updates import prompt_text, replay
from tether.agents.agent import Agent
from tether.agents.sets import AgentSet, known_agents
from tether.harness import Harness
from tether.store.protocol import call
from tether.store.spec import open_store
from tether.vocab.state import StateError, new_run_id
from tether.agents.config import ConfigError, find_config, load_config

log = logging.getLogger(__name__)
MAX_BAD_LINES = 100  # in a row from the client: then the serving ends (the client writes no ACP)

AGENT_OPTION = "agent"
"""The session config option that picks the agent (the same choice as the session mode)."""
STDIO_LIMIT = 50 * 1024 * 1024  # one frame may be large (a replayed transcript): as acp's own default


class Offered:
    """The agents an editor may pick for a session: the agent file's, else the harness's agent
    sets' (the demo's, as ``tether acp`` gives it)."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        config = harness.config
        if config is not None:
            self.names: dict[str, str] = {name: _entry_words(entry) for name, entry in config.data.agents.items()}
        else:
            self.names = {name: f"scripted: {words}" for name, words in known_agents(harness.agent_sets).items()}
        if not self.names:
            raise StateError("no agents to offer: give an agent file (--config FILE, $TETHER_CONFIG or ./tether.toml)")

    @property
    def default(self) -> str:
        return next(iter(self.names))

    def builder(self, name: str) -> Callable[[], Agent]:
        """How to build the agent ``name`` when the session's first prompt comes (importing its
        tools then, not when the editor merely lists them)."""
        config = self.harness.config
        if config is not None:
            return lambda: config.agent(name)
        return lambda: self.harness.agent_named(name)

    def modes(self, current: str) -> schema.SessionModeState:
        modes = [schema.SessionMode(id=name, name=name, description=words) for name, words in self.names.items()]
        if current not in self.names:  # a loaded run of an agent no longer offered: shown, not offered
            modes.append(schema.SessionMode(id=current, name=current, description="this run's agent"))
        return schema.SessionModeState(current_mode_id=current, available_modes=modes)

    def options(self, current: str) -> list[schema.SessionConfigOptionSelect]:
        choices = [schema.SessionConfigSelectOption(value=name, name=name, description=words)
                   for name, words in self.names.items()]
        if current not in self.names:
            choices.append(schema.SessionConfigSelectOption(value=current, name=current, description="this run's agent"))
        return [schema.SessionConfigOptionSelect(id=AGENT_OPTION, name="Agent", category="mode", type="select",
                                                 description="the Tether agent this session runs",
                                                 current_value=current, options=choices)]


class TetherAgent:
    """The part of ``acp.Agent`` Tether implements; the acp package's router calls these by name
    and answers "method not found" for the rest (authentication, terminals, session lists)."""

    def __init__(self, harness: Harness, offered: Offered) -> None:
        self.harness = harness
        self.offered = offered
        self.client: Any = None
        self.by = "editor"
        """The editor's name (``clientInfo``): who its decisions and Stops are recorded as."""
        self.sessions: dict[str, ServedSession] = {}
        self._modes: dict[str, str] = {}

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, client_info: schema.Implementation | None = None,
                         **_: Any) -> schema.InitializeResponse:
        """Who Tether is and what it offers: sessions it can load (every run on the store), and
        text prompts. The editor's capabilities are not used: Tether's agents bring their own
        file tools and run them in their own workspaces."""
        if client_info is not None and client_info.name:
            self.by = client_info.name
        return schema.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(load_session=True, prompt_capabilities=schema.PromptCapabilities()),
            agent_info=schema.Implementation(name="tether", title="Tether", version=_version()),
            auth_methods=[],
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **_: Any) -> schema.NewSessionResponse:
        """A session, and the run id it will have; the run is made by the first prompt. The
        editor's folder and MCP servers are not the agent's: a Tether agent brings its own
        workspace and tools, as its agent file says."""
        session_id = new_run_id("acp")
        mode = self.offered.default
        self.sessions[session_id] = ServedSession(self.harness, self.client, session_id, by=self.by,
                                                  agent=self.offered.builder(mode))
        self._modes[session_id] = mode
        return schema.NewSessionResponse(session_id=session_id, modes=self.offered.modes(mode),
                                         config_options=self.offered.options(mode))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           **_: Any) -> schema.LoadSessionResponse:
        """A run on the store as a session: its conversation replayed as updates, then later
        prompts are follow-ups of the run."""
        try:
            state = await call(self.harness.store, self.harness.load, session_id)
        except StateError as exc:
            raise _refused(f"no run {session_id} to load: {exc}") from None
        session = self.sessions.get(session_id)
        if session is None:
            session = ServedSession(self.harness, self.client, session_id, by=self.by)
            self.sessions[session_id] = session
        mode = state.agent.name if state.agent is not None else state.model
        self._modes[session_id] = mode
        for update in replay(state):
            await session.send(update)
        return schema.LoadSessionResponse(modes=self.offered.modes(mode), config_options=self.offered.options(mode))

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> schema.SetSessionModeResponse:
        self._choose(session_id, mode_id)
        return schema.SetSessionModeResponse()

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **_: Any) -> schema.SetSessionConfigOptionResponse:
        if config_id != AGENT_OPTION or not isinstance(value, str):
            raise _refused(f"Tether has one session option, {AGENT_OPTION!r} (an agent's name)")
        self._choose(session_id, value)
        return schema.SetSessionConfigOptionResponse(config_options=self.offered.options(value))

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> schema.PromptResponse:
        session = self._session(session_id)
        text = prompt_text(prompt)
        if not text.strip():
            raise _refused("a prompt needs words: Tether's agents read text")
        try:
            reason = await session.prompt(text)
        except RuntimeError as exc:
            raise _refused(str(exc)) from None
        return schema.PromptResponse(stop_reason=reason)

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def close(self) -> None:
        """Every session's run stopped and awaited, every open permission request let go of."""
        await asyncio.gather(*(session.close() for session in self.sessions.values()), return_exceptions=True)

    def _choose(self, session_id: str, name: str) -> None:
        session = self._session(session_id)
        current = self._modes.get(session_id)
        if name == current:
            return
        if session.started:
            raise _refused(f"session {session_id} already runs agent {current}: its run cannot change agent; "
                           "open a new session for another")
        if name not in self.offered.names:
            raise _refused(f"no agent {name!r} here (offered: {', '.join(self.offered.names)})")
        session.choose(self.offered.builder(name))
        self._modes[session_id] = name

    def _session(self, session_id: str) -> ServedSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise _refused(f"no session {session_id} here: open it with session/new, or session/load for a run on "
                           "the store")
        return session


async def serve(config_path: str | Path | None = None, store_spec: str | Path | None = None, *,
                workspace: str | Path | None = None, stdin: asyncio.StreamReader | None = None,
                stdout: asyncio.StreamWriter | None = None, agent_sets: Sequence[AgentSet] = ()) -> None:
    """Be an ACP agent on ``stdin``/``stdout`` (the process's own by default) until the
    client closes its end, or SIGTERM: then every running run is stopped and awaited.

    ``config_path``: the agent file (else ``$TETHER_CONFIG``, else ``./tether.toml``, else the
    demo's scripted agents); ``store_spec``: the run store (:func:`tether.store.spec.open_store`);
    ``workspace``: the agent sets' folder; ``agent_sets``: the agents offered without an agent
    file (``tether acp`` gives the demo's). A bad agent file is a ConfigError, before anything
    is served."""

    found = find_config(config_path)
    config = load_config(found) if found is not None else None
    store = open_store(store_spec)
    if stdin is None or stdout is None:
        stdin, stdout = await _protocol_streams()
    harness = Harness(workspace=workspace, config=config, store=store, stream="auto", agent_sets=agent_sets)
    agent = TetherAgent(harness, Offered(harness))
    # The editor's lines through the same checks as an ACP agent's (tether.acp.transport): a line
    # that is JSON but no JSON-RPC message would otherwise end the connection, and the serving.
    transport = CheckedTransport(stdin, stdout, on_bad=_bad_line, max_consecutive=MAX_BAD_LINES)
    conn = AgentSideConnection(cast(acp.Agent, agent), transport, listening=False)
    listening = asyncio.create_task(conn.listen(), name="acp listen")
    try:
        async with _until_terminated() as terminated:
            await asyncio.wait({listening, terminated}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await agent.close()
        listening.cancel()
        with contextlib.suppress(BaseException):
            await listening
        await conn.close()
        await harness.aclose()
        store.close()  # a database store's sessions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``tether acp``'s options, for the CLI's parser and this module's own."""
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="the agent file whose agents the editor may pick (default $TETHER_CONFIG, else "
                             "./tether.toml; without one, the demo's scripted agents)")
    parser.add_argument("--store", metavar="URL|DIR",
                        help="the run store: a postgresql:// URL or a runs directory (default $TETHER_STORE, else "
                             "$TETHER_HOME/runs)")
    parser.add_argument("--workspace", type=Path, help="the demo agents' folder (default $TETHER_HOME/workspace)")


def main(args: argparse.Namespace, agent_sets: Sequence[AgentSet] = ()) -> int:
    """``tether acp``: serve until the editor lets go; 0, or 2 with one line on stderr for a
    bad agent file or store (stdout is the protocol's alone). ``agent_sets``: as :func:`serve`."""

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="tether acp: %(levelname)s: %(message)s")
    try:
        asyncio.run(serve(getattr(args, "config", None), getattr(args, "store", None),
                          workspace=getattr(args, "workspace", None), agent_sets=agent_sets))
    except (ConfigError, StateError, NotAStream) as exc:
        print(f"tether acp: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _bad_line(count: int, sample: str) -> None:
    log.warning("skipped a line from the client that is not a JSON-RPC message (%d so far): %r", count, sample)


class NotAStream(Exception):
    """The standard input or output is something the protocol cannot be spoken over (a file)."""


def _streamable(fd: int, name: str) -> None:
    """Refuse in words a standard input or output that is not a pipe, socket or terminal:
    asyncio streams only those, and an editor starts ``tether acp`` on pipes."""
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        what = "a regular file" if stat.S_ISREG(mode) else "neither a pipe, a socket nor a terminal"
        through = "cat FILE | tether acp" if name == "input" else "tether acp | tee FILE"
        raise NotAStream(f"its standard {name} is {what}: tether acp speaks the Agent Client Protocol over "
                         f"pipes, as an editor starts it (through a pipe: {through})")


async def _protocol_streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The process's stdin and stdout as the protocol's streams, with stdout kept for the
    protocol alone: file descriptor 1 (and ``sys.stdout``) then point at stderr, so a stray
    print, in Tether or in a tool, cannot corrupt a frame the editor reads."""
    _streamable(0, "input")
    _streamable(1, "output")
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = protocol_out  # type: ignore[assignment]  # what acp.stdio_streams connects to
    try:
        return await acp.stdio_streams(limit=STDIO_LIMIT)
    finally:
        sys.stdout = sys.stderr


@contextlib.asynccontextmanager
async def _until_terminated() -> Any:
    """A future set by SIGTERM or SIGINT (an editor ending us; Ctrl-C in a terminal), so they
    end the serving as the stdin's end does: runs stopped in words, not cut off."""
    loop = asyncio.get_running_loop()
    terminated: asyncio.Future[None] = loop.create_future()
    installed: list[int] = []

    def fire() -> None:
        if not terminated.done():
            terminated.set_result(None)

    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(signum, fire)
            installed.append(signum)
    try:
        yield terminated
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        terminated.cancel()


def _entry_words(entry: Any) -> str:
    if entry.acp:
        return "ACP agent: " + " ".join(entry.acp)
    return f"{entry.model}" + (f" at {entry.base_url}" if entry.base_url else "")


def _refused(words: str) -> RequestError:
    """A request Tether will not do, the words as the error's message (what editors show)."""
    return RequestError(-32602, words)


def _version() -> str:
    try:
        return importlib.metadata.version("tether")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tether.acp.server", description="Tether as an ACP agent, on stdio")
    add_arguments(parser)
    return parser


if __name__ == "__main__":
    sys.exit(main(_parser().parse_args()))
