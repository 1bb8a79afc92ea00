"""``tether serve`` as a user runs it: its users from the command line, the server in a process
of its own, a run in another process approved through it, and SIGTERM."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from pathlib import Path

import aiohttp

from tests.support import cli_here_async, exited, reaped
from tests.web.conftest import PAGE, login

CAP_S = 60.0
PASSWORD = "green tea at dawn"


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "TETHER_HOME": str(tmp_path / "home"), "TETHER_STORE": str(tmp_path / "runs")}


async def tether(tmp_path: Path, *args: str, stdin: str = "") -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", *args, env=env(tmp_path),
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    async with reaped(proc):
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), CAP_S)
    return proc.returncode or 0, out.decode(), err.decode()


async def tether_here(tmp_path: Path, *args: str, stdin: str = "") -> tuple[int, str, str]:
    """The same command by the CLI's own ``main`` in this process: where the test is not about
    a process of its own (one real ``--add-user`` reads its password from a pipe)."""
    done = await cli_here_async(*args, env=env(tmp_path), stdin=stdin)
    return done.returncode, done.stdout, done.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_users_are_managed_from_the_command_line_and_bad_input_is_refused_in_words(tmp_path: Path):
    code, out, err = await tether(tmp_path, "serve", "--add-user", "ana", stdin=PASSWORD + "\n")
    assert code == 0, err
    assert out.startswith("added ana: an operator, on ")
    code, out, _ = await tether_here(tmp_path, "serve", "--add-user", "walt", "--read-only",
                                     stdin="quiet river stones\n")
    assert code == 0 and "added walt: a watcher" in out
    for args, stdin, words in ((("--add-user", "bob"), "short\n", "use at least 10"),
                               (("--add-user", "bob"), "\n", "the password is empty"),
                               (("--add-user", "b/b"), PASSWORD, "is not a user name"),
                               (("--remove-user", "nobody"), "", "no user 'nobody' on this store"),
                               (("--read-only",), "", "--read-only goes with --add-user NAME"),
                               (("--public-url", "ftp://x"), "", "--public-url must be an http:// or https://"),
                               (("--trust-proxy", "127.0.0.1,localhost"), "",
                                "--trust-proxy takes the address or network of a reverse proxy in front of this "
                                "server (127.0.0.1, 10.0.0.0/8, ::1), not 'localhost'"),
                               (("--session-hours", "nan"), "", "must be a finite number of hours above 0")):
        code, _, err = await tether_here(tmp_path, "serve", *args, stdin=stdin)
        assert code == 2 and words in err, (args, err)
        assert "Traceback" not in err
    code, out, _ = await tether_here(tmp_path, "serve", "--users")
    assert code == 0 and out.split() == ["ana", "operator", "walt", "watcher"]
    code, out, _ = await tether_here(tmp_path, "serve", "--remove-user", "walt")
    assert code == 0 and "removed walt" in out
    stored = (tmp_path / "runs" / "users.json").read_text()
    assert PASSWORD not in stored and "walt" not in stored


async def test_a_run_waiting_in_another_process_is_approved_through_the_server_and_sigterm_ends_it(tmp_path: Path):
    assert (await tether_here(tmp_path, "serve", "--add-user", "ana", stdin=PASSWORD))[0] == 0
    port = free_port()
    server = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", "serve", "--port", str(port),
                                                  env=env(tmp_path), stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.PIPE)
    run = None
    async with reaped(server):
        first = (await asyncio.wait_for(server.stdout.readline(), CAP_S)).decode()
        assert first.startswith(f"tether serve: http://127.0.0.1:{port}/ (the approvals page)"), first
        run = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tether.tui.cli", "run", "destructive", "--run-id", "held", "--wait-for-decision",
            "--workspace", str(tmp_path / "ws"), env=env(tmp_path), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        async with reaped(run):
            async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}",
                                             cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
                assert (await login(browser, "ana", PASSWORD)).status == 303
                async with browser.get("/events") as events:  # told when the call starts waiting
                    while b'"held"' not in await asyncio.wait_for(events.content.readline(), CAP_S):
                        pass
                    text = await (await browser.get("/", headers=PAGE)).text()
                    while 'data-run="held"' not in text:  # the journal first, the call a moment later
                        await asyncio.wait_for(events.content.readline(), CAP_S)
                        text = await (await browser.get("/", headers=PAGE)).text()
                data = {"csrf": re.search(r'name="csrf" value="([^"]+)"', text).group(1), "run": "held",
                        "call": "call_1_0", "verdict": "approve",
                        "hash": re.search(r'name="hash" value="([^"]+)"', text).group(1)}
                answer = await browser.post("/decide", data=data, headers={"Accept": "application/json"})
                said = await answer.json()
                assert said["ok"], said
            code, out, err = await exited(run, CAP_S)
            assert code == 0, err  # the process that waited went on and finished
        server.send_signal(signal.SIGTERM)
        code, out, err = await exited(server, CAP_S)
    assert code == 0, err
    assert "tether serve: stopping" in out
    assert PASSWORD not in out + err
    assert '"POST /login" 303' in err  # the access log, on stderr


async def test_a_user_removed_from_the_command_line_is_logged_out_of_the_running_server_at_once(tmp_path: Path):
    from tests.web.test_login import ended_words

    assert (await tether_here(tmp_path, "serve", "--add-user", "bob", stdin="seven blue kites\n"))[0] == 0
    assert (await tether_here(tmp_path, "serve", "--add-user", "ana", stdin=PASSWORD))[0] == 0
    port = free_port()
    server = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", "serve", "--port", str(port),
                                                  env=env(tmp_path), stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.PIPE)
    async with reaped(server):
        await asyncio.wait_for(server.stdout.readline(), CAP_S)
        jar = {"base_url": f"http://127.0.0.1:{port}"}
        async with aiohttp.ClientSession(**jar, cookie_jar=aiohttp.CookieJar(unsafe=True)) as bob, \
                aiohttp.ClientSession(**jar, cookie_jar=aiohttp.CookieJar(unsafe=True)) as ana:
            assert (await login(bob, "bob", "seven blue kites")).status == 303
            assert (await login(ana, "ana", PASSWORD)).status == 303
            async with bob.get("/events") as stream:
                assert (await stream.content.readline()).startswith(b"retry:")
                code, out, err = await tether_here(tmp_path, "serve", "--remove-user", "bob")  # beside the server
                assert code == 0, err
                assert "removed bob from" in out and "their open pages end within seconds" in out
                assert await ended_words(stream) == "bob is no longer a user of this store: log in again"
            refused = await bob.get("/", headers=PAGE, allow_redirects=False)
            assert refused.status == 303 and refused.headers["Location"] == "/login"
            assert (await ana.get("/", headers=PAGE)).status == 200
        server.send_signal(signal.SIGTERM)
        code, _, err = await exited(server, CAP_S)
    assert code == 0, err


async def test_listening_beyond_loopback_or_behind_a_proxy_nobody_named_warns(tmp_path: Path):
    server = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", "serve", "--host", "0.0.0.0",
                                                  "--port", str(free_port()), "--public-url", "https://tether.example.org",
                                                  env=env(tmp_path), stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.PIPE)
    async with reaped(server):
        await asyncio.wait_for(server.stdout.readline(), CAP_S)
        server.send_signal(signal.SIGTERM)
        code, _, err = await exited(server, CAP_S)
    assert code == 0
    assert "listening on 0.0.0.0, beyond this machine: put it behind a reverse proxy with TLS" in err
    assert "nobody can log in yet: add a user first" in err
    assert ("--public-url is https, so a reverse proxy is in front, but no --trust-proxy names it: the login "
            "throttle counts every client as the proxy's one address") in err
