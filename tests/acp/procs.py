"""Which processes are still alive: the tests' proof that a session left nothing behind."""

from __future__ import annotations

import os
from pathlib import Path


def alive_in(folder: Path) -> dict[int, str]:
    """Live (not zombie) processes whose working directory is ``folder`` or inside it, with
    their command lines: an agent and everything it started run in its workspace. The test's
    own process is not one (a test may work in the folder it checks)."""
    root = folder.resolve()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{entry}/cwd"))
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
        if state in (b"Z", b"X"):
            continue
        if cwd == root or root in cwd.parents:
            found[int(entry)] = cmdline
    return found


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
