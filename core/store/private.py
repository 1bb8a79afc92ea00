"""Files and folders only their owner may read: what every room that keeps something on disk
uses (the file store, the probe cache, the notifications' state, the web's users).

Folders are made ``0700`` and files ``0600`` (:data:`PRIVATE_DIR`, :data:`PRIVATE_FILE`),
whatever the umask; in a folder a team shares on purpose, given to a group with the setgid
bit (:func:`shared`), what is made is the group's too (``2770``, ``0660``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_DIR = 0o700
"""The mode of every folder the store creates (as ~/.ssh): transcripts are nobody else's."""
PRIVATE_FILE = 0o600
"""The mode of every file the store creates."""
SHARED_DIR = 0o2770
"""The mode of a folder the store creates in a folder shared with its group (:func:`shared`)."""
SHARED_FILE = 0o660
"""The mode of a file the store creates in a folder shared with its group."""


def default_home() -> Path:
    """``$TETHER_HOME`` (default ``~/.local/share/tether``), without importing the harness."""
    return Path(os.environ.get("TETHER_HOME") or Path.home() / ".local" / "share" / "tether")


def shared(folder: Path | str) -> bool:
    """Whether ``folder`` is shared with its group: the setgid bit and the group's write bit
    on it (``chgrp team DIR; chmod 2770 DIR``). That is how a team makes one file store for
    several accounts on a host (each person's decisions count as their account: docs/approvals.md):
    what the store makes in such a folder is the group's too (:data:`SHARED_DIR`,
    :data:`SHARED_FILE`), and everything else stays its user's alone."""
    try:
        mode = os.stat(folder).st_mode
    except (OSError, ValueError):
        return False
    return bool(mode & stat.S_ISGID and mode & stat.S_IWGRP)


def open_private(path: Path | str, flags: int) -> int:
    """``os.open(path, flags | O_CREAT)``, a new file made ``0600``, or ``0660`` in a folder
    shared with its group (:func:`shared`). The group's bits are set after the file is made,
    so the umask cannot take them away."""
    if not shared(os.path.dirname(path) or "."):
        return os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, SHARED_FILE)
    try:
        if os.fstat(fd).st_uid == os.geteuid():  # another account's file is theirs to mode
            os.fchmod(fd, SHARED_FILE)
    except OSError:
        os.close(fd)
        raise
    return fd


def private_dirs(path: Path | str) -> None:
    """Make the folder ``path`` and whichever of its parents are missing, each ``0700``, or
    ``2770`` in a folder shared with its group (set after ``mkdir``, so the umask cannot
    widen or narrow it). Folders that exist are left as they are."""
    path = Path(path)
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for folder in reversed(missing):
        mode = SHARED_DIR if shared(folder.parent) else PRIVATE_DIR
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            if folder.is_dir():
                continue  # made by another process meanwhile: its own business
            raise
        os.chmod(folder, mode)


def private_file(path: Path | str) -> None:
    """Create ``path`` empty with mode ``0600`` (``0660`` in a folder shared with its group)
    if it does not exist, so that a writer that opens it later with ``O_CREAT`` (a trace, the
    ledger, the control channel) appends to a file of the store's mode."""
    os.close(open_private(path, os.O_WRONLY | os.O_APPEND))


def write_private(path: Path, data: bytes, *, sync: bool = False) -> None:
    """Write a new file of mode ``0600``, or ``0660`` in a folder shared with its group
    (truncating any left by a crashed process)."""
    fd = open_private(path, os.O_WRONLY | os.O_TRUNC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
