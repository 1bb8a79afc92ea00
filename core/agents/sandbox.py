"""An OS sandbox for the processes Tether starts for an agent: they may write only where the
run's work is.

An agent with ``sandbox = "workspace"`` (agent file; ``tether run --sandbox``) has its process,
and every process that process starts (an ACP agent's shell commands and MCP servers), run so
that it can write only:

- the run's workspace;
- its own state folders: the HOME and XDG folders its ``env`` names;
- a private temp folder (its ``TMPDIR``), made for the session and removed after it.

Everything else is read-only. The operating system enforces it, so it holds for an agent that
does its own file I/O (OpenCode, Claude, Codex), where Tether's ``fs/*`` guard sees nothing.

Two kernels' worth of tools do it, and Tether writes neither namespaces nor a sandbox of its
own:

- **bubblewrap** (``bwrap``), where it runs: a mount namespace with ``/`` bound read-only and the
  writable folders bound over it. A write elsewhere fails with "Read-only file system".
- **Landlock**, where bubblewrap does not (no ``bwrap``, or user namespaces refused): the
  launcher restricts the agent's process before it executes, through the ``landlock`` package.
  A write elsewhere fails with "Permission denied".

Neither: a sandboxed agent is refused in words when its agent file is read. A run never goes on
silently unsandboxed. ``TETHER_SANDBOX_BACKEND=bubblewrap|landlock`` picks one (both must work
here); the default is the first that works.

The launcher (``tether.agents.mcp_launcher``) applies the sandbox from :meth:`Sandbox.options`:
it stays outside, as the reaper of everything the agent starts. This module is what a run
decides; the launcher, which starts for every agent and MCP server, imports none of it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

Backend = Literal["bubblewrap", "landlock"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)

BACKEND_ENV = "TETHER_SANDBOX_BACKEND"
"""Picks the backend (``bubblewrap`` or ``landlock``); unset, the first that works here."""

STATE_VARIABLES = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
                   "XDG_RUNTIME_DIR")
"""The variables of an agent's ``env`` that name its own state folders (writable in the sandbox)."""


class SandboxUnavailable(Exception):
    """No sandbox works on this machine; the message says why and what to install."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Where a sandboxed process may write (everything else is read-only), and with which backend."""

    backend: Backend
    writable: tuple[Path, ...]
    tmp: Path
    """The private temp folder (also in ``writable``): the process's ``TMPDIR``."""

    def options(self) -> list[str]:
        """The launcher's options that apply this sandbox."""
        options = ["--sandbox", self.backend]
        for path in self.writable:
            options += ["--write", str(path)]
        return options

    def env(self) -> dict[str, str]:
        """What the sandboxed process's environment gets: its private temp folder."""
        return {"TMPDIR": str(self.tmp)}

    def describe(self) -> dict[str, object]:
        """For the trace: the backend and what it allows."""
        return {"backend": self.backend, "writable": [str(path) for path in self.writable]}

    def remove_tmp(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def for_agent(workspace: Path, *envs: Mapping[str, str], backend: Backend | None = None) -> Sandbox:
    """The sandbox of one agent session (or of a run's MCP servers): the workspace, the state
    folders each of ``envs`` names, and a new private temp folder. The folders are made if
    missing (a mount point or a rule needs one). SandboxUnavailable if no backend works here."""
    chosen = backend or available_backend()
    tmp = Path(tempfile.mkdtemp(prefix="tether-sandbox-")).resolve()
    folders = [Path(workspace).resolve()]
    for env in envs:
        for name in STATE_VARIABLES:
            value = env.get(name)
            if value and os.path.isabs(value):
                folders.append(Path(value).resolve())
    folders.append(tmp)
    writable: list[Path] = []
    try:
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            if folder not in writable:
                writable.append(folder)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SandboxUnavailable(f"the sandbox's folder {exc.filename} cannot be made: {exc.strerror}") from None
    return Sandbox(chosen, tuple(writable), tmp)


def available_backend() -> Backend:
    """The backend a sandbox uses here, or SandboxUnavailable in words."""
    wanted = os.environ.get(BACKEND_ENV, "").strip()
    if wanted and wanted not in BACKENDS:
        raise SandboxUnavailable(f"{BACKEND_ENV}={wanted!r} is not a sandbox: use one of {', '.join(BACKENDS)}")
    problems = _problems()
    if wanted:
        problem = problems[wanted]  # type: ignore[index]
        if problem is not None:
            raise SandboxUnavailable(f"{BACKEND_ENV}={wanted}, but {problem}")
        return wanted  # type: ignore[return-value]
    for name in BACKENDS:
        if problems[name] is None:
            return name
    raise SandboxUnavailable(
        f"no sandbox works on this machine: {problems['bubblewrap']}, and {problems['landlock']}. "
        "Install bubblewrap (apt-get install bubblewrap), or remove sandbox from the agent")


@functools.cache
def _problems() -> dict[str, str | None]:
    """Why each backend does not work here (None: it works). Tried once a process: both are
    properties of the machine, not of a run."""
    return {"bubblewrap": _bubblewrap_problem(), "landlock": _landlock_problem()}


def _bubblewrap_problem() -> str | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        done = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--", "true"],
                              capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not start ({exc})"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap is refused here ({said[-1] if said else f'exit {done.returncode}'})"
    return None


def _landlock_problem() -> str | None:
    try:
        # lazy: optional dependency: the OS sandbox's second backend, where bubblewrap cannot run
        import landlock
    except ImportError:
        return "the landlock package is not installed"
    try:
        abi = landlock.landlock_abi_version()
    except (OSError, landlock.LandlockError) as exc:
        return f"the kernel offers no Landlock ({str(exc).splitlines()[0]})"
    return None if abi >= 1 else "the kernel offers no Landlock"
