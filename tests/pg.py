"""A real PostgreSQL server for the tests that need one, started and stopped by the tests.

:func:`start` makes a temporary directory, runs ``initdb`` in it, starts ``postgres`` on a
free loopback port (its Unix socket in the same directory), waits until it accepts
connections, creates the database ``tether`` and the two roles of
``core/data/pg/roles.sql`` (the operator ``tether`` and the watcher ``tether_watch``,
each with a password), and returns a :class:`PgServer`. :meth:`PgServer.stop` shuts it
down (a fast shutdown, then SIGKILL if it lingers) and removes the directory.

PostgreSQL refuses to run as root. When the tests run as root, the server runs as the
``postgres`` user (or ``nobody``), with the directory given to that user. The postmaster
is started with a parent-death signal, so a test process killed outright takes its
server with it (a fast shutdown) instead of leaving it listening.

No binaries: in CI (``CI`` set) that is an error that says what to install; elsewhere
the tests that need a server are skipped, with that reason.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from tests import children

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
INSTALL_HINT = ("PostgreSQL's server binaries (initdb, postgres) are needed: install them "
                "(Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql@15), "
                "put their directory on PATH, or set TETHER_PG_BIN to it")


class PgUnavailable(Exception):
    """No PostgreSQL binaries here (or none that can run)."""


def roles_sql() -> str:
    """The roles, as the README shows them (shipped in the package)."""
    return resources.files("tether").joinpath("data/pg/roles.sql").read_text()


def find_bin() -> Path:
    """The directory holding ``initdb`` and ``postgres``."""
    candidates = [os.environ.get("TETHER_PG_BIN")] if os.environ.get("TETHER_PG_BIN") else []
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(os.path.realpath(initdb)).parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)  # Debian keeps them off PATH
    for directory in candidates:
        if directory and all(os.access(Path(directory) / name, os.X_OK) for name in ("initdb", "postgres")):
            return Path(directory)
    raise PgUnavailable(INSTALL_HINT)


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: None (this user) unless we are root, which PostgreSQL refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PgUnavailable("the tests run as root and PostgreSQL refuses to: create an unprivileged "
                        "user (useradd --system postgres)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_die_with_parent = children.dying_with_parent(signal.SIGINT)  # SIGINT: the postmaster's fast shutdown


@dataclass
class PgServer:
    root: Path
    port: int
    socket_dir: Path
    process: subprocess.Popen
    operator_password: str
    watcher_password: str
    launch: dict = field(default_factory=dict)
    """How the postmaster was started (``args`` and ``Popen`` keywords), for :meth:`restart`."""

    @property
    def url(self) -> str:
        """The operator's URL (read/write)."""
        return f"postgresql://tether:{self.operator_password}@127.0.0.1:{self.port}/tether"

    @property
    def watcher_url(self) -> str:
        """The watcher's URL (read-only)."""
        return f"postgresql://tether_watch:{self.watcher_password}@127.0.0.1:{self.port}/tether"

    @property
    def admin_conninfo(self) -> str:
        """The superuser, over the Unix socket (trusted there, and only there)."""
        return f"host={self.socket_dir} port={self.port} user=postgres dbname=tether"

    @property
    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.root / "server.log").read_text(errors="replace")[-4000:]
        return ""

    def restart(self) -> None:
        """A fast shutdown (every session cut, every advisory lock dropped), then the same
        server again on the same port and data: a database restart in the middle of things."""
        _kill(self.process)
        log = open(self.root / "server.log", "ab")
        try:
            self.process = children.launch(self.launch["args"], stdout=log, stderr=subprocess.STDOUT,
                                  **self.launch["kwargs"])
        finally:
            log.close()
        _wait_ready(self)

    def stop(self) -> None:
        """Fast shutdown, SIGKILL after :data:`STOP_TIMEOUT_S`, then remove the directory."""
        try:
            if self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.process.send_signal(signal.SIGINT)
                try:
                    self.process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def start(*, durable: bool = False) -> PgServer:
    """A new server in a temporary directory (see the module). ``durable=False`` turns off
    fsync: the tests kill processes, never the machine, and it makes them faster."""
    bindir = find_bin()
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="tether-pg-"))
    try:
        as_user: dict = {}
        if user is not None:
            os.chown(root, user.pw_uid, user.pw_gid)
            as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": str(root)}
        data = root / "data"
        done = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-E", "UTF8", "--locale=C",
             "--auth-local=trust", "--auth-host=scram-sha-256", "--no-instructions"],
            cwd=root, env=env, capture_output=True, text=True, **as_user)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        for attempt in range(3):  # a free port may be taken between the probe and the bind
            port = _free_port()
            options = ["-c", "listen_addresses=127.0.0.1", "-p", str(port), "-k", str(root),
                       "-c", "max_connections=100", "-c", "shared_buffers=32MB"]
            if not durable:
                options += ["-c", "fsync=off", "-c", "full_page_writes=off"]
            log = open(root / "server.log", "ab")
            launch = {"args": [str(bindir / "postgres"), "-D", str(data), *options],
                      "kwargs": dict(cwd=root, env=env, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
                                     **as_user)}
            try:
                process = children.launch(launch["args"], stdout=log, stderr=subprocess.STDOUT, **launch["kwargs"])
            finally:
                log.close()
            server = PgServer(root, port, root, process, secrets.token_urlsafe(16), secrets.token_urlsafe(16),
                              launch)
            try:
                _wait_ready(server)
            except _PortTaken:
                server.process.wait(STOP_TIMEOUT_S)
                continue
            except BaseException:
                _kill(process)
                raise
            try:
                _setup(server)
            except BaseException:
                _kill(process)
                raise
            return server
        raise RuntimeError("could not find a free port for PostgreSQL in 3 tries")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


class _PortTaken(Exception):
    pass


@contextlib.contextmanager
def own_server() -> Iterator[PgServer]:
    """A server of the caller's own (to stop and restart at will), stopped and removed after.
    Without PostgreSQL's binaries the test is skipped, and fails in CI (``CI`` set)."""
    import pytest

    try:
        server = start()
    except PgUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI: {exc}", pytrace=False)
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(server: PgServer) -> None:
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.process.poll() is not None:
            log = server.log
            if "could not bind" in log or "Address already in use" in log:
                raise _PortTaken()
            raise RuntimeError(f"postgres exited ({server.process.returncode}) before accepting connections:\n{log}")
        try:
            with psycopg.connect(f"host={server.socket_dir} port={server.port} user=postgres dbname=postgres",
                                 connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not accept connections within {START_TIMEOUT_S:.0f} s:\n"
                                   f"{server.log}") from None
            time.sleep(0.05)


def _setup(server: PgServer) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"host={server.socket_dir} port={server.port} user=postgres dbname=postgres",
                         autocommit=True) as db:
        db.execute("CREATE DATABASE tether")
    with psycopg.connect(server.admin_conninfo, autocommit=True) as db:
        db.execute(roles_sql())
        for role, password in (("tether", server.operator_password), ("tether_watch", server.watcher_password)):
            db.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role), sql.Literal(password)))
