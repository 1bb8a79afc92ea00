"""A workspace's setup commands (``setup = ["cmd", ...]``), run in it before the agent starts.

Each is a shell command line (``/bin/sh -c``), run in the agent's folder of the workspace, in
a process group of its own, with its output and errors together. A Stop ends it: its whole
group is killed, and the run stops as any Stop stops it. Its output is kept whole up to
:data:`OUTPUT_KEPT` characters, then its end only (where a failure says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass

from tether.vocab.cancel import CancelSignal, RunCancelled
from tether.workspaces.git import clean_env

OUTPUT_KEPT = 16_000
_PIPE_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class SetupResult:
    command: str
    exit_code: int | None
    """None: it could not be started (``output`` says why)."""
    output: str
    ms: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def words(self) -> str:
        """Why it failed, in one sentence (the end of its output)."""
        said = self.output.strip().splitlines()[-1:] if self.output.strip() else []
        how = "could not start" if self.exit_code is None else f"exited with {self.exit_code}"
        return f"the setup command {self.command!r} {how}" + (f": {said[0]}" if said else "")


class _Output(asyncio.SubprocessProtocol):
    """A setup command's output, kept as it comes and bounded, and its exit, known as soon as
    the shell ends. asyncio's ``Process.wait()`` (before Python 3.12) also waits for the
    output pipe to close, which a daemon the command started with ``&`` holds open for as long
    as it lives: the run would wait on it, and nothing would kill it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.kept = bytearray()
        self.cut = False
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.kept.extend(data)
        if len(self.kept) > 2 * OUTPUT_KEPT:  # bounded, however much it prints
            del self.kept[:len(self.kept) - OUTPUT_KEPT]
            self.cut = True

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def run_setup(command: str, cwd: str, *, signal_: CancelSignal, env: Mapping[str, str]) -> SetupResult:
    """Run ``command`` in ``cwd`` until it ends, or until ``signal_`` fires (then
    :class:`RunCancelled` is raised). Either way its process group is killed after it: nothing
    it started outlives it. ``env`` is added to the environment."""
    started = time.perf_counter()
    loop = asyncio.get_running_loop()
    try:
        transport, output = await loop.subprocess_exec(
            lambda: _Output(loop), "/bin/sh", "-c", command, cwd=cwd, env=clean_env(env),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return SetupResult(command, None, exc.strerror or str(exc), (time.perf_counter() - started) * 1000)
    pid = transport.get_pid()
    try:
        await signal_.guard(asyncio.shield(output.exited))
    finally:
        # Whatever it left running goes with it (a daemon started with &), and its output ends.
        _kill_group(pid)
        try:
            # The pipe closes once the group is gone; a process that left the group (setsid)
            # keeps it open, and is not waited for beyond the grace.
            await asyncio.wait({output.exited, output.closed}, timeout=_PIPE_GRACE_S)
        finally:
            transport.close()
    code = transport.get_returncode()
    text = output.kept.decode("utf-8", "replace")
    cut = output.cut
    if len(text) > OUTPUT_KEPT:
        text, cut = text[-OUTPUT_KEPT:], True
    if cut:
        text = "[the start of the output is left out]\n" + text
    return SetupResult(command, code, text, (time.perf_counter() - started) * 1000)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
