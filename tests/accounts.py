"""A second person, for the tests of calls that need two (issue 37): another account.

A decision counts as the account that authenticated it (:mod:`tether.vocab.people`): on the
file store the operating system's, on PostgreSQL the database role. The tests run as root,
so the second operating-system account is a ``tether`` child run as ``nobody`` through
``setpriv``, on a store shared with nobody's group as docs/approvals.md tells a team to
share one (``chgrp`` and ``chmod 2770``): what it writes there, it writes through the
store's own modes. It keeps one capability, CAP_DAC_READ_SEARCH, to read the interpreter
and the checkout where root keeps them; it writes nothing nobody could not. On PostgreSQL the
second person is a second login role, a member of the operator's role, as docs/approvals.md
sets one up.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import secrets
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

OTHER = "nobody"
"""The second operating-system account."""
CAP_S = 60.0


def other() -> pwd.struct_passwd:
    return pwd.getpwnam(OTHER)


def me(store: str | None = None) -> str:
    """The account this test's process is to a store: its operating-system account by its user
    id, or on PostgreSQL (``store`` a URL) the role its URL logs in as."""
    if store is not None and store.startswith("postgresql://"):
        return str(urlsplit(store).username)
    return pwd.getpwuid(os.getuid()).pw_name


def can_switch() -> None:
    """Skip, saying why, where no test can act as another account: not root, or no setpriv."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("acting as a second operating-system account needs root and setpriv (util-linux)")
    try:
        other()
    except KeyError:
        pytest.skip(f"no account {OTHER!r} to act as the second person")


def shared(folder: Path) -> Path:
    """``folder``, made if missing, shared with the second account's group (setgid, 2770)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, -1, other().pw_gid)
    os.chmod(folder, 0o2770)
    return folder


async def tether_as_other(*args: str, home: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``tether ARGS`` as the second account: its exit code, stdout and stderr. ``home`` is its
    ``TETHER_HOME``; ``env`` adds to the environment (``USER``, to show it does not count)."""
    who = other()
    command = ["setpriv", f"--reuid={who.pw_uid}", f"--regid={who.pw_gid}", "--clear-groups",
               "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search",
               sys.executable, "-m", "tether.tui.cli", *args]
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TETHER_HOME": str(home), **(env or {})})
    try:
        out, err = await asyncio.wait_for(process.communicate(), CAP_S)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return process.returncode or 0, out.decode(), err.decode()


def second_role(server: object, name: str) -> str:
    """A login role ``name`` on the tests' PostgreSQL server, a member of the operator's
    role (made once a session; its password set again), and the URL it connects with."""
    import psycopg
    from psycopg import sql

    password = secrets.token_urlsafe(12)
    with psycopg.connect(server.admin_conninfo, autocommit=True) as db:  # type: ignore[attr-defined]
        if db.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is None:
            db.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE tether").format(sql.Identifier(name)))
        db.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(name), sql.Literal(password)))
    return f"postgresql://{name}:{password}@127.0.0.1:{server.port}/tether"  # type: ignore[attr-defined]
