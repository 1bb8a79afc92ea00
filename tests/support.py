"""Helpers the test modules share (fixtures live in conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import html
import io
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from textual import events, on
from textual.pilot import Pilot
from textual.widgets import Input

from tether.demo.agents import DEMO
from tether.models.base import ModelReply
from tether.vocab.state import NeedsApproval, RunState, StateError
from tether.store.files.layout import JOURNAL_FILE, TRACE_FILE
from tether.store.files.lock import lock_held, owner_record
from tether.store.files.store import RunStore
from tether.harness import Harness
from tether.tui.app import TetherApp
from tether.tui.state.options import ConsoleOptions
from tether.tui.screens.console import Shown

REPO = Path(__file__).resolve().parents[1]
CAP_S = 30.0  # how long a console test waits for a condition before it fails


def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> str:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"


def load_all(store: RunStore) -> tuple[list[RunState], dict[str, str]]:
    """Every readable run of a file store, oldest first, each replayed from its journal (not
    the index), and the reason each unreadable one was skipped."""
    states, problems = [], {}
    for run_id in store.run_ids():
        try:
            states.append(store.load(run_id))
        except StateError as exc:
            problems[run_id] = str(exc)
    states.sort(key=lambda s: s.created_at)
    return states, problems


def crashing(at: str, *args: str) -> subprocess.CompletedProcess:
    """``tether ARGS``, armed by the crash campaign's shim to exit hard at boundary ``at``
    (``name:k`` or ``k``; see tests/campaign/shim.py)."""
    return subprocess.run([sys.executable, "-m", "tests.campaign.shim", *args], capture_output=True, text=True,
                          env={**os.environ, "TETHER_CRASH_AT": at}, timeout=120, cwd=REPO)


class StillConsole(TetherApp):
    """The console as snapshot tests and the README's pictures need it: nothing on screen
    depends on the clock, the user or the host (no durations or times of day, decisions
    recorded as ``operator``, text cursors that do not blink). It also keeps the ``Shown``
    messages the app posts, as ``(what, run id)``, for tests of what reached the screen."""

    def __init__(self, options: ConsoleOptions, *, harness: Harness | None = None) -> None:
        super().__init__(options, harness=harness)
        self.shown: list[tuple[str, str]] = []

    def on_shown(self, message: Shown) -> None:
        self.shown.append((message.what, message.run_id))

    @on(events.DescendantFocus)
    def _still_cursor(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, Input):
            event.widget.cursor_blink = False


def still_console(*, harness: Harness | None = None, **options: Any) -> StillConsole:
    """A still console with these :class:`ConsoleOptions` (no timings, decisions by ``operator``,
    the demo's scenarios offered, as ``tether console`` gives them, unless given)."""
    options.setdefault("timings", False)
    options.setdefault("agent_sets", (DEMO,))
    options.setdefault("operator", "operator")
    return StillConsole(ConsoleOptions(**options), harness=harness)


# from tests/processes/test_mcp.py
SERVERS = Path(__file__).with_name("mcp_servers.py")


# from tests/processes/test_mcp.py
def processes_with(token: str) -> dict[int, str]:
    """Live processes (not zombies) whose environment carries MCP_TEST_TOKEN=token: pid -> command line."""
    marker = f"MCP_TEST_TOKEN={token}".encode()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in environ and stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] != b"Z":
            found[int(entry)] = cmdline
    return found


# from tests/processes/test_streaming.py
WORDS = ["The ", "archive ", "holds ", "1200 ", "entries."]


# from tests/processes/test_streaming.py
class SlowStream:
    """Streams WORDS one at a time, each after ``gate`` is released (or a pause); records
    whether the client went away before the end."""

    def __init__(self, *, hold_after: int | None = None) -> None:
        self.hold_after = hold_after
        self.sent: list[str] = []
        self.closed_early = asyncio.Event()
        self.release = asyncio.Event()

    def app(self) -> Starlette:
        async def completions(request: Request) -> StreamingResponse:
            async def events():
                try:
                    yield chunk({"role": "assistant"})
                    for i, word in enumerate(WORDS):
                        if self.hold_after is not None and i == self.hold_after:
                            await self.release.wait()  # held mid-stream until the test says so
                        await asyncio.sleep(0.01)
                        self.sent.append(word)
                        yield chunk({"content": word})
                    yield chunk({}, "stop")
                    yield chunk({}, None, {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55})
                    yield "data: [DONE]\n\n"
                except (asyncio.CancelledError, GeneratorExit):
                    self.closed_early.set()
                    raise
            return StreamingResponse(events(), media_type="text/event-stream")
        return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


# from tests/processes/test_store_contract.py
TABLES = ("runs", "messages", "trace", "ledger", "owners", "control", "rules", "decisions")


# from tests/processes/test_store_contract.py
def place(tmp_path: Path) -> list[str]:
    """The CLI options that keep a test's runs and workspace in its own folder."""
    return ["--runs-dir", str(tmp_path / "runs"), "--workspace", str(tmp_path / "ws")]


def takes_requests(runs: Path, run_id: str, *, waits: bool = False) -> bool:
    """Whether a live process holds the run and takes requests for it: in its tool (its trace
    says so) or, with ``waits``, waiting for a decision. Its owner record is written as the run
    is opened, a little before the process takes requests, and a Stop or a decision sent in
    between is answered "no longer runs here" and takes the full path."""
    run_dir = runs / run_id
    if not (lock_held(run_dir / JOURNAL_FILE) and (owner_record(run_dir) or {}).get("control")):
        return False
    if waits:
        return isinstance(RunStore(runs).load(run_id).interruption, NeedsApproval)
    trace = run_dir / TRACE_FILE
    return trace.exists() and b'"tool_start"' in trace.read_bytes()


def wait_until(predicate: Any, what: str, timeout_s: float = 20.0) -> None:
    """Poll a condition (a server ends a dead session's backend on its own schedule)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.01)


# from tests/processes/test_pg_restart.py
TURNS = 12


# from tests/console/test_console_pg.py
def shown(app: TetherApp) -> str:
    """Everything on screen now, as text (the screenshot's SVG holds the rendered lines), and
    every notification's words."""
    words = [f"{n.title}: {n.message}" for n in app._notifications]
    return html.unescape(app.export_screenshot()).replace("\xa0", " ") + "\n".join(words)


# from tests/console/test_console_store.py
async def ended(proc: asyncio.subprocess.Process) -> tuple[int, str]:
    """:func:`exited`, with the output of both streams together."""
    code, out, err = await exited(proc)
    return code, out + err


async def exited(proc: asyncio.subprocess.Process, cap_s: float = CAP_S) -> tuple[int, str, str]:
    """A process's exit code, stdout and stderr, waiting ``cap_s`` at most (then it is killed)."""
    async with reaped(proc):
        out, err = await asyncio.wait_for(proc.communicate(), cap_s)
    return proc.returncode or 0, out.decode(), err.decode()


@contextlib.asynccontextmanager
async def reaped(proc: asyncio.subprocess.Process) -> AsyncIterator[asyncio.subprocess.Process]:
    """``proc``, killed and waited for on the way out if it has not exited by then."""
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


# from tests/console/test_console_store.py
def notices(app: TetherApp) -> list[str]:
    """What the app notified, in words (title and message)."""
    said: list[str] = []
    notify = app.notify

    def recording(message: str, *args: Any, title: str = "", **kw: Any) -> None:
        said.append(f"{title}: {message}")
        notify(message, *args, title=title, **kw)

    app.notify = recording  # type: ignore[method-assign]
    return said


# from tests/console/test_console_store.py
def header(app: TetherApp) -> str:
    return str(getattr(app.console_screen.query_one("#run-header"), "_tether_last", ""))


# from tests/console/test_console_store.py
def children_of(pid: int) -> list[str]:
    """The processes whose parent is ``pid`` (what the console left behind), but the
    PostgreSQL server the test session started (tests/pg.py), which outlives every test."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue
        fields = tail.split()
        if int(fields[1]) == pid and fields[0] != "Z" and head.split("(", 1)[-1] != "postgres":
            out.append(entry)
    return out


# from tests/console/test_tui.py
SIZE = (160, 45)


# from tests/console/test_tui.py
async def wait_for(pilot: Pilot[Any], predicate: Callable[[], bool], what: str, cap: float = CAP_S) -> None:
    # Each look also lays out and paints the screen if anything changed (Pilot.pause), so a
    # short interval spends the test's CPU on repaints nobody reads; the app runs meanwhile.
    deadline = time.monotonic() + cap
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {cap:g} s waiting for {what}")
        await pilot.pause(0.05)


# from tests/console/test_tui.py
def make_app(tmp_path: Path, **kw: Any) -> TetherApp:
    return still_console(runs_dir=tmp_path / "runs", workspace=tmp_path / "workspace", **kw)


# from tests/console/test_tui.py
def transcript(app: TetherApp) -> str:
    return app.transcript_view.text


# from tests/console/test_tui.py
async def settle(pilot: Pilot[Any], app: TetherApp, what: str = "the runs to stop") -> None:
    """Wait until no run is being driven and the views have caught up."""
    await wait_for(pilot, lambda: not app.active, what)
    await pilot.pause()
    app.show_events()
    await pilot.pause()


# from tests/console/test_tui.py
async def finish(pilot: Pilot[Any], app: TetherApp) -> None:
    """Every worker stopped at the end of a test."""
    await app.stop_all()
    await app.workers.wait_for_complete()
    assert not app.active
    assert all(w.is_finished for w in app.workers)


# from tests/console/test_tui.py
async def open_armed(pilot: Pilot[Any], app: TetherApp, key: str, kind: type) -> Any:
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(app.screen, kind), f"the {kind.__name__}")
    dialog = app.screen
    await wait_for(pilot, lambda: dialog.armed, "the dialog's grace period to end")
    return dialog


# from tests/processes/test_wheel.py
TERMINAL_CAP_S = 120.0  # the cap on any one wait on a terminal; none is timed
ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_].*?\x1b\\|\x1b[@-Z\\-_]")


class Terminal:
    """A process on a pseudo-terminal of a given size; what it writes is kept, and read
    as text with the terminal's escape sequences taken out."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], size: tuple[int, int]) -> None:
        self.master, slave = os.openpty()
        columns, lines = size
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                                     start_new_session=True)  # its own group: the finally kills all of it
        os.close(slave)
        self.output = b""

    def text(self) -> str:
        return ESCAPES.sub(b"", self.output).decode("utf-8", "replace")

    def _read(self, wait_s: float) -> bool:
        """Read what there is within ``wait_s``; False once the terminal is closed."""
        ready, _, _ = select.select([self.master], [], [], wait_s)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every process holding the terminal has exited
            return False
        self.output += data
        return bool(data)

    def wait_for(self, pattern: str, what: str) -> None:
        deadline = time.monotonic() + TERMINAL_CAP_S
        while not re.search(pattern, self.text()):
            if time.monotonic() > deadline or not self._read(0.2):
                pytest.fail(f"no {what} on the terminal (exit code {self.proc.poll()}); it shows:\n{self.text()[-3000:]}")

    def send(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def wait_exit(self) -> int:
        """Keep reading (a full terminal would block the process) until it exits."""
        deadline = time.monotonic() + TERMINAL_CAP_S
        while self.proc.poll() is None and time.monotonic() < deadline:
            if not self._read(0.1):
                break
        return self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        os.close(self.master)


# ---- the CLI in this process ---------------------------------------------------------------

_ONE_CLI_AT_A_TIME = threading.Lock()


def cli_here(*args: str, env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
             stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``tether ARGS`` by the CLI's own ``main`` in this process, as a child process would run
    it (``env``, if given, its whole environment; ``cwd`` its folder; ``stdin`` what a pipe
    would give it, not a terminal): the exit code, stdout and stderr, as
    :func:`subprocess.run` gives them. The same parser, store and words,
    without a process start-up (imports, a second or more each on a loaded machine). A test
    that drives a real ``tether`` process from another one stays real where the test is about
    processes; this is for the commands that ask or decide beside it. Not for the commands
    that take signals or the terminal (watch, worker, acp, console, demo, notify).
    One call at a time: the environment, the folder and the standard streams are the
    process's."""
    from tether.tui import cli

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # from a coroutine, blocking it as subprocess.run would: main's own loop needs another thread
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(cli_here, *args, env=env, cwd=cwd, stdin=stdin).result()
    with _ONE_CLI_AT_A_TIME:
        saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
        out, err = io.StringIO(), io.StringIO()
        try:
            if env is not None:
                os.environ.clear()
                os.environ.update(env)
            if cwd is not None:
                os.chdir(cwd)
            sys.stdin = io.StringIO(stdin)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = cli.main(list(args))
                except SystemExit as exc:  # argparse's own refusals (and --help)
                    code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        finally:
            sys.stdin = saved_stdin
            os.chdir(saved_cwd)
            if env is not None:
                os.environ.clear()
                os.environ.update(saved_env)
    return subprocess.CompletedProcess(["tether", *args], code, out.getvalue(), err.getvalue())


def environ_now() -> dict[str, str]:
    """A copy of this process's environment, never taken while :func:`cli_here` has swapped
    it for a command's own (on another thread)."""
    with _ONE_CLI_AT_A_TIME:
        return dict(os.environ)


async def cli_here_async(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """:func:`cli_here` from a test's event loop: in a thread, so the loop (and the processes
    it watches) goes on meanwhile."""
    return await asyncio.to_thread(cli_here, *args, **kw)


# from tests/unit/test_mcp_names.py
class Scripted:
    """A ChatModel that records what it is sent and answers from a list of replies."""

    def __init__(self, *replies: list[tuple[str, dict]] | str) -> None:
        self.replies = list(replies)
        self.requests: list[tuple[list[str], list[dict]]] = []

    def new_transcript(self) -> None:
        return None

    async def complete(self, model, messages, tools, **kw) -> ModelReply:
        self.requests.append(([t["function"]["name"] for t in tools or ()], json.loads(json.dumps(messages))))
        reply = self.replies.pop(0)
        if isinstance(reply, str):
            return ModelReply(content=reply, tool_calls=[], finish_reason="stop", prompt_tokens=10,
                              completion_tokens=2, usage_estimated=False, provider_ms=0.0)
        calls = [{"id": f"c{len(self.requests)}_{i}", "type": "function",
                  "function": {"name": name, "arguments": json.dumps(args)}} for i, (name, args) in enumerate(reply)]
        return ModelReply(content=None, tool_calls=calls, finish_reason="tool_calls", prompt_tokens=10,
                          completion_tokens=2, usage_estimated=False, provider_ms=0.0)

    async def aclose(self) -> None:
        pass


# from tests/unit/test_workspaces.py and tests/processes/test_workspaces_cli.py
def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo``, its output; the test's own reads write nothing (no optional locks)."""
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    return done.stdout


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Tether's home for the test (``TETHER_HOME``): the CLI's workspaces are in ``home/workspaces``."""
    home = tmp_path / "home"
    monkeypatch.setenv("TETHER_HOME", str(home))
    return home
