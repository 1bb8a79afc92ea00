"""The agent process: started so that nothing of it outlives the session, however it ends.

The agent runs under ``tether.agents.mcp_launcher`` (the launcher Tether already uses for MCP servers),
which is the leader of a new process group:
- a SIGKILL of Tether's own process takes the agent down (the launcher's parent-death signal);
- descendants that leave the group (a shell the agent detached) are still reaped (it is their
  subreaper);
- a stop is SIGTERM to the launcher (it forwards, SIGKILLs the agent after ``_KILL_AFTER_S``
  and cleans up every descendant), and if the launcher is not gone soon after, SIGKILL to the
  whole group.

stderr is drained all the time into a bounded tail: an agent that logs a lot must never block
on a full pipe, and a dead agent is reported with the last lines it wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from tether.acp.errors import AgentStartError
from tether.agents.sandbox import Sandbox

# asyncio's default StreamReader limit is 64 KiB; Qwen Code's first frame is ~570 KB. The acp
# transport copes with longer lines in pieces, but one readuntil per frame is cheaper.
STREAM_LIMIT = 64 * 1024 * 1024
_STDERR_TAIL_BYTES = 16 * 1024
_LAUNCHER_GRACE_S = 0.3  # the launcher's SIGTERM-to-SIGKILL grace for the agent's descendants
_KILL_AFTER_S = 0.3  # the launcher SIGKILLs an agent that ignores its SIGTERM this long
_STOP_WAIT_S = 3.0  # then the whole group gets SIGKILL
_REAP_POLL_S = 0.05  # how often reap looks for the launcher's exit


class StderrTail:
    """The last ``limit`` bytes an agent wrote to stderr, drained by a task of its own."""

    def __init__(self, limit: int = _STDERR_TAIL_BYTES) -> None:
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._limit = limit

    def feed(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        while self._size > self._limit and len(self._chunks) > 1:
            self._size -= len(self._chunks.popleft())

    def text(self, max_chars: int = 2000) -> str:
        text = b"".join(self._chunks).decode("utf-8", "replace")
        return text[-max_chars:].strip()

    async def drain(self, stream: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await stream.read(65536):
                self.feed(chunk)


def resolve_command(command: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The command with its program found on the agent's PATH, or AgentStartError in words."""
    if not command:
        raise AgentStartError("the agent's command is empty")
    program = command[0]
    found = shutil.which(program, path=env.get("PATH"))
    if found is None:
        where = "" if os.sep in program else " on PATH"
        raise AgentStartError(f"the agent's command {program!r} was not found{where}")
    return [found, *command[1:]]


def agent_environment(env: Mapping[str, str] | None) -> dict[str, str]:
    """The ``acp`` package's trimmed environment (HOME, PATH, …) plus what the caller passes:
    an agent does not see Tether's secrets unless its agent file names them."""
    # lazy: importing acp loads its whole schema, and tether agents resolves commands with its answers kept (test_cold_start)
    from acp.transports import default_environment

    merged = default_environment()
    merged.update(env or {})
    return merged


async def spawn(command: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None,
                sandbox: Sandbox | None = None) -> asyncio.subprocess.Process:
    """Start ``command`` under the launcher, in a new process group, with pipes on all three;
    in ``sandbox`` if one is given (the launcher applies it and stays outside it)."""
    full_env = agent_environment(env)
    argv = resolve_command(command, full_env)
    if sandbox is not None:
        full_env.update(sandbox.env())
    launcher = [sys.executable, "-m", "tether.agents.mcp_launcher", "--grace", str(_LAUNCHER_GRACE_S),
                "--kill-after", str(_KILL_AFTER_S), "--parent", str(os.getpid()),
                *(sandbox.options() if sandbox is not None else ()), "--", *argv]
    if not cwd.is_dir():
        raise AgentStartError(f"the agent's workspace {cwd} is not a folder")
    try:
        return await asyncio.create_subprocess_exec(
            *launcher, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=str(cwd), env=full_env, start_new_session=True,
            limit=STREAM_LIMIT,
        )
    except OSError as exc:
        raise AgentStartError(f"cannot start the agent {argv[0]!r}: {exc.strerror or exc}") from None


async def stop(proc: asyncio.subprocess.Process, *, eof_wait_s: float = 0.0) -> int | None:
    """End the agent and its group; return its exit status. Safe to call more than once, and
    finishes the job even if the caller is cancelled meanwhile (it is shielded)."""
    return await asyncio.shield(_stop(proc, eof_wait_s))


async def _stop(proc: asyncio.subprocess.Process, eof_wait_s: float) -> int | None:
    if proc.returncode is not None:
        return proc.returncode  # reaped already, and its group killed then (``reap``)
    if proc.stdin is not None and not proc.stdin.is_closing():
        with contextlib.suppress(OSError, RuntimeError):
            proc.stdin.close()
    if eof_wait_s > 0:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), eof_wait_s)
    if proc.returncode is None:
        _signal(proc.pid, signal.SIGTERM)  # the launcher: forward, kill-after, clean up descendants
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), _STOP_WAIT_S)
    if proc.returncode is None:
        _signal_group(proc.pid, signal.SIGKILL)
    return await reap(proc)


async def reap(proc: asyncio.subprocess.Process) -> int | None:
    """Wait for the launcher to end, then SIGKILL whatever is left of its group: right after
    the leader is reaped, its group id cannot have been reused.

    The end is the launcher's exit, not its pipes': asyncio's ``Process.wait()`` (before
    Python 3.12) also waits for stdout and stderr to close, and a process left in the group
    holds them open. Waiting for them before the group is killed would wait on that process
    for as long as it lives."""
    while proc.returncode is None:  # set as soon as the launcher is reaped, pipes open or not
        await asyncio.sleep(_REAP_POLL_S)
    code = proc.returncode
    _signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(asyncio.TimeoutError):  # a process that left the group keeps them: not waited for
        await asyncio.wait_for(proc.wait(), _STOP_WAIT_S)
    return code


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
