"""Through the real command: what ``tether run`` leaves under a fresh ``$TETHER_HOME`` is
0700 folders and 0600 files (even with umask 000), a loose home is warned about once and
left alone, and a name in the runs dir that is not a run is one line and exit 2 (each
verb by the CLI's main in this process, tests/support.py cli_here, but watch, which takes
Ctrl-C: the same words without a process start-up each; a real process refuses one too)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tether.store.files.layout import INDEX_FILE, JOURNAL_FILE, OWNER_FILE
from tether.store.files.store import RunStore
from tests.support import cli_here

CAP_S = 120


def env(home: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("TETHER_STORE", "TETHER_CONFIG")}
    return {**out, "TETHER_HOME": str(home)}


def tether(home: Path, *args: str, umask: int = 0o022, here: bool = False) -> subprocess.CompletedProcess[str]:
    """``tether ARGS`` with ``home`` as $TETHER_HOME: a child process (under ``umask``), or
    the CLI's main in this process when ``here``."""
    if here:
        return cli_here(*args, env=env(home), cwd=home.parent)
    return subprocess.run([sys.executable, "-m", "tether.tui.cli", *args], capture_output=True, text=True,
                          timeout=CAP_S, env=env(home), cwd=home.parent, preexec_fn=lambda: os.umask(umask))


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def not_private(home: Path) -> dict[str, str]:
    """Every folder under the home (itself included) that is not 0700 and file not 0600:
    the demo's workspace too, whose sample holds ``secrets.env``."""
    out = {}
    for path in [home, *home.rglob("*")]:
        want = 0o700 if path.is_dir() else 0o600
        if mode(path) != want:
            out[str(path.relative_to(home))] = f"{mode(path):04o}"
    return out


def test_a_fresh_home_holds_only_private_folders_and_files(tmp_path: Path):
    home = tmp_path / "home"
    ran = tether(home, "run", "plan", "--run-id", "p", umask=0o000)  # the umask gives everything away
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr == ""  # the home Tether made itself is not warned about
    runs = home / "runs"
    assert (runs / "p" / JOURNAL_FILE).exists() and (runs / INDEX_FILE).exists()

    # A run that waits in its process for a decision: owner.json, the index's -wal and -shm
    # (the process keeps the index open), then the control channel when it is decided.
    waiting = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "destructive", "--run-id", "w",
                                "--wait-for-decision", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env(home), cwd=tmp_path, preexec_fn=lambda: os.umask(0))
    try:
        store = RunStore(runs)
        deadline = time.monotonic() + CAP_S
        while True:
            assert waiting.poll() is None, waiting.communicate()
            owner = store.owner("w") if store.exists("w") else None
            if owner is not None and owner.alive and store.load("w").status.value == "interrupted":
                break
            assert time.monotonic() < deadline, "the run never came to wait for its decision"
            time.sleep(0.05)
        assert (runs / "w" / OWNER_FILE).exists()
        assert (runs / f"{INDEX_FILE}-wal").exists() and (runs / f"{INDEX_FILE}-shm").exists()
        assert not_private(home) == {}

        decided = tether(home, "approve", "w", umask=0o000)
        assert decided.returncode == 0, decided.stderr
        out, err = waiting.communicate(timeout=CAP_S)
        assert waiting.returncode == 0, err
        assert json.loads(out)["status"] == "completed"
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert (runs / "w" / "control.jsonl").exists() and (runs / "w" / "ledger.jsonl").exists()
    listed = tether(home, "runs")
    assert listed.returncode == 0 and listed.stderr == ""
    assert not_private(home) == {}
    assert sorted(p.name for p in home.iterdir()) == ["runs", "workspace"]
    assert (home / "workspace" / "secrets.env").exists()  # the sample was laid out, privately


def test_a_loose_home_is_warned_about_once_per_command_and_left_as_it_is(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    os.chmod(home, 0o755)
    warning = f"tether: warning: {home} is readable by other users (mode 0755); run: chmod 700 {home}"

    ran = tether(home, "run", "plan", "--run-id", "p")
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.splitlines() == [warning]
    listed = tether(home, "runs")
    assert listed.returncode == 0 and "p " in listed.stdout
    assert listed.stderr.splitlines() == [warning]
    assert mode(home) == 0o755  # never changed silently
    assert mode(home / "runs") == 0o700 and mode(home / "runs" / "p" / JOURNAL_FILE) == 0o600

    os.chmod(home, 0o700)  # what the warning says to do
    assert tether(home, "show", "p").stderr == ""


NOT_RUNS = [INDEX_FILE, "stray-file", "empty-folder"]
VERBS = [("show",), ("trace",), ("resume",), ("stop",), ("approve",), ("reject", "--reason", "no"), ("watch",),
         ("export-otel", "--otlp", "http://127.0.0.1:9")]


@pytest.fixture(scope="module")
def home_with_strays(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("strays") / "home"
    ran = tether(home, "run", "plan")
    assert ran.returncode == 0, ran.stderr
    (home / "runs" / "stray-file").write_text("not a run\n")
    (home / "runs" / "empty-folder").mkdir()
    return home


# Every verb on the index's name, and every kind of stray on the first verbs; the verbs share
# one way of reading a run id.
CASES = [(INDEX_FILE, verb) for verb in VERBS] + [(name, verb) for name in NOT_RUNS if name != INDEX_FILE
                                                 for verb in VERBS[:2]]


@pytest.mark.parametrize(("name", "verb"), CASES, ids=lambda v: v if isinstance(v, str) else v[0])
def test_a_name_in_the_store_that_is_not_a_run_is_one_line_and_exit_2(home_with_strays: Path, name: str,
                                                                       verb: tuple[str, ...]):
    before = sorted(str(p.relative_to(home_with_strays)) for p in home_with_strays.rglob("*"))
    real = verb[0] == "watch" or (name, verb) == CASES[0]  # watch takes Ctrl-C; one other in a process too
    done = tether(home_with_strays, verb[0], name, *verb[1:], here=not real)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tether: error: ") and name in lines[0], lines
    assert done.stdout == ""
    after = sorted(str(p.relative_to(home_with_strays)) for p in home_with_strays.rglob("*"))
    assert after == before  # nothing made for it


@pytest.mark.parametrize("name", [INDEX_FILE, "stray-file"])
def test_a_run_cannot_be_created_over_a_file_of_the_store(home_with_strays: Path, name: str):
    done = tether(home_with_strays, "run", "plan", "--run-id", name, here=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and name in done.stderr
    assert (home_with_strays / "runs" / name).is_file()
