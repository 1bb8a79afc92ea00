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
import time
from collections.abc import Mapping
from dataclasses import dataclass

from tether.vocab.cancel import CancelSignal, RunCancelled
from tether.workspaces.git import clean_env

OUTPUT_KEPT = 16_000
_READ = 65_536


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


async def run_setup(command: str, cwd: str, *, signal_: CancelSignal, env: Mapping[str, str]) -> SetupResult:
    """Run ``command`` in ``cwd`` until it ends, or until ``signal_`` fires (then
    :class:`RunCancelled` is raised). Either way its process group is killed after it: nothing
    it started outlives it. ``env`` is added to the environment."""
    started = time.perf_counter()
    try:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", command, cwd=cwd, env=clean_env(env), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return SetupResult(command, None, exc.strerror or str(exc), (time.perf_counter() - started) * 1000)
    kept = bytearray()
    cut = False

    async def read() -> None:
        nonlocal cut
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(_READ):
            kept.extend(chunk)
            if len(kept) > 2 * OUTPUT_KEPT:  # bounded, however much it prints
                del kept[:len(kept) - OUTPUT_KEPT]
                cut = True

    reader = asyncio.ensure_future(read())
    try:
        await signal_.guard(proc.wait())
    finally:
        # Whatever it left running goes with it (a daemon started with &), and its output ends.
        _kill_group(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            await asyncio.shield(proc.wait())
        await asyncio.shield(reader)
    text = kept.decode("utf-8", "replace")
    if len(text) > OUTPUT_KEPT:
        text, cut = text[-OUTPUT_KEPT:], True
    if cut:
        text = "[the start of the output is left out]\n" + text
    return SetupResult(command, proc.returncode, text, (time.perf_counter() - started) * 1000)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
