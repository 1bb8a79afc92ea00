"""``initialize`` only, for ``tether agents`` and for checking an agent file before any run exists.

The client (and with it the ``acp`` package) is imported when an agent is asked, not before:
``tether agents`` with every answer kept asks none."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tether.acp.events import AgentInfo
from tether.agents.sandbox import Backend, for_agent


async def probe(command: Sequence[str], env: Mapping[str, str] | None = None, *, cwd: Path | None = None,
                timeout_s: float | None = None, sandbox: Backend | None = None) -> AgentInfo:
    """Start the agent, ``initialize`` it, and end it: its name, version, auth methods and
    capabilities, without creating a session. AgentStartError, in words, for a missing command
    or a program that does not answer ``initialize`` like an ACP agent within ``timeout_s``
    (default: a run's, ``DEFAULT_INIT_TIMEOUT_S``); such a program is ended, with everything
    it started. Without ``cwd`` it runs in an empty temporary folder (a probe must not touch a
    workspace). With ``sandbox``, it runs in that OS sandbox, as a sandboxed agent's runs do:
    an agent that cannot start inside it fails here."""
    if cwd is not None:
        return await _probe(command, env, cwd, timeout_s, sandbox)
    with tempfile.TemporaryDirectory(prefix="tether-acp-probe-") as folder:
        return await _probe(command, env, Path(folder), timeout_s, sandbox)


async def _probe(command: Sequence[str], env: Mapping[str, str] | None, cwd: Path,
                 timeout_s: float | None, sandbox: Backend | None) -> AgentInfo:
    # lazy: the acp package (its schema) loads only to ask an agent, not for a kept answer
    # (tests/processes/test_cold_start.py::test_tether_agents_with_every_answer_kept_loads_no_acp_client)
    from tether.acp.client import DEFAULT_INIT_TIMEOUT_S, AcpSession

    box = None if sandbox is None else for_agent(cwd, env or {}, backend=sandbox)
    async with AcpSession(command, workspace=cwd, env=env, sandbox=box,
                          init_timeout_s=DEFAULT_INIT_TIMEOUT_S if timeout_s is None else timeout_s) as session:
        assert session.info is not None
        return session.info
