"""What the browser tests (and ``make bench``'s web lines) start beside the browser: a real
``tether serve`` process on a free loopback port with users on a temp store, a scripted
provider that records what the model is sent, and a webhook receiver on loopback. Each one
is stopped by whoever started it; :func:`descendants` lets a test check nothing is left."""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn

from tether.models.processes import free_port
from tether.demo.provider.app import create_app
from tests.support import cli_here

CAP_S = 60.0  # how long a test waits for a condition before it fails
PASSWORDS = {"ana": "green tea at dawn", "bob": "seven blue kites", "walt": "quiet river stones"}
CHROMIUM = Path(os.environ.get("TETHER_CHROMIUM", "/usr/bin/chromium"))


def until(condition: Callable[[], Any], what: str, cap_s: float = CAP_S) -> Any:
    """Wait for ``condition()`` to be truthy and return it (a generous cap fails the test)."""
    deadline = time.monotonic() + cap_s
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        time.sleep(0.02)


def descendants(pid: int | None = None) -> list[tuple[int, str]]:
    """Every living process below ``pid`` (default: this one), with its command line."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if stat[0] == "Z":  # a zombie has ended; its parent reaps it
                continue
            parents[int(entry.name)] = int(stat[1])
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    root = os.getpid() if pid is None else pid
    found = []
    for child in parents:
        up = parents.get(child)
        while up is not None and up != root and up > 1:
            up = parents.get(up)
        if up == root:
            found.append((child, commands[child]))
    return found


def _thread_server(app: Any) -> tuple[uvicorn.Server, threading.Thread, str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                                            interface="asgi3"))
    thread = threading.Thread(target=server.run, name="scripted provider", daemon=True)
    thread.start()
    until(lambda: server.started, "the scripted provider listening")
    return server, thread, f"http://127.0.0.1:{port}"


class RecordingProvider:
    """The scripted provider on a loopback port, in a thread, keeping every request's messages
    (what the model reads)."""

    def __init__(self) -> None:
        self.requests: list[list[dict[str, Any]]] = []
        self._app = create_app()
        self._server, self._thread, self.url = _thread_server(self._record)

    async def _record(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self._app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            self.requests.append(json.loads(body).get("messages", []))
        except ValueError:
            pass
        replayed = False

        async def again() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, again, send)

    def said(self, words: str) -> bool:
        """Whether any request sent the model these words."""
        return any(words in json.dumps(messages) for messages in self.requests)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(CAP_S)


class WebhookReceiver:
    """A webhook endpoint on loopback that keeps every JSON body it is sent, and when (the
    wall clock, as a run's trace has it)."""

    def __init__(self) -> None:
        self.bodies: list[tuple[float, dict[str, Any]]] = []
        received = self.bodies

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                size = int(self.headers.get("Content-Length") or 0)
                received.append((time.time(), json.loads(self.rfile.read(size) or b"{}")))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook receiver", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(CAP_S)


def tether_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TETHER_STORE", "TETHER_CONFIG", "TETHER_HOME")}
    env["TETHER_HOME"] = str(home)
    return env


class Served:
    """``tether serve`` as a real process on a free loopback port, over a temp file store,
    with the users of :data:`PASSWORDS` (``walt`` a watcher) added the way an operator does
    (``tether serve --add-user NAME``, the password on stdin), by the CLI's own ``main``."""

    def __init__(self, tmp: Path, provider_url: str, *, config: Path | None = None) -> None:
        self.tmp = tmp
        self.runs = tmp / "runs"
        self.ws = tmp / "ws"
        self.provider_url = provider_url
        self.config = config
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = tether_env(tmp / "home")
        self.runs_started: list[subprocess.Popen[bytes]] = []
        for name, password in PASSWORDS.items():  # in this process: tests/web/test_serve_command.py starts one
            extra = ["--read-only"] if name == "walt" else []
            done = cli_here("serve", "--add-user", name, *extra, "--store", str(self.runs), stdin=password,
                            env=self.env, cwd=tmp)
            assert done.returncode == 0, done.stderr
        self.log = tmp / "serve.log"
        args = ["serve", "--port", str(self.port), "--store", str(self.runs), "--public-url", self.url]
        if config is not None:
            args += ["--config", str(config)]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(self.command(*args), stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env, cwd=tmp)
        until(lambda: "Ctrl-C stops" in self.output() or self.process.poll() is not None, "tether serve listening")
        assert self.process.poll() is None, self.output()

    @staticmethod
    def command(*args: str) -> list[str]:
        return [sys.executable, "-m", "tether.tui.cli", *args]

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def run(self, scenario: str, run_id: str, *extra: str) -> subprocess.Popen[bytes]:
        """``tether run SCENARIO`` in a process of its own, on the same store, against the
        recording provider (its summary on stdout with ``--json``)."""
        args = ["run", scenario, "--run-id", run_id, "--base-url", f"{self.provider_url}/v1", "--store", str(self.runs),
                "--workspace", str(self.ws), "--json", *extra]
        if self.config is not None:
            args += ["--config", str(self.config)]
        proc = subprocess.Popen(self.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.env, cwd=self.tmp)
        self.runs_started.append(proc)
        return proc

    def tether_here(self, *args: str) -> tuple[int, str, str]:
        """``tether ARGS`` on this server's home and folder, in this process (no start-up)."""
        done = cli_here(*args, env=self.env, cwd=self.tmp)
        return done.returncode, done.stdout, done.stderr

    def tether(self, *args: str) -> tuple[int, str, str]:
        done = subprocess.run(self.command(*args), capture_output=True, env=self.env, cwd=self.tmp, timeout=CAP_S)
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    def stop(self) -> None:
        """SIGTERM, as a service manager stops it; it must end on its own, its consoles too."""
        for proc in self.runs_started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(CAP_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(f"tether serve did not end on SIGTERM:\n{self.output()}") from None
        left = [command for _, command in descendants(self.process.pid)]
        assert not left, f"tether serve left processes behind: {left}"


def alive(proc: subprocess.Popen[bytes]) -> None:
    """Fails the test at once, with the run's words, when its process has already ended."""
    if proc.poll() is not None:
        out, err = proc.communicate()
        raise AssertionError(f"the run ended with {proc.returncode}: {out.decode()} {err.decode()}")


def finished(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    """A ``tether run --json`` process's summary, once it has ended (a generous cap)."""
    out, err = proc.communicate(timeout=CAP_S)
    try:
        return {"code": proc.returncode, **json.loads(out)}
    except ValueError:
        raise AssertionError(f"tether run ended with {proc.returncode}: {err.decode()}") from None


OFFLINE = re.compile(r"^(?!https?://(127\.0\.0\.1|localhost)[:/])")  # every request but loopback's


def block_the_network(context: Any) -> None:
    """No request leaves the machine (the console's page names web fonts): it is refused at once."""
    context.route(OFFLINE, lambda route: route.abort())


# The xterm.js terminal of the console's page draws on a canvas, so the DOM holds no text. This
# catches each Terminal as the page makes it (the first object given an _addonManager that also
# has a _core), so a test can read its buffer, line by line, as the operator sees it.
XTERM_HOOK = """
(() => {
  Object.defineProperty(Object.prototype, '_addonManager', {
    configurable: true,
    set(value) {
      Object.defineProperty(this, '_addonManager', {value, writable: true, configurable: true});
      if (this._core) (window.__terminals = window.__terminals || []).push(this);
    },
  });
  window.__screen = () => {
    const term = (window.__terminals || [])[0];
    if (!term) return '';
    const lines = [];
    for (let i = 0; i < term.rows; i++) {
      const line = term.buffer.active.getLine(i);
      lines.push(line ? line.translateToString(true) : '');
    }
    return lines.join('\\n');
  };
})();
"""


def log_in(page: Any, base: str, name: str, password: str | None = None) -> None:
    """Through the login form, as a person does."""
    page.goto(f"{base}/login")
    page.get_by_test_id("login-name").fill(name)
    page.get_by_test_id("login-password").fill(PASSWORDS[name] if password is None else password)
    page.get_by_test_id("login-submit").click()
