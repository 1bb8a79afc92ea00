"""The catalog of a run's MCP tools: :func:`mcp_tools` starts every server, names their tools
(prefixed by the server where names collide, refused where two would be offered to the
model under one name), and stops every server however the block is left.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tether.agents.mcp.link import _Link
from tether.agents.mcp.server import MCPServer, MCPStartError
from tether.agents.mcp.tool import MCPTool
from tether.agents.sandbox import Sandbox
from tether.agents.tools.base import Tool, offered_name

if TYPE_CHECKING:
    from mcp_types import Tool as ListedTool

log = logging.getLogger("tether.agents.mcp")

STOP_WAIT_S = 15.0
"""How long leaving :func:`mcp_tools` waits for the servers to stop before it cancels their
supervisors (the SDK's own shutdown is bounded at about 6 s; the launcher makes it far less)."""

PREFIX_SEPARATOR = "."
"""Between a server's name and its tool's when names collide (``time.get_current_time``): the
name the trace, the console and the approvals show. The model is offered the name rewritten by
:func:`~tether.agents.tools.base.offered_name` (``time__get_current_time``), since OpenAI's API and
others accept only ``[A-Za-z0-9_-]{1,64}`` in function names."""



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
                    stderr_dir: Path | None = None, sandbox: Sandbox | None = None) -> AsyncIterator[list[Tool]]:
    """Start every server (concurrently), list its tools, yield them as :class:`MCPTool` s;
    stop every server on exit, however the block exits (exception, cancellation).

    ``reserved``: the names of the agent's other tools (an MCP tool with one of them is
    prefixed by its server). ``stderr_dir``: where each server's stderr goes
    (``mcp-<name>.stderr.log``, appended to); by default a temporary folder removed on exit.
    Raises :class:`MCPStartError` (after stopping the others) if a server fails to start.
    ``sandbox``: the OS sandbox every stdio server runs in (its temp folder is removed on exit).
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
    links = [_Link(s, folder / f"mcp-{s.name}.stderr.log" if s.command is not None else None, sandbox)
             for s in servers]
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
            if sandbox is not None:
                sandbox.remove_tmp()


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
