"""``tether agents``: every agent of the agent file (its MCP servers started to list their
tools, an ACP agent asked what it is), then the demo's.

The agents are asked side by side, and each is printed as soon as it has answered: an agent
that does not answer holds up neither the others' starts nor their lines, and is said so
after ``--timeout``. An ACP agent's answer is kept until its program changes
(:mod:`tether.acp.probe_cache`), so a second listing starts no agent."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from typing import Any

from tether.tui.cli import context
from tether.acp import AcpError
from tether.acp.probe_cache import ProbeCache, probe_kept
from tether.agents.agent import AgentError
from tether.agents.mcp.server import MCPStartError
from tether.agents.sandbox import SandboxUnavailable, available_backend
from tether.demo import agents as demo
from tether.tui.cli.agents_doctor import add_or_check
from tether.vocab.text import clean
from tether.vocab.wording import one_line


async def agents(args: argparse.Namespace) -> int:
    """Every agent in the agent file (its MCP servers started to list their tools), then the demo."""
    if args.action == "sessions":
        return await _sessions(args)
    if args.action == "add" or args.check:
        return await add_or_check(args)
    config = context.config(args)
    rows: list[dict[str, Any]] = []
    if config is not None:
        async with asyncio.TaskGroup() as group:  # Ctrl+C: every probe is cancelled and its agent ended
            described = [group.create_task(_describe(agent, "config", args)) for agent in config.agents().values()]
            if not args.json:
                await _print_as_they_answer(described)
        rows = [task.result() for task in described]
    demo_tools = [{"name": t.name, "source": t.source, "ref": t.ref, "read_only": t.read_only,
                   "needs_approval": t.needs_approval, "idempotent": t.idempotent} for t in demo.tools()]
    for name, description in demo.scenarios().items():
        rows.append({"name": name, "set": "demo", "model": name, "base_url": None, "config": None,
                     "description": description, "tools": demo_tools, "mcp": []})
    if args.json:
        print(json.dumps(rows))
        return 0
    asked = [row for row in rows if "acp" in row]
    kept = sum(1 for row in asked if row["acp"].get("cached"))
    if kept:
        print(f"{kept} of {len(asked)} ACP agents answered from an earlier listing (kept until their program "
              "changes; --refresh asks them again)")
    names = [r["name"] for r in rows if r["set"] == "demo"]
    print(clean("demo (the scripted provider): " + ", ".join(names)))
    print(clean("  tools: " + ", ".join(f"{t['name']} ({_policy_words(t)})" for t in demo_tools)))
    if config is None:
        print("no agent file: write ./tether.toml (or give --config FILE) to add your own agents")
    return 0


async def _print_as_they_answer(described: list[asyncio.Task[dict[str, Any]]]) -> None:
    """Print each agent once it is described, in the file's order among those ready together
    (flushed: a reader through a pipe sees the quick ones while a slow one is still asked)."""
    pending = set(described)
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in described:
            if task in done:
                _print_row(task.result())
        sys.stdout.flush()


def _print_row(row: dict[str, Any]) -> None:
    if "acp" in row:
        acp = row["acp"]
        print(clean(f"{row['name']}  ACP agent: {' '.join(acp['command'])}  ({row['config']})"))
        if acp.get("error"):
            print(clean(f"  {acp['error']}"))
            return
        caps = ", ".join(sorted(k for k, v in acp["capabilities"].items() if v)) or "none"
        print(clean(f"  {acp['agent']} {acp['version']}; auth: {', '.join(acp['auth_methods']) or 'none'}; "
                    f"loads sessions: {'yes' if acp['load_session'] else 'no'}; capabilities: {caps}"))
        print(clean(f"  {_sandbox_words(row)}"))
        return
    where = row["base_url"] or "the embedded scripted provider"
    print(clean(f"{row['name']}  {row['model']} at {where}  ({row['config']})"))
    if row.get("isolation"):
        print(clean(f"  {_isolation_words(row['isolation'])}"))
    for tool in row["tools"]:
        print(clean(f"  {tool['name']:<28} {tool['source']:<20} {_policy_words(tool)}"))
    for server in row["mcp"]:
        if server.get("error"):
            print(clean(f"  [mcp {server['name']}] {server['error']}"))
    if row["mcp"]:
        print(clean(f"  {_sandbox_words(row)}"))


def _sandbox_words(row: dict[str, Any]) -> str:
    box = row.get("sandbox")
    if box is None:
        return "sandbox: none (it can write wherever its user can)"
    if box.get("error"):
        return f"sandbox: {box['error']}"
    return f"sandbox: {box['backend']}, works here: it started in it" if row.get("acp") else \
        f"sandbox: {box['backend']} (its MCP servers write only its workspace)"


def _isolation_words(isolation: dict[str, Any]) -> str:
    """How each run of the agent gets its own workspace (docs/workspaces.md)."""
    words = ("each run in a worktree of its own on tether/RUN_ID, from " + (isolation["base"] or "HEAD")
             if isolation["kind"] == "worktree" else "each run in a copy of its folder")
    if isolation["setup"]:
        words += "; setup: " + "; ".join(isolation["setup"])
    if isolation["checks"]:
        words += "; checks: " + "; ".join(isolation["checks"])
    return words


def _policy_words(tool: dict[str, Any]) -> str:
    words = ["read-only" if tool["read_only"] else "writes"]
    if tool["needs_approval"]:
        words.append("needs approval")
    if tool.get("idempotent"):
        words.append("idempotent")
    return ", ".join(words)


async def _describe(agent: Any, kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """An agent as ``tether agents`` shows it, its MCP servers' tools listed by starting them."""
    if agent.acp is not None:
        return await _describe_acp(agent, kind, args)
    tools = agent.describe_tools()
    servers: list[dict[str, Any]] = []
    if agent.mcp_servers:
        # lazy: the mcp package (half a second of imports) only for an agent that has MCP servers;
        # tests/processes/test_cold_start.py holds tether agents without one to none of it
        from tether.agents.mcp.catalog import mcp_tools

        for server in agent.mcp_servers:
            try:
                async with mcp_tools([server], reserved=[t["name"] for t in tools]) as listed:
                    for tool in listed:
                        auto = tool.name in agent.policies.auto_approve
                        tools.append({"name": tool.name, "source": tool.source, "ref": None,
                                      "read_only": tool.read_only, "needs_approval": tool.needs_approval and not auto,
                                      "idempotent": tool.idempotent})
                servers.append({"name": server.name})
            except (MCPStartError, AgentError) as exc:
                servers.append({"name": server.name, "error": str(exc).splitlines()[0]})
    return {"name": agent.name, "set": kind, "model": agent.model, "base_url": agent.base_url,
            "config": str(agent.config) if agent.config else None, "tools": tools, "mcp": servers,
            "sandbox": await asyncio.to_thread(_sandbox_of, agent),  # may try bwrap once: off the loop
            "isolation": None if agent.isolation.kind == "none" else agent.isolation.spec()}


async def _sessions(args: argparse.Namespace) -> int:
    """``tether agents sessions NAME``: the sessions the ACP agent NAME lists in its workspace
    (``session/list``), each one a ``tether run --session ID`` goes on in, and the modes and
    models a run of it may choose (``--mode``, ``--model``)."""


    config = context.config(args)
    if config is None or not args.agent_name:
        print("tether agents sessions: name an ACP agent of the agent file (./tether.toml, --config FILE)")
        return 2
    agent = config.agent(args.agent_name)
    if agent.acp is None:
        print(clean(f"tether agents sessions: agent {agent.name} is not an ACP agent: it keeps no sessions of its own"))
        return 2
    # lazy: the acp package (its schema) loads only to ask an agent: a listing whose answers are kept needs
    # none (tests/processes/test_cold_start.py::test_tether_agents_with_every_answer_kept_loads_no_acp_client)
    from tether.acp.offer import agent_offer, session_words

    try:
        offer = await agent_offer(agent)
    except (AcpError, AgentError) as exc:
        print(clean(f"tether agents sessions: {config.path}: agents.{agent.name}: {exc}"))
        return 1
    if args.json:
        print(json.dumps(asdict(offer)))
        return 0 if offer.lists else 1
    if not offer.lists:
        print(clean(f"{agent.name} ({offer.agent}) does not advertise session/list: it lists no sessions to go on in"))
        return 1
    how = f"a run goes on in one by {offer.adopts}" if offer.adopts else \
        "it can go on in none of them (it advertises neither session/resume nor loadSession)"
    print(clean(f"{agent.name} ({offer.agent}) in {offer.workspace}: {len(offer.sessions)} session(s); {how}"))
    for listed in offer.sessions:
        print(clean(f"  {listed.get('sessionId')}  {session_words(listed, offer.workspace)}"))
    if offer.sessions and offer.adopts:
        print(clean(f"tether run --agent {agent.name} --session ID --prompt TEXT goes on in session ID"))
    if offer.modes:
        print(clean(f"modes (--mode): {', '.join(m['id'] for m in offer.modes)} (a new session's: {offer.mode})"))
    if offer.models:
        print(clean(f"models (--model): {', '.join(v for v, _ in offer.models)} (a new session's: {offer.model})"))
    if offer.problem:
        print(clean(f"its modes and models are not known: {offer.problem}"))
    return 0


def _sandbox_of(agent: Any) -> dict[str, Any] | None:
    """The OS sandbox an agent's processes would run in here, or why there is none."""
    if agent.sandbox is None:
        return None

    try:
        return {"backend": available_backend()}
    except SandboxUnavailable as exc:
        return {"error": str(exc)}


async def _describe_acp(agent: Any, kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """An ACP agent as ``tether agents`` shows it: what its ``initialize`` says (name, version,
    auth methods, capabilities), without a session, or kept from an earlier listing; one that
    does not answer, or answers wrong, says why in one line naming its key in the agent file."""

    row: dict[str, Any] = {"name": agent.name, "set": kind, "model": agent.model, "base_url": None,
                           "config": str(agent.config) if agent.config else None, "tools": [], "mcp": [],
                           "acp": {"command": list(agent.acp.argv)}}
    where = f"{agent.config}: agents.{agent.name}.acp" if agent.config else f"agent {agent.name}: acp"
    box = row["sandbox"] = await asyncio.to_thread(_sandbox_of, agent)  # may try bwrap once: off the loop
    if box is not None and box.get("error"):
        row["acp"]["error"] = f"{where}: its sandbox: {box['error']}"
        return row
    try:
        env, _ = agent.acp.resolved_env()
        info, cached = await probe_kept(agent.acp.argv, env, written_env=agent.acp.env, cache=ProbeCache(),
                                        refresh=args.refresh, timeout_s=args.timeout,
                                        sandbox=None if box is None else box["backend"])
    except (AcpError, AgentError) as exc:
        inside = f" (in its {box['backend']} sandbox)" if box is not None else ""
        row["acp"]["error"] = f"{where}{inside}: {one_line(exc, 400)}"
        return row
    except Exception as exc:  # an agent is another program: whatever it does, the other agents are listed
        row["acp"]["error"] = f"{where}: asking it failed: {type(exc).__name__}: {one_line(exc, 300)}"
        return row
    row["acp"].update(agent=info.name, version=info.version, auth_methods=list(info.auth_methods),
                      load_session=info.load_session, capabilities=info.capabilities, cached=cached)
    return row


COMMANDS = {"agents": agents}
