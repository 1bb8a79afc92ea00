"""The scripted provider in a child process: what ``tether`` (the console) runs by default.

It must answer like the in-process one, say in words why it could not start, never outlive
its parent (even one killed with SIGKILL), and leave runs that record no endpoint, so
``tether resume`` and the console continue them alike.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tether.models.processes import free_port, stop_process, wait_until_serving
from tether.demo.provider.server import provider_process
from tether.store.files.journal import read_journal
from tether.vocab.state import Status
from tests.support import SIZE, finish, settle, still_console
from tether.tui.app import TetherApp
from tether.tui.cli.console import run_console
from tether.tui.screens.new_run import NewRunRequest


CAP_S = 30.0


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/models", timeout=1.0).is_success
    except httpx.TransportError:
        return False


def test_it_serves_and_is_gone_after_the_block() -> None:
    with provider_process() as url:
        models = httpx.get(f"{url}/models", timeout=5).json()
        assert "runaway" in {m["id"] for m in models["data"]}
    assert not _answers(url)


def test_a_start_that_fails_is_explained() -> None:
    with pytest.raises(RuntimeError, match=r"exited with code 2: .*bad fault .nonsense@@."):
        with provider_process(fail_spec="nonsense@@"):
            pass


def test_it_does_not_outlive_a_killed_parent(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from tether.demo.provider.server import provider_process\n"
         "with provider_process() as url:\n"
         "    print(url, flush=True)\n"
         "    time.sleep(600)\n"],
        stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2], text=True)
    try:
        assert parent.stdout is not None
        url = parent.stdout.readline().strip()
        assert _answers(url)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + CAP_S
        while _answers(url):
            assert time.monotonic() < deadline, "the provider outlived its killed parent"
            time.sleep(0.1)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_a_client_that_hangs_up_mid_request_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """The crash campaign closes connections on purpose, e.g. a streamed request during the
    provider's latency: that is normal, said in one line, with no traceback."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    stderr = tmp_path / "stderr"
    with stderr.open("wb") as errors:
        proc = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "provider", "--port", str(port),
                                 "--latency-ms", "500"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=errors)
    try:
        assert wait_until_serving(proc, url, CAP_S) is None
        body = {"model": "plan", "messages": [{"role": "user", "content": "Plan it."}], "stream": True}
        with httpx.Client(base_url=url) as client:
            # Sent whole, then given up on (and its connection closed) before the 500 ms reply.
            with pytest.raises(httpx.ReadTimeout):
                client.post("/chat/completions", json=body, timeout=httpx.Timeout(CAP_S, read=0.1))
            # Sent after the hang-up with the same latency, so answered after the provider
            # went back to the first request and found its client gone: a wait, not a sleep.
            assert client.post("/chat/completions", json=body, timeout=CAP_S).is_success
    finally:
        stop_process(proc)
    said = stderr.read_text()
    assert "Traceback" not in said and "ClientDisconnect" not in said, said
    gone = "tether provider: the client went away mid-request (POST /v1/chat/completions)"
    assert [line for line in said.splitlines() if "went away" in line] == [gone], said


async def test_the_console_on_a_provider_process(tmp_path: Path) -> None:
    with provider_process() as url:
        app = still_console(runs_dir=tmp_path / "runs", workspace=tmp_path / "workspace",
                        provider_url=url)
        async with app.run_test(size=SIZE) as pilot:
            rid = app.create_run(NewRunRequest("plan"), run_id="plan-remote")
            app.select(rid)
            await settle(pilot, app)
            assert app.states[rid].status is Status.COMPLETED
            assert "completed" in app.transcript_view.text
            await finish(pilot, app)
    saved = (tmp_path / "runs" / rid / "journal.jsonl").read_text()
    assert url not in saved and "127.0.0.1" not in saved  # an embedded run: no endpoint recorded
    assert read_journal(tmp_path / "runs" / rid / "journal.jsonl")[0].base_url in (None, "")


def _console_args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(runs_dir=tmp_path / "runs", workspace=tmp_path / "workspace", start=[],
                              base_url=None, model=None)


def test_tether_serves_the_embedded_provider_from_a_child_and_stops_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def run(app: TetherApp) -> int:  # instead of taking over the terminal
        seen.update(url=app.options.provider_url, answered=_answers(str(app.options.provider_url)),
                    notes=list(app.options.notes))
        return 0

    monkeypatch.setattr(TetherApp, "run", run)
    assert run_console(_console_args(tmp_path)) == 0
    assert str(seen["url"]).startswith("http://127.0.0.1:") and seen["answered"] and not seen["notes"]
    assert not _answers(str(seen["url"]))  # stopped with the console


def test_without_a_child_the_console_runs_the_provider_itself_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    @contextlib.contextmanager
    def no_child(**kw: object) -> Iterator[str]:
        raise RuntimeError("the scripted provider on port 1 exited with code 1: no room")
        yield ""  # pragma: no cover

    def run(app: TetherApp) -> int:
        seen.update(url=app.options.provider_url, notes=list(app.options.notes))
        return 0

    monkeypatch.setattr("tether.tui.cli.console.provider_process", no_child)
    monkeypatch.setattr(TetherApp, "run", run)
    assert run_console(_console_args(tmp_path)) == 0
    assert seen["url"] is None
    assert seen["notes"] == ["the scripted provider runs inside the console (the scripted provider on port 1 "
                             "exited with code 1: no room); long runs will make the screen slower"]
