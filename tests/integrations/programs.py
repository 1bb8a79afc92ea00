"""What the integrations' tests share: the scripted provider over HTTP on loopback, recording
every request it is sent; a program of another framework's in a process of its own; and the
``tether`` verbs run from other processes, as an operator would.

Every wait is on something that happens (a line the program prints, a process's exit, a
request the provider receives), under a generous cap that fails the test; nothing asserts on
timing.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tether.demo.provider import create_app

ROOT = Path(__file__).resolve().parents[2]
CAP_S = 60.0


class Recording:
    """The scripted provider's app, keeping the body of every chat-completions request."""

    def __init__(self) -> None:
        self.app = create_app()
        self.bodies: list[dict[str, Any]] = []
        self.url = ""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.bodies.append(json.loads(body))
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def tool_messages(self, index: int) -> list[str]:
        """The tool messages' contents in the ``index``-th request."""
        return [str(m.get("content")) for m in self.bodies[index]["messages"] if m.get("role") == "tool"]


def environment(*paths: Path, **extra: str) -> dict[str, str]:
    """The environment of a process of the tests: this checkout and ``paths`` importable, no
    trace export to OpenAI."""
    path = os.pathsep.join(filter(None, [str(ROOT), *map(str, paths), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "OPENAI_AGENTS_DISABLE_TRACING": "1", **extra}


async def program(code: str, cwd: Path, **env: str) -> asyncio.subprocess.Process:
    """``python -c CODE`` in ``cwd`` (where the program's module is), its output piped."""
    return await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=cwd, env=environment(cwd, **env),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def line_with(proc: asyncio.subprocess.Process, word: str) -> str:
    """The first line the process prints that holds ``word`` (it fails the test when the
    process ends first, with what it said on stderr)."""
    async def read() -> str:
        assert proc.stdout is not None
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                err = await proc.stderr.read() if proc.stderr is not None else b""
                pytest.fail(f"the program ended without saying {word!r}:\n{err.decode()[-3000:]}")
            if word in line:
                return line.strip()

    return await asyncio.wait_for(read(), CAP_S)


async def tether(*args: str) -> tuple[int, str]:
    """``python -m tether.tui.cli ARGS``, another process: its exit code and what it said."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", *args, env=environment(),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), CAP_S)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, out.decode()


async def finished(proc: asyncio.subprocess.Process) -> tuple[int, str]:
    """The program's exit code and the rest of its output (stdout, then stderr)."""
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CAP_S)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, out.decode() + err.decode()


async def waiting(runs: Path, run_id: str) -> None:
    """Until the run's saved state says it waits for a decision (the program says so a moment
    before it saves it)."""
    from tether.vocab.state import NeedsApproval
    from tether.store.files.store import RunStore

    async def saved() -> None:
        store = RunStore(runs)
        while not isinstance(store.load(run_id).interruption, NeedsApproval):
            await asyncio.sleep(0.01)

    await asyncio.wait_for(saved(), CAP_S)
