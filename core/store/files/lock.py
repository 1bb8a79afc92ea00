"""Who holds a run of the file store: the journal's ``flock``, and ``owner.json`` beside it.

The process running a run holds an exclusive ``flock`` on the journal's descriptor, the one
its saves append through (:class:`tether.store.files.handle.RunHandle`): one system call,
released by the kernel when the process ends however it ends, and no lock file to create or
clean up. That lock, not ``owner.json`` nor its heartbeat, says whether a run is held: a run
whose saved status is ``running`` and whose lock is free is *orphaned* (its process died
without stopping it), whatever ``owner.json`` a killed process left behind; resuming it
adopts it. ``owner.json`` says who holds it (pid, host, user, since when, its command, its
control address): written when a process takes the run, removed when it lets go.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from tether.store.files.layout import OWNER_FILE

_OWNER_TYPES = {"pid": int, "host": str, "user": str, "since": (int, float), "heartbeat": (int, float),
                "command": str, "control": str}


def lock_held(journal: Path) -> bool:
    """Whether a process holds the run's lock: try a shared lock on a descriptor of our
    own, without blocking, and let go at once. The owner holds it exclusive, so the try
    fails while the owner lives; flock locks belong to the open file, so this neither
    touches the owner's lock (even in the owner's own process) nor creates any file."""
    for _ in range(3):
        try:
            fd = os.open(journal, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # no journal (or none this user may read): nobody holds it that we can tell
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fd, fcntl.LOCK_UN)
            # A compaction replaces the journal by a new file, locked before it is renamed
            # into place: if the name now points elsewhere, ask the new file.
            try:
                if os.stat(journal).st_ino == os.fstat(fd).st_ino:
                    return False
            except FileNotFoundError:
                return False
        finally:
            os.close(fd)
    return False


def owner_record(directory: Path) -> dict[str, Any] | None:
    """What the run's ``owner.json`` says, each field None unless of its type; None when
    there is no readable record."""
    try:
        data = json.loads((directory / OWNER_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return {k: data.get(k) if isinstance(data.get(k), t) and not isinstance(data.get(k), bool) else None
            for k, t in _OWNER_TYPES.items()}
