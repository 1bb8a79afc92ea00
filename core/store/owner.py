"""Who holds a run, as every store says it: the :class:`Owner` record, and this process's own.

Both stores (:mod:`tether.store.files`, :mod:`tether.store.postgres`) write the same owner
record when a process takes a run (pid, host, user, since when, its command, where it takes
control requests) and answer :meth:`tether.store.protocol.Store.owner` with an :class:`Owner`.
It lives here, apart from either, so a reader of runs (the console, the CLI) and either
store share one meaning of "owner" without importing the other store.
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
from dataclasses import dataclass
from typing import Any

from tether.store import keeper

HEARTBEAT_S = 5.0
"""How often the process running a run should call :meth:`tether.store.protocol.Handle.heartbeat`."""

@dataclass(frozen=True, slots=True)
class Owner:
    """Who runs a run: what its owner record says (the file store's ``owner.json``, PostgreSQL's
    ``owners`` row), and whether the run's lock is held.

    ``alive`` comes from the lock alone: a record left by a killed process has
    ``alive=False``; a held run whose record is missing (a process between taking the
    lock and writing it) has ``alive=True`` and the other fields None."""

    pid: int | None = None
    host: str | None = None
    user: str | None = None
    since: float | None = None
    heartbeat: float | None = None
    command: str | None = None
    control: str | None = None
    """Where the owner takes control requests (:mod:`tether.store.control`), if it said."""
    alive: bool = False
    kept: bool = False
    """Alive because the run's keeper lives (:mod:`tether.store.keeper`: Claude Code, between its
    hooks), not because a process holds the run: it takes control requests at its next hook."""

    @property
    def where(self) -> str:
        """``pid@host``, or ``?`` when the record is missing."""
        if self.pid is None:
            return "?"
        return f"{self.pid}@{self.host}" if self.host else str(self.pid)

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "user": self.user, "since": self.since,
                "heartbeat": self.heartbeat, "command": self.command, "control": self.control,
                "alive": self.alive, "kept": self.kept}


def kept_owner(kept: Any) -> Owner | None:
    """The owner of a run saved ``running`` that no process holds, when the keeper it records
    (:mod:`tether.store.keeper`) lives on this host: alive, and ``kept``. None otherwise."""
    if not keeper.living(kept):
        return None
    since = kept.get("since")
    return Owner(pid=kept["pid"], host=kept["host"], since=since if isinstance(since, (int, float)) else None,
                 command=str(kept.get("command") or "") or None, alive=True, kept=True)


_WHOAMI: dict[str, str] = {}


def whoami() -> dict[str, str]:
    """This process's host, user and command, for its owner records (computed once)."""
    if not _WHOAMI:
        try:
            user = getpass.getuser()
        except Exception:  # no name for the uid (a container): the number will do
            user = str(os.getuid())
        argv = sys.argv or [""]
        program = os.path.basename(argv[0] or "") or "python"
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None and spec.name in ("tether.tui.cli.__main__", "tether.__main__"):
            program = "tether"  # python -m tether.tui.cli
        # The CLI's subcommand says what it is doing; another program's arguments may hold
        # anything (a key, a prompt), so they are left out.
        words = [program, *argv[1:2]] if program == "tether" else [program]
        _WHOAMI.update(host=socket.gethostname(), user=user, command=" ".join(words)[:80])
    return _WHOAMI


def set_owner_command(words: str) -> None:
    """What owner records written by this process say it is (a queue worker names its
    executor id, so an operator can tell which worker holds a run)."""
    whoami()["command"] = words[:80]
