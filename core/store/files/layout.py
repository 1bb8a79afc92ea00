"""Where the file store keeps things, and who may read them.

Layout of ``<runs_dir>/``:

* ``<run_id>/journal.jsonl``: the run (:mod:`tether.store.files.journal`);
* ``<run_id>/trace.jsonl``: the event trace (:mod:`tether.store.trace`);
* ``<run_id>/ledger.jsonl``: the idempotency ledger of the run's writes (:mod:`tether.vocab.ledger`);
* ``<run_id>/owner.json``: while a process runs the run, who it is (:mod:`tether.store.files.lock`);
* ``<run_id>/control.jsonl``: the run's control requests (:mod:`tether.store.files.control`);
* ``index.sqlite``: the summaries and decisions of every run (:mod:`tether.store.files.index`);
* ``rules.json``: the store's standing rules (:mod:`tether.store.files.rules`).

Transcripts are private: the folders the store creates (the runs dir, any missing parent
of it such as ``$TETHER_HOME``, each run's folder) are made ``0700`` and every file in
them ``0600`` (:mod:`tether.store.private`), whatever the umask. A Tether
home that already exists with looser modes is left as it is, with one warning on stderr
per process naming the ``chmod`` that fixes it (:func:`check_home`). A runs dir that a
team shares on purpose, given to a group with the setgid bit (:func:`tether.store.private.shared`), has what
the store makes in it made the group's too (``2770``, ``0660``).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
import sys
from pathlib import Path

from tether.store.private import default_home, private_dirs

JOURNAL_FILE = "journal.jsonl"
TRACE_FILE = "trace.jsonl"
LEDGER_FILE = "ledger.jsonl"
OWNER_FILE = "owner.json"
CONTROL_FILE = "control.jsonl"
INDEX_FILE = "index.sqlite"
RULES_FILE = "rules.json"
RULES_LOCK = ".rules.lock"
# Names the store keeps in the runs dir for itself: never a run's id.
RESERVED_NAMES = frozenset({*(INDEX_FILE + suffix for suffix in ("", "-wal", "-shm", "-journal")), RULES_FILE})


def run_id_problem(run_id: str) -> str | None:
    """Why ``run_id`` cannot name a run's folder in a runs dir, in words; None when it can."""
    if not run_id or "/" in run_id or run_id in (".", "..") or "\0" in run_id:
        return f"invalid run id {run_id!r}"
    try:
        size = len(os.fsencode(run_id))
    except UnicodeEncodeError:  # a lone surrogate: no file name holds it
        return f"invalid run id {run_id!r}: a file name cannot hold it"
    if size > 255:  # NAME_MAX: open() would fail with ENAMETOOLONG, an OSError no caller expects
        return f"invalid run id {run_id[:40]!r}...: longer than a file name may be (255 bytes)"
    if run_id in RESERVED_NAMES:
        what = "standing rules" if run_id == RULES_FILE else "index"
        return f"invalid run id {run_id!r}: {run_id} is the run store's {what}, not a run"
    return None


# A run id that names something in the runs dir that is not a run: a file (the index, a
# stray file: ENOTDIR), a folder without a journal (ENOENT), a journal that is a folder.
NOT_A_RUN = (FileNotFoundError, NotADirectoryError, IsADirectoryError)


def default_runs_dir() -> Path:
    """``$TETHER_HOME/runs`` (the harness's default), without importing the harness."""
    return default_home() / "runs"


_WARNED: set[str] = set()


def _home_of(root: Path | str) -> Path | None:
    """``$TETHER_HOME`` when the runs dir ``root`` is inside it (the default store), else None:
    a runs dir elsewhere (``--runs-dir``, ``--store DIR``) is the user's choice of place."""
    home = default_home()
    try:
        inside = Path(os.path.abspath(root)).is_relative_to(os.path.abspath(home))
    except (OSError, ValueError):
        return None
    return home if inside else None


def open_home(root: Path) -> None:
    """On opening a store in the Tether home: make the home ``0700`` if it is missing (now,
    not at the first run: the demo workspace, made before the first run, would otherwise
    make it with the default mode), or warn if it exists with looser modes. The runs dir
    itself is made when a run is created (listing runs creates nothing)."""
    home = _home_of(root)
    if home is None:
        return
    if not home.exists():
        with contextlib.suppress(OSError):  # an unwritable place: said when a run is created
            private_dirs(home)
        return
    check_home(root)


def check_home(root: Path | str) -> str | None:
    """Warn, once per process and on stderr, when the Tether home that holds the runs dir
    ``root`` lets other users in (group or other bits in its mode). The mode is not changed:
    the warning names the ``chmod`` to run. Returns the warning (None when there is none,
    or when it was given already). A runs dir outside ``$TETHER_HOME`` is not judged."""
    home = _home_of(root)
    if home is None:
        return None
    try:
        st = os.stat(home)
    except (OSError, ValueError):
        return None
    mode = st.st_mode & 0o777
    if not stat.S_ISDIR(st.st_mode) or not mode & 0o077:
        return None
    where = os.path.abspath(home)
    if where in _WARNED:
        return None
    _WARNED.add(where)
    how = "readable by other users" if mode & 0o044 else "open to other users"
    words = f"tether: warning: {where} is {how} (mode {mode:04o}); run: chmod 700 {shlex.quote(where)}"
    with contextlib.suppress(OSError, ValueError):
        print(words, file=sys.stderr, flush=True)
    return words
