"""A run's keeper: the outside process a program's run lives in between its reporters.

Claude Code's hooks (:mod:`tether.integrations.claude_code`) are short processes: each holds
the session's run while it runs, and between hooks no process holds it. Going by the lock
alone, the run would show ``orphaned`` all the time Claude Code thinks. So the run records
Claude Code's own process, its *keeper* (``state.agent.spec["keeper"]``), and the stores count
a run saved ``running`` that nobody holds as live while that process lives
(:func:`tether.store.owner.kept_owner`); once it is gone without ending the run (killed, crashed),
the run is orphaned as any other.

A pid alone could name another process later (pids are reused), so the record also holds the
host, the machine's boot id and the process's start time (``/proc/PID/stat``'s ``starttime``):
the keeper lives only if all of them match. A keeper on another host cannot be checked from
here, so it does not count (the run shows orphaned there). Without ``/proc`` (not Linux) no
keeper is recorded.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

__all__ = ["living", "record"]

_PROC = Path("/proc")


def record(pid: int, command: str) -> dict[str, Any] | None:
    """What a run keeps of its keeper ``pid``; ``command`` says in words what the process is
    and when a Stop reaches it ("Claude Code: Stop lands at its next hook"). None when the
    process cannot be read (gone already, or no ``/proc``)."""
    started, boot = _started(pid), _boot_id()
    if started is None or boot is None:
        return None
    since = _boot_time()
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return {"pid": pid, "host": socket.gethostname(), "boot": boot, "started": started,
            "since": None if since is None else since + started / ticks, "command": command}


def living(kept: Any) -> bool:
    """Whether the keeper ``kept`` (a :func:`record`) is alive on this host: the same pid,
    started at the same moment of the same boot."""
    if not isinstance(kept, dict) or kept.get("host") != socket.gethostname():
        return False
    pid, started = kept.get("pid"), kept.get("started")
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(started, int):
        return False
    return kept.get("boot") == _boot_id() and _started(pid) == started


def _started(pid: int) -> int | None:
    """The process's start time, in clock ticks after boot (``/proc/PID/stat``, field 22)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
        return int(stat[stat.rfind(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _boot_id() -> str | None:
    try:
        return (_PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip() or None
    except OSError:
        return None


def _boot_time() -> float | None:
    try:
        for line in (_PROC / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError):
        return None
    return None
