"""``tether agents --check``: a doctor for each ACP agent of the agent file, all side by side.

For each it says, one line a problem, each with its fix:
- **not installed**: its command is not found;
- **wrong version**: an agent ``tether agents add`` knows, installed at another version than its pin;
- **no auth / offline**: a key variable its ``env`` names is not set; its model endpoint (the
  variable that points it at one) does not answer; ``session/new`` answers ``auth_required``;
- **initialize failure**: it did not answer ``initialize`` as an ACP agent, in the agent's words.
And what works: its version, how long ``initialize`` took, and its features (``loadSession``,
the session methods, fs). The probe's session is opened in a temporary folder and closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tether.agents.install import KNOWN, installed_version

__all__ = ["Finding", "check_agents"]


@dataclass
class Finding:
    """What the doctor found for one agent: ``problems`` as (kind, words), empty when it works."""

    name: str
    problems: list[tuple[str, str]] = field(default_factory=list)
    agent: str | None = None
    version: str | None = None
    initialize_ms: float | None = None
    features: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": not self.problems,
                "problems": [{"kind": k, "text": t} for k, t in self.problems], "agent": self.agent,
                "version": self.version, "initialize_ms": self.initialize_ms, "features": self.features}


def _known(name: str, argv: list[str]) -> Any:
    """The known agent an entry runs: by its entry's name, else by the package its command is in."""
    if name in KNOWN:
        return KNOWN[name]
    return next((k for k in KNOWN.values() if f"/node_modules/{k.package}/" in argv[0] + "/"), None)


def _prefix(command: str) -> Path | None:
    parts = Path(command).parts
    if "node_modules" not in parts:
        return None
    return Path(*parts[:parts.index("node_modules")])


async def _reachable(url: str, timeout_s: float) -> str | None:
    """None when something listens at ``url``'s host and port, else why not."""
    where = urlsplit(url)
    port = where.port or (443 if where.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(where.hostname, port), timeout_s)
    except (OSError, asyncio.TimeoutError) as exc:
        return str(exc) or type(exc).__name__
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


async def _check_one(config: Any, name: str, timeout_s: float) -> Finding:
    from tether.acp.client import AcpSession
    from tether.acp.errors import AcpError
    from tether.agents.agent import AgentError

    found = Finding(name)
    entry = config.data.agents[name]
    argv = list(entry.acp or [])
    known = _known(name, argv)
    fix_install = f"tether agents add {known.name}" if known else f"install it, or fix agents.{name}.acp"
    try:
        agent = config.agent(name)
    except Exception as exc:  # noqa: BLE001 - the file's own words, whatever the cause
        found.problems.append(("not installed", f"{exc}; fix: {fix_install}"))
        return found
    assert agent.acp is not None
    if known is not None and (prefix := _prefix(agent.acp.argv[0])) is not None:
        have = installed_version(prefix, known.package)
        if have is not None and have != known.version:
            found.problems.append(("wrong version", f"{known.package} {have} is installed, Tether pins "
                                   f"{known.version}; fix: remove [agents.{name}], then tether agents add {known.name}"))
    try:
        env, _ = agent.acp.resolved_env()
    except AgentError as exc:
        found.problems.append(("no auth", f"{exc}; fix: export it, then check again"))
        return found
    url = env.get(known.base_url_env) if known is not None and known.base_url_env else None
    if url and (why := await _reachable(url, min(timeout_s, 3.0))) is not None:
        found.problems.append(("offline", f"its model endpoint {url} does not answer ({why}); fix: start it, or "
                               f"point {known.base_url_env} at one that runs"))
    with tempfile.TemporaryDirectory(prefix="tether-check-") as folder:
        session = AcpSession(agent.acp.argv, workspace=Path(folder), env=env, init_timeout_s=timeout_s,
                             fs=agent.acp.fs)
        started = time.perf_counter()
        try:
            info = await session.start()
            found.initialize_ms = round((time.perf_counter() - started) * 1000, 1)
            found.agent, found.version = info.name, info.version
            caps = info.capabilities.get("sessionCapabilities") or {}
            found.features = (["loadSession"] if info.load_session else []) + \
                [f"session/{k}" for k in ("list", "resume", "close", "fork") if k in caps] + \
                (["fs"] if agent.acp.fs else [])
            try:
                await asyncio.wait_for(session.new_session(), timeout_s)
            except AcpError as exc:
                words = str(exc)
                if "auth" in words.lower():
                    methods = ", ".join(info.auth_methods) or "none listed"
                    found.problems.append(("no auth", f"it needs a login (session/new: {words}); its auth methods: "
                                           f"{methods}; fix: log in with the agent's own command, or set its key"))
                else:
                    found.problems.append(("initialize failure", f"session/new failed: {words}"))
            except asyncio.TimeoutError:
                found.problems.append(("initialize failure", f"session/new did not answer within {timeout_s:g} s"))
        except AcpError as exc:
            found.problems.append(("initialize failure", f"{exc}; fix: {fix_install}, or fix agents.{name}.acp"))
        finally:
            await session.close()
    return found


async def check_agents(config: Any, timeout_s: float = 30.0) -> list[Finding]:
    """Every ACP agent of the agent file, checked side by side, in the file's order."""
    names = [name for name, entry in config.data.agents.items() if entry.acp is not None]
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(_check_one(config, name, timeout_s)) for name in names]
    return [task.result() for task in tasks]
