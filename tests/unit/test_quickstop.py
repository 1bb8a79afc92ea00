"""``tether stop``'s quick path (:mod:`tether.store.files.quickstop`) against a stand-in for
the run's process: this test holds the journal's lock and answers the poke on a socket of
its own, as the process would, or lets go of the run first, or never answers. What the
command says must be what the full path says (:func:`tether.store.operate.request`)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from tether.vocab.state import Status
from tether.store.control import ControlRequest
from tether.store.files.control import read_from
from tether.store.files.layout import JOURNAL_FILE, OWNER_FILE
from tether.store.files.quickstop import stop_live, stop_request
from tether.store.files.store import RunStore

from tests.support import cli_here, place

Answer = Callable[[dict], "dict | None"]


@pytest.fixture
def waiting(tmp_path: Path) -> list[str]:
    """A run (``w``) waiting for approval that no process holds: the place options."""
    where = place(tmp_path)
    assert cli_here("run", "destructive", "--run-id", "w", *where).returncode == 5
    return where


@contextlib.contextmanager
def held(run_dir: Path, answer: Answer) -> Iterator[list[dict]]:
    """Hold the run as its process would: the journal's lock, and ``owner.json`` naming a
    socket where ``answer(poke)`` gives the reply (None: close without one). Yields the pokes."""
    lock = os.open(run_dir / JOURNAL_FILE, os.O_RDONLY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    address = f"\0tether-test-{os.getpid()}-{os.urandom(4).hex()}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen()
    pokes: list[dict] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = server.accept()
            with conn:
                poke = json.loads(conn.makefile("rb").readline())
                pokes.append(poke)
                reply = answer(poke)
                if reply == "hang":  # past the requester's deadline, then gone without a word
                    time.sleep(1.0)
                    reply = None
                if reply == "let go":
                    fcntl.flock(lock, fcntl.LOCK_UN)
                    (run_dir / OWNER_FILE).unlink()
                    reply = {"ok": False, "words": "this process no longer runs it", "gone": True}
                if reply is not None:
                    conn.sendall((json.dumps(reply) + "\n").encode())

    (run_dir / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "host": "here", "control": address}))
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield pokes
    finally:
        server.close()
        thread.join(5)
        os.close(lock)


def test_the_request_written_is_the_control_requests_own_shape() -> None:
    written = stop_request("enough", "tess")
    assert set(written) == {f.name for f in fields(ControlRequest)}
    assert asdict(ControlRequest.from_dict(written)) == written
    assert len(written["id"]) == 12


def test_a_live_process_gets_the_stop_and_its_answer_is_the_commands(tmp_path: Path, waiting: list[str]) -> None:
    run_dir = tmp_path / "runs" / "w"
    with held(run_dir, lambda poke: {"ok": True, "words": "stopping w"}) as pokes:
        done = cli_here("stop", "w", "--reason", "enough", "--as", "tess", *waiting)
    assert (done.returncode, done.stdout.strip()) == (0, "stopping w")
    [request] = read_from(run_dir, 0)
    assert (request.kind, request.text, request.by) == ("stop", "enough", "tess")
    assert pokes == [{"run_id": "w", "request_id": request.id}]


def test_a_process_that_let_go_before_it_answered_is_said_as_the_full_path_says_it(
        tmp_path: Path, waiting: list[str]) -> None:
    with held(tmp_path / "runs" / "w", lambda poke: "let go"):
        done = cli_here("stop", "w", *waiting)
    assert done.returncode == 2
    assert "let go of it before it answered (it is interrupted now); nothing was done" in done.stderr


def test_a_process_that_does_not_answer_leaves_the_stop_recorded(tmp_path: Path, waiting: list[str]) -> None:
    with held(tmp_path / "runs" / "w", lambda poke: None):
        done = cli_here("stop", "w", *waiting)
    assert done.returncode == 1  # recorded: it applies when the run is adopted
    assert "did not answer; the stop is recorded" in done.stderr
    assert [r.kind for r in read_from(tmp_path / "runs" / "w", 0)] == ["stop"]


def test_a_run_nobody_holds_takes_the_full_path_and_nothing_is_written(tmp_path: Path, waiting: list[str]) -> None:
    assert stop_live(tmp_path / "runs", "w", "enough", "tess") is None
    assert read_from(tmp_path / "runs" / "w", 0) == []
    done = cli_here("stop", "w", *waiting)
    assert done.returncode == 2 and "waiting for approval of delete_file" in done.stderr
    assert RunStore(tmp_path / "runs").load("w").status is Status.INTERRUPTED


@pytest.mark.parametrize("run_id", ["", ".", "..", "a/b", "x\0y", "index.sqlite", "rules.json", "nope", "é" * 150])
def test_a_name_that_is_no_live_run_is_left_to_the_full_path(tmp_path: Path, run_id: str) -> None:
    (tmp_path / "runs").mkdir()
    assert stop_live(tmp_path / "runs", run_id, "r", "me") is None


def test_a_process_that_hangs_is_given_up_on_at_the_deadline(tmp_path: Path, waiting: list[str]) -> None:
    run_dir = tmp_path / "runs" / "w"
    with held(run_dir, lambda poke: "hang"):
        sent = stop_live(tmp_path / "runs", "w", "enough", "tess", timeout_s=0.2)
    assert sent is not None and sent.reply is None and not sent.answered
    assert [r.id for r in read_from(run_dir, 0)] == [sent.request["id"]]  # recorded all the same
