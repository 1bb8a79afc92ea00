"""``tether agents``: every agent of the agent file (its MCP servers started to list their
tools, an ACP agent asked what it is), then the demo's."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tether.tui.cli import context


async def agents(args: argparse.Namespace) -> int:
    """Every agent in the agent file (its MCP servers started to list their tools), then the demo."""
    from tether.demo import agents as demo
    from tether.text import clean

    config = context.config(args)
    rows: list[dict[str, Any]] = []
    if config is not None:
        for name, agent in config.agents().items():
            rows.append(await _describe(agent, "config"))
    demo_tools = [{"name": t.name, "source": t.source, "ref": t.ref, "read_only": t.read_only,
                   "needs_approval": t.needs_approval, "idempotent": t.idempotent} for t in demo.tools()]
    for name, description in demo.scenarios().items():
        rows.append({"name": name, "set": "demo", "model": name, "base_url": None, "config": None,
                     "description": description, "tools": demo_tools, "mcp": []})
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows:
        if row["set"] == "demo":
            continue
        if "acp" in row:
            acp = row["acp"]
            print(clean(f"{row['name']}  ACP agent: {' '.join(acp['command'])}  ({row['config']})"))
            if acp.get("error"):
                print(clean(f"  {acp['error']}"))
                continue
            caps = ", ".join(sorted(k for k, v in acp["capabilities"].items() if v)) or "none"
            print(clean(f"  {acp['agent']} {acp['version']}; auth: {', '.join(acp['auth_methods']) or 'none'}; "
                        f"loads sessions: {'yes' if acp['load_session'] else 'no'}; capabilities: {caps}"))
            continue
        where = row["base_url"] or "the embedded scripted provider"
        print(clean(f"{row['name']}  {row['model']} at {where}  ({row['config']})"))
        if row.get("isolation"):
            print(clean(f"  {_isolation_words(row['isolation'])}"))
        for tool in row["tools"]:
            print(clean(f"  {tool['name']:<28} {tool['source']:<20} {_policy_words(tool)}"))
        for server in row["mcp"]:
            if server.get("error"):
                print(clean(f"  [mcp {server['name']}] {server['error']}"))
    names = [r["name"] for r in rows if r["set"] == "demo"]
    print(clean("demo (the scripted provider): " + ", ".join(names)))
    print(clean("  tools: " + ", ".join(f"{t['name']} ({_policy_words(t)})" for t in demo_tools)))
    if config is None:
        print("no agent file: write ./tether.toml (or give --config FILE) to add your own agents")
    return 0


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


async def _describe(agent: Any, kind: str) -> dict[str, Any]:
    """An agent as ``tether agents`` shows it, its MCP servers' tools listed by starting them."""
    from tether.agents.agent import AgentError

    if agent.acp is not None:
        return await _describe_acp(agent, kind)
    tools = agent.describe_tools()
    servers: list[dict[str, Any]] = []
    if agent.mcp_servers:
        from tether.agents.mcp.catalog import mcp_tools
        from tether.agents.mcp.server import MCPStartError

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
            "isolation": None if agent.isolation.kind == "none" else agent.isolation.spec()}


async def _describe_acp(agent: Any, kind: str) -> dict[str, Any]:
    """An ACP agent as ``tether agents`` shows it: what its ``initialize`` says (name, version,
    auth methods, capabilities), without a session; one that does not answer says why."""
    from tether.acp import AcpError, probe
    from tether.agents.agent import AgentError

    row: dict[str, Any] = {"name": agent.name, "set": kind, "model": agent.model, "base_url": None,
                           "config": str(agent.config) if agent.config else None, "tools": [], "mcp": [],
                           "acp": {"command": list(agent.acp.argv)}}
    try:
        env, _ = agent.acp.resolved_env()
        info = await probe(agent.acp.argv, env)
    except (AcpError, AgentError) as exc:
        row["acp"]["error"] = str(exc)
        return row
    row["acp"].update(agent=info.name, version=info.version, auth_methods=list(info.auth_methods),
                      load_session=info.load_session, capabilities=info.capabilities)
    return row


COMMANDS = {"agents": agents}
