"""Worker processes for the tests, the worker campaign and the scale bench.

:class:`Fleet` starts ``tether worker`` processes (``python -m tether.tui.cli worker``), each
logging to a file of its own, and stops every one of them however the caller ends: SIGTERM
and a wait, then SIGKILL. :func:`clean_slate` empties Tether's and DBOS's tables between
tests (the server is the session's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import children

REPO = Path(__file__).resolve().parents[1]
STOP_WAIT_S = 20.0
TETHER_TABLES = ("runs", "messages", "trace", "ledger", "owners", "control", "rules", "decisions")
# DBOS's per-workflow tables (not its migrations, versions or queues): no FK ties them to
# workflow_status, so each is emptied.
DBOS_TABLES = ("workflow_status", "operation_outputs", "notifications", "workflow_events",
               "workflow_events_history", "streams", "workflow_input", "workflow_output")


def clean_slate(url: str) -> None:
    """No runs, no workflows, no workers: each test starts from an empty queue."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [f"tether.{t}" for t in TETHER_TABLES]
        for table in ("tether.workers", "tether.recoveries"):
            if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None:
                tables.append(table)
        if conn.execute("SELECT to_regclass('tether.runs')").fetchone()[0] is not None:
            conn.execute("TRUNCATE " + ", ".join(tables))
        dbos = [t for t in DBOS_TABLES if conn.execute("SELECT to_regclass(%s)", (f"dbos.{t}",)).fetchone()[0]]
        if dbos:
            conn.execute("TRUNCATE " + ", ".join(f"dbos.{t}" for t in dbos) + " CASCADE")


def wait_for(predicate: Callable[[], Any], what: str, timeout_s: float = 60.0, every_s: float = 0.05) -> Any:
    """Poll until ``predicate()`` is truthy (a generous cap fails the test, it is no timing claim)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what}")
        time.sleep(every_s)


class Worker:
    def __init__(self, process: subprocess.Popen, log: Path) -> None:
        self.process = process
        self.log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    @property
    def executor_id(self) -> str | None:
        for line in self.text().splitlines():
            if line.startswith("worker w-") and " (pid " in line:
                return line.split()[1]
        return None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


class Fleet:
    """Worker processes on one store, all stopped on exit."""

    def __init__(self, url: str, root: Path, *, env: dict[str, str] | None = None, here: bool = False) -> None:
        self.url = url
        self.root = root
        self.env = env or {}
        self.here = here  # the one-shot commands (submit, runs, approve...) by the CLI's main in this process
        self.workers: list[Worker] = []
        root.mkdir(parents=True, exist_ok=True)

    def environment(self, extra: dict[str, str] | None = None, *, pythonpath: list[str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "TETHER_", "DBOS"))}
        env.update(TETHER_HOME=str(self.root / "home"), **self.env, **(extra or {}))
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *(pythonpath or [])])
        return env

    def start(self, *args: str, pythonpath: list[str] | None = None, env: dict[str, str] | None = None,
              ready: bool = True) -> Worker:
        """``tether worker --store URL ARGS``; with ``ready``, returns once it listens."""
        log = self.root / f"worker-{len(self.workers)}.log"
        self.root.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            # The URL (and its password) in the environment, not in argv, where ps shows it.
            # Forked to die with this process: a test run killed outright leaves no worker.
            process = children.launch([sys.executable, "-m", "tether.tui.cli", "worker", *args],
                                      stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      env=self.environment({"TETHER_STORE": self.url, **(env or {})},
                                                           pythonpath=pythonpath), cwd=self.root,
                                      preexec_fn=children.dying_with_parent(signal.SIGKILL))
        worker = Worker(process, log)
        self.workers.append(worker)
        if ready:
            wait_for(lambda: worker.executor_id or process.poll() is not None, "the worker to start")
            if process.poll() is not None:
                raise AssertionError(f"the worker exited {process.returncode}:\n{worker.text()[-3000:]}")
        return worker

    def tether(self, *args: str, pythonpath: list[str] | None = None, timeout: float = 120,
               real: bool = False) -> subprocess.CompletedProcess:
        """``tether ARGS`` in the fleet's folder and environment: a process, or, for a fleet made
        ``here`` (and neither ``real`` nor with a ``pythonpath`` of its own), the CLI's main in
        this process (tests/support.py, cli_here)."""
        env = self.environment(pythonpath=pythonpath)
        if self.here and not real and not pythonpath:
            from tests.support import cli_here

            return cli_here(*args, env=env, cwd=self.root)
        return subprocess.run([sys.executable, "-m", "tether.tui.cli", *args], capture_output=True, text=True,
                              env=env, cwd=self.root, timeout=timeout)

    def submit(self, agent: str, *args: str, pythonpath: list[str] | None = None, real: bool = False) -> str:
        done = self.tether("submit", "--agent", agent, "--store", self.url, "--json", *args, pythonpath=pythonpath,
                           real=real)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["run_id"]

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        leftover = [w.pid for w in self.workers if _alive(w.pid)]
        assert not leftover, f"worker processes left running: {leftover}"

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _alive(pid: int) -> bool:
    """Still a process (not a zombie awaiting its parent's wait)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except OSError:
        return False
