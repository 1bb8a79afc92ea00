"""``tether agents --check``: a doctor for each ACP agent of the agent file, all side by side.

For each it says, one line a problem, each with its fix:
- **not installed**: its command is not found;
- **wrong version**: an agent ``tether agents add`` knows, installed at another version than its pin;
- **no auth / offline**: a key variable its ``env`` names is not set; its model endpoint (the
  variable that points it at one) does not answer; ``session/new`` answers ``auth_required``;
- **initialize failure**: it did not answer ``initialize`` as an ACP agent, in the agent's words;
- **sandbox**: it asks for ``sandbox = "workspace"`` and no sandbox works here, or the agent
  does not start inside one (the probe runs in the sandbox the run would have);
- **model**: the agent file's ``model`` is not one the agent offers (its config options);
- **shell sandbox**: a Codex entry and no ``bwrap`` on the agent's PATH: Codex's own shell
  sandbox runs each command in bubblewrap, and without it every shell command fails (exit 101).
And what works: its version, how long ``initialize`` took, and its features (``loadSession``,
the session methods, fs, the sandbox it ran in, each endpoint that answered, what usage it
reports where Tether knows the agent). Every base URL its ``env`` sets (a variable named
``…BASE_URL``, ``…_ENDPOINT`` or ``…API_BASE``, or ``…URL`` with an http(s) value) must answer
a TCP connect. The probe's session is opened in a temporary folder and closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tether.acp.errors import AcpError
from tether.agents.install import KNOWN, installed_version
from tether.agents import sandbox
from tether.agents.agent import AgentError

if TYPE_CHECKING:
    from tether.acp.client import AcpSession

__all__ = ["Finding", "check_agents", "endpoints_of"]

USAGE = {
    "claude": "usage: usage_update with cost",
    "opencode": "usage: usage_update with cost",
    "codex": "usage: usage_update without cost (priced by Tether)",
    "qwen": "usage: tokens in _meta.usage (priced by Tether)",
    "gemini": "usage: _meta.quota at a turn's end only",
}
"""What each known agent reports of its usage (docs/acp.md, "What a budget is worth"): ACP has
no capability for it, so a probe without a turn cannot ask."""


def endpoints_of(env: dict[str, str]) -> list[tuple[str, str]]:
    """The model endpoints an agent's environment points it at: (variable, URL)."""
    found = []
    for name, value in env.items():
        upper = name.upper()
        url = value.strip()
        if not url.lower().startswith(("http://", "https://")):
            continue
        if upper.endswith(("BASE_URL", "_ENDPOINT", "API_BASE", "_URL")):
            found.append((name, url))
    return found


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


def _session(argv: Any, folder: Path, env: dict[str, str], timeout_s: float, **options: Any) -> AcpSession:
    """The probe's session with the agent, in ``folder`` (not started)."""
    # lazy: tether agents imports the doctor and, its answers kept, loads no acp schema (test_cold_start)
    from tether.acp.client import AcpSession

    return AcpSession(argv, workspace=folder, env=env, init_timeout_s=timeout_s, **options)


async def _starts(argv: Any, env: dict[str, str], folder: Path, timeout_s: float) -> bool:
    """Whether the agent answers ``initialize`` outside any sandbox."""
    session = _session(argv, folder, env, timeout_s)
    try:
        await session.start()
        return True
    except AcpError:
        return False
    finally:
        await session.close()


async def _check_one(config: Any, name: str, timeout_s: float) -> Finding:
    found = Finding(name)
    entry = config.data.agents[name]
    argv = list(entry.acp or [])
    known = _known(name, argv)
    fix_install = f"tether agents add {known.name}" if known else f"install it, or fix agents.{name}.acp"
    try:
        agent = config.agent(name)
    except Exception as exc:  # noqa: BLE001 - the file's own words, whatever the cause
        if f"agents.{name}.sandbox:" in str(exc):
            found.problems.append(("sandbox", f"{exc}; fix: install what it names, or set sandbox = \"none\""))
        else:
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
    if known is not None and known.name == "codex" and \
            shutil.which("bwrap", path=env.get("PATH", os.environ.get("PATH"))) is None:
        found.problems.append(("shell sandbox", "bwrap is not on PATH: Codex's own shell sandbox needs it, every "
                               "shell command of Codex fails (exit 101) without it; fix: install bubblewrap"))
    answered = []
    for variable, url in endpoints_of(env):
        if (why := await _reachable(url, min(timeout_s, 3.0))) is not None:
            found.problems.append(("offline", f"its model endpoint {url} does not answer ({why}); fix: "
                                   f"start it, or point {variable} at one that runs"))
        else:
            answered.append(f"endpoint {urlsplit(url).netloc} answers")
    with tempfile.TemporaryDirectory(prefix="tether-check-") as folder:
        box = None
        if agent.sandbox == "workspace":
            try:
                box = await asyncio.to_thread(sandbox.for_agent, Path(folder), env)
            except sandbox.SandboxUnavailable as exc:
                found.problems.append(("sandbox", f"{exc}; fix: install what it names, or set sandbox = \"none\""))
                return found
        session = _session(agent.acp.argv, Path(folder), env, timeout_s, fs=agent.acp.fs, sandbox=box,
                           model=agent.acp.model)
        started = time.perf_counter()
        try:
            info = await session.start()
            found.initialize_ms = round((time.perf_counter() - started) * 1000, 1)
            found.agent, found.version = info.name, info.version
            caps = info.capabilities.get("sessionCapabilities") or {}
            found.features = (["loadSession"] if info.load_session else []) + \
                [f"session/{k}" for k in ("list", "resume", "close", "fork") if k in caps] + \
                (["fs"] if agent.acp.fs else []) + ([f"sandbox {box.backend}"] if box is not None else []) + \
                answered + ([USAGE[known.name]] if known is not None and known.name in USAGE else [])
            try:
                await asyncio.wait_for(session.new_session(), timeout_s)
            except AcpError as exc:
                words = str(exc)
                if "does not offer the model" in words:
                    found.problems.append(("model", f"{words}; fix: set model to one of them"))
                elif "auth" in words.lower():
                    methods = ", ".join(info.auth_methods) or "none listed"
                    found.problems.append(("no auth", f"it needs a login (session/new: {words}); its auth methods: "
                                           f"{methods}; fix: log in with the agent's own command, or set its key"))
                else:
                    found.problems.append(("initialize failure", f"session/new failed: {words}"))
            except asyncio.TimeoutError:
                found.problems.append(("initialize failure", f"session/new did not answer within {timeout_s:g} s"))
        except AcpError as exc:
            if box is not None and await _starts(agent.acp.argv, env, Path(folder), timeout_s):
                found.problems.append(("sandbox", f"it does not start inside its {box.backend} sandbox ({exc}), and "
                                       "does without one; fix: let it write the folders it needs (its HOME and "
                                       "state folders in env), or set sandbox = \"none\""))
            else:
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
