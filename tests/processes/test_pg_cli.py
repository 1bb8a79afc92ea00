"""Every run command on a PostgreSQL store (``--store URL`` or ``TETHER_STORE``) against a real
server (tests/pg.py). What a user sees: the same words as on the file store, the password
nowhere, a bad URL refused in one line. The runs that are killed or watched, and one of each
kind of command (a run, a watch, a resume, a refusal), are real ``tether`` processes; the
commands beside them run by the CLI's main in the test's process (tests/support.py, cli_here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


from tether.store.postgres.store import PgStore
from tests.support import cli_here

CAP_S = 60.0


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "TETHER_STORE"}
    return {**out, "TETHER_HOME": str(tmp_path / "home"), **extra}


def tether(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``tether ARGS``, a real process."""
    return subprocess.run([sys.executable, "-m", "tether.tui.cli", *args], capture_output=True, text=True,
                          timeout=CAP_S, env=env(tmp_path, **extra), cwd=tmp_path)


def here(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``tether ARGS`` by the CLI's main in this process, with the same environment and folder."""
    return cli_here(*args, env=env(tmp_path, **extra), cwd=tmp_path)


def test_run_runs_show_trace_and_watch_on_postgresql(pg: PgStore, pg_server, tmp_path: Path):
    url, password = pg_server.url, pg_server.operator_password
    ran = tether(tmp_path, "run", "plan", "--run-id", "p1", "--json", "--store", url)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["status"] == "completed"
    assert not (tmp_path / "home" / "runs").exists()  # nothing went to the file store
    waiting = here(tmp_path, "run", "destructive", "--run-id", "d1", TETHER_STORE=url)
    assert waiting.returncode == 5 and "tether approve|reject d1" in waiting.stdout

    listed = here(tmp_path, "runs", TETHER_STORE=url)  # the variable alone
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("p1") and "completed" in lines[0]
    assert lines[1].startswith("d1") and "waits for approval of delete_file" in lines[1]
    rows = json.loads(here(tmp_path, "runs", "--json", "--store", url).stdout)
    assert [r["tool_runs"] for r in rows][0] == [{"name": "list_files", "args": {}},
                                                {"name": "read_file", "args": {"path": "errors.log"}}]

    shown = here(tmp_path, "show", "p1", "--store", url)
    assert shown.returncode == 0 and "status=completed" in shown.stdout and "tools=2" in shown.stdout
    assert "[assistant → read_file]" in shown.stdout
    trace = here(tmp_path, "trace", "p1", "--store", url)
    records = [json.loads(line) for line in trace.stdout.splitlines()]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert records[0]["kind"] == "run_started" and records[-1]["kind"] == "run_stopped"
    watched = tether(tmp_path, "watch", "p1", "--store", url)
    assert watched.returncode == 0 and "run_stopped" in watched.stdout and "completed" in watched.stdout

    decided = here(tmp_path, "approve", "d1", "--store", url)
    assert decided.returncode == 0 and "status=completed" in decided.stdout
    for out in (ran, waiting, listed, shown, trace, watched, decided):
        assert password not in out.stdout + out.stderr


def test_watch_follows_a_run_of_another_process_on_postgresql(pg: PgStore, pg_server, tmp_path: Path):
    url = pg_server.url
    run = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "slow", "--run-id", "s", "--store", url],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(tmp_path), cwd=tmp_path)
    try:
        from tests.support import wait_until

        wait_until(lambda: pg.exists("s"), "the run is made")
        watched = tether(tmp_path, "watch", "s", "--store", url)
    finally:
        out, err = run.communicate(timeout=CAP_S)
    assert run.returncode == 0, err
    assert watched.returncode == 0, watched.stderr
    assert "tool_progress" in watched.stdout and "scanned 1200 of 1200" in watched.stdout
    assert watched.stdout.splitlines()[-1].split()[2] == "run_stopped"


def test_a_bad_store_is_refused_in_one_line_without_the_password(pg_server, tmp_path: Path):
    password = pg_server.operator_password
    wrong = pg_server.url.replace(password, "not-" + password)
    for args in (("runs", "--store", wrong), ("run", "plan", "--store", wrong),
                 ("stop", "x", "--store", wrong), ("show", "x", "--store", "postgresql://tether:hunter2@127.0.0.1:1/t"),
                 ("watch", "--all", "--store", wrong),
                 ("runs", "--store", "mysql://root:hunter2@db/x"),
                 ("runs", "--store", pg_server.url, "--runs-dir", str(tmp_path))):
        done = (tether if args[0] == "run" else here)(tmp_path, *args)  # one in a real process
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("tether: error: ") and done.stderr.count("\n") == 1, done.stderr
        assert password not in done.stderr and "hunter2" not in done.stderr and "Traceback" not in done.stderr


def test_export_otel_reads_the_trace_through_the_store(pg: PgStore, pg_server, tmp_path: Path):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tether.observe.otel.replay import export_run

    assert here(tmp_path, "run", "research", "--run-id", "r1", "--store", pg_server.url).returncode == 0
    exporter = InMemorySpanExporter()
    count = export_run(pg, "r1", exporter)
    names = [s.name for s in exporter.get_finished_spans()]
    assert count == len(names) and any(n.startswith("invoke_agent") for n in names)
    assert sum(n.startswith("invoke_agent") for n in names) == 2  # the subagent's run nested under it
    missing = here(tmp_path, "export-otel", "nope", "--store", pg_server.url, "--otlp", "http://127.0.0.1:9/v1/traces")
    assert missing.returncode == 2 and "no trace for run nope" in missing.stderr


def test_a_sigkilled_run_keeps_its_tools_events_and_resume_finishes_it(pg: PgStore, pg_server, tmp_path: Path):
    """Trace lines reach the database on a short timer, so a process killed in the middle of
    a tool leaves the tool's events (not only what its last save held); resume adopts it."""
    import signal

    from tests.support import wait_until

    url = pg_server.url
    run = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "slow", "--run-id", "k", "--store", url],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(tmp_path), cwd=tmp_path)
    try:
        wait_until(lambda: pg.exists("k") and any(r["kind"] == "tool_progress" for r in pg.read_trace("k")),
                   "scan_archive's progress in the database", CAP_S)
        run.send_signal(signal.SIGKILL)
        run.wait(CAP_S)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        run.stdout.close()
        run.stderr.close()
    kinds = [r["kind"] for r in pg.read_trace("k")]
    assert kinds[-1] == "tool_progress" and "tool_start" in kinds  # nothing saved them: the timer did
    wait_until(lambda: pg.liveness("k") == "orphaned", "the killed run is orphaned")
    shown = here(tmp_path, "runs", "--store", url)
    assert "orphaned" in shown.stdout and "tether resume k adopts it" in shown.stdout
    resumed = tether(tmp_path, "resume", "k", "--store", url)
    assert resumed.returncode == 0, resumed.stderr
    assert "status=completed" in resumed.stdout


def test_watch_all_shows_a_run_started_after_it_and_ends_on_sigint(pg: PgStore, pg_server, tmp_path: Path):
    import signal

    url = pg_server.url
    assert here(tmp_path, "run", "plan", "--run-id", "before", "--store", url).returncode == 0
    watch = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "watch", "--all", "--store", url],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(tmp_path),
                             cwd=tmp_path)
    try:
        assert watch.stderr.readline().startswith("watching every run in postgresql://tether:***@")
        assert here(tmp_path, "run", "plan", "--run-id", "after", "--store", url).returncode == 0
        lines = []
        for line in watch.stdout:
            lines.append(line)
            if "run_stopped" in line:
                break
        watch.send_signal(signal.SIGINT)
        assert watch.wait(CAP_S) == 0
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
        watch.stdout.close()
        watch.stderr.close()
    assert lines and all(line.startswith("after  ") for line in lines)  # the finished run's history is not replayed
    assert "run_started" in lines[0]
