"""``initialize`` only, for ``tether agents`` and for checking an agent file before any run exists."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tether.acp.client import DEFAULT_INIT_TIMEOUT_S, AcpSession
from tether.acp.events import AgentInfo


async def probe(command: Sequence[str], env: Mapping[str, str] | None = None, *, cwd: Path | None = None,
                timeout_s: float = DEFAULT_INIT_TIMEOUT_S) -> AgentInfo:
    """Start the agent, ``initialize`` it, and end it: its name, version, auth methods and
    capabilities, without creating a session. AgentStartError, in words, for a missing command
    or a program that does not answer ``initialize`` like an ACP agent within ``timeout_s``.
    Without ``cwd`` it runs in an empty temporary folder (a probe must not touch a workspace)."""
    if cwd is not None:
        return await _probe(command, env, cwd, timeout_s)
    with tempfile.TemporaryDirectory(prefix="tether-acp-probe-") as folder:
        return await _probe(command, env, Path(folder), timeout_s)


async def _probe(command: Sequence[str], env: Mapping[str, str] | None, cwd: Path, timeout_s: float) -> AgentInfo:
    async with AcpSession(command, workspace=cwd, env=env, init_timeout_s=timeout_s) as session:
        assert session.info is not None
        return session.info
