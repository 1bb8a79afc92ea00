"""One process's hold on a run of the file store: the journal's lock, and the saves through it.

:meth:`tether.store.files.store.RunStore.open` gives a :class:`RunHandle`: the journal opened
for appending and ``flock``-ed (:mod:`tether.store.files.lock`), ``owner.json`` written. A save
is one ``write`` of the step's new messages and a commit (:mod:`tether.store.files.journal`) to
the page cache: microseconds, less than a hop to a worker thread, so it is made inline
(``blocking = False``). A save also refreshes the run's row in the index
(:mod:`tether.store.files.index`) when its status, its interruption or its decisions changed,
and otherwise at most once every :data:`~tether.store.files.index.INDEX_EVERY_S`.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.vocab.audit import records_of
from tether.vocab.ledger import Ledger
from tether.vocab.state import RunState, StateError
from tether.store.decisions import decisions_key
from tether.store.files.control import read_from
from tether.store.files.index import INDEX_EVERY_S, RunIndex
from tether.store.files.journal import GROWING_FIELDS, STICKY_FIELDS, commit_bytes, dumps, header_of
from tether.store.private import open_private, private_file
from tether.store.files.layout import JOURNAL_FILE, LEDGER_FILE, NOT_A_RUN, OWNER_FILE, TRACE_FILE
from tether.store.owner import whoami
from tether.store.protocol import SaveError
from tether.store.summary import RunSummary
from tether.store.trace import TraceWriter

if TYPE_CHECKING:
    from tether.vocab.audit import DecisionRecord
    from tether.store.control import ControlRequest

log = logging.getLogger(__name__)


class RunHandle:
    """One process's exclusive hold on a run directory, and its saves.

    With an ``index``, a save also refreshes the run's summary there when its status or
    interruption changed, and otherwise at most every :data:`~tether.store.files.index.INDEX_EVERY_S`."""

    blocking = False

    def __init__(self, directory: Path, run_id: str, *, index: RunIndex | None = None) -> None:
        self.directory = directory
        self.run_id = run_id
        self._fd = -1
        self._messages = 0
        self._grown = dict.fromkeys(GROWING_FIELDS, 0)
        self._sticky: dict[str, Any] = {}
        self._index = index
        self._indexed: tuple[Any, Any] | None = None  # (status, interruption) of the last row written
        self._indexed_at = 0.0
        self._decided: tuple[Any, ...] | None = None  # the decisions the index holds (index.decisions_key)
        self._owner: dict[str, Any] | None = None

    @property
    def trace_path(self) -> Path:
        return self.directory / TRACE_FILE

    @property
    def ledger_path(self) -> Path:
        return self.directory / LEDGER_FILE

    @property
    def scratch_dir(self) -> Path:
        return self.directory

    def trace(self, secrets: tuple[str, ...] = ()) -> TraceWriter:
        """The run's trace writer (``trace.jsonl``), ``seq`` going on from its last line."""
        private_file(self.trace_path)
        return TraceWriter(self.trace_path, secrets=secrets)

    def ledger(self) -> Ledger:
        """The run's idempotency ledger (``ledger.jsonl``: every record fsynced as it is made)."""
        private_file(self.ledger_path)  # made here, of the store's mode: the ledger opens it to append
        return Ledger(self.ledger_path)

    def control_read(self, seen: int) -> list[ControlRequest]:
        return read_from(self.directory, seen)

    def acquire(self, *, control: str | None = None) -> None:
        """Open the journal for appending and lock it; a run someone else holds is refused.
        Then write ``owner.json``: who holds it, since when, and ``control`` if given."""
        path = self.directory / JOURNAL_FILE
        try:
            fd = os.open(path, os.O_WRONLY)
        except NOT_A_RUN:
            raise StateError(f"no run {self.run_id} in {self.directory.parent}") from None
        try:
            # A reader probing the lock (:func:`lock_held`) holds it shared for microseconds:
            # ask again briefly before calling the run taken.
            for pause in (0.0005, 0.001, 0.002, 0.004, None):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if pause is None:
                        raise
                    time.sleep(pause)
        except BlockingIOError:
            os.close(fd)
            raise StateError(f"run {self.run_id} is already being run by another process "
                             f"(it holds the lock on {path})") from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        now = time.time()
        self._owner = {"pid": os.getpid(), **whoami(), "since": now, "heartbeat": now}
        if control is not None:
            self._owner["control"] = control
        self._write_owner()

    def heartbeat(self) -> None:
        """Say the owner is still at it: rewrite ``owner.json`` with the time now. Call it
        every :data:`tether.store.owner.HEARTBEAT_S` while the run is held (liveness itself is the lock's)."""
        if self._fd >= 0 and self._owner is not None:
            self._owner["heartbeat"] = time.time()
            self._write_owner()

    @property
    def owner(self) -> dict[str, Any] | None:
        """This process's ``owner.json`` record while it holds the run."""
        return dict(self._owner) if self._owner is not None and self._fd >= 0 else None

    def _write_owner(self) -> None:
        """Replace ``owner.json`` atomically (a reader sees the old record or the new one).
        Best effort: the record informs, the lock decides."""
        tmp = f"{self.directory}/.{OWNER_FILE}.{os.getpid()}.tmp"
        try:
            fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, dumps(self._owner).encode())
            finally:
                os.close(fd)
            os.replace(tmp, f"{self.directory}/{OWNER_FILE}")
        except OSError as exc:
            log.warning("run %s: could not write %s: %s", self.run_id, OWNER_FILE, exc)
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def release(self) -> None:
        """Remove ``owner.json``, then close the descriptor, which drops the lock (in that
        order: the next owner's record is never the one removed)."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self.directory / OWNER_FILE)
            os.close(self._fd)
            self._fd = -1
            self._owner = None

    def abandon(self) -> None:
        """Let go as a killed process would: the lock drops, ``owner.json`` stays behind
        (for the crash tests)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._owner = None

    def attach(self, state: RunState, committed_bytes: int) -> None:
        """Start appending after the last commit, cutting off anything a crash left past it."""
        if os.fstat(self._fd).st_size != committed_bytes:
            os.ftruncate(self._fd, committed_bytes)
        os.lseek(self._fd, committed_bytes, os.SEEK_SET)
        self._messages = len(state.messages) if committed_bytes else 0
        self._grown = {f: len(getattr(state, f)) if committed_bytes else 0 for f in GROWING_FIELDS}
        header = state.header() if committed_bytes else {}
        self._sticky = {f: copy.deepcopy(header[f]) for f in header if f in STICKY_FIELDS}
        # The row is taken to say what was loaded (the creator wrote it, or the last owner on
        # its last change of status); if it does not, it is stale, and readers replay it.
        self._indexed, self._indexed_at = (state.status, state.interruption), time.monotonic()
        # Decisions are not taken on trust: a run that holds some writes them with its first
        # save (a crash may have kept the last owner from writing them).
        self._decided = () if not state.approvals else None

    def save(self, state: RunState) -> None:
        """Commit the state: its new messages and a header, in one write."""
        header = header_of(state, since=self._grown)
        changed = {}
        for name in STICKY_FIELDS:
            if name in self._sticky and self._sticky[name] == header[name]:
                del header[name]
            else:
                # A copy, not the value: a header shares the lists and dicts inside the state
                # (a call's approvers, a merge's question), which a later step may change in place.
                changed[name] = copy.deepcopy(header[name])
        data = commit_bytes(state.messages[self._messages:], header)
        start = os.lseek(self._fd, 0, os.SEEK_CUR)
        try:
            self._append(data)
        except OSError as exc:
            # Cut back to the last commit, so the next save does not follow a torn line.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
                os.lseek(self._fd, start, os.SEEK_SET)
            raise SaveError(f"could not save run {self.run_id}: {exc.strerror or exc}") from exc
        self._messages = len(state.messages)
        self._grown = {f: len(getattr(state, f)) for f in GROWING_FIELDS}
        self._sticky.update(changed)
        if self._index is not None:
            now = time.monotonic()
            indexed = self._indexed
            decided = decisions_key(state)
            if (indexed is None or indexed[0] is not state.status or indexed[1] != state.interruption
                    or now - self._indexed_at >= INDEX_EVERY_S or decided != self._decided):
                self._index_row(state, now, decided)

    async def asave(self, state: RunState) -> None:
        """:meth:`save`, inline: one append to the page cache costs less than a thread hop."""
        self.save(state)

    def _index_row(self, state: RunState, now: float, decided: tuple[Any, ...]) -> None:
        """Write the run's summary with the journal's identity as this save left it, and
        its decisions with it when they changed. Decisions not written (an index error) are
        tried again by every save until they are: a row written later without them would
        look current, and no reader would replay the journal that holds them."""
        st = os.fstat(self._fd)
        self._indexed, self._indexed_at = (state.status, state.interruption), now
        records = decision_records(state) if decided != self._decided else None
        written = self._index.record(RunSummary.of(state, (st.st_size, st.st_mtime_ns, st.st_ino)),  # type: ignore[union-attr]
                                     records)
        if written and records is not None:
            self._decided = decided

    def _append(self, data: bytes) -> None:
        written = os.write(self._fd, data)
        if written != len(data):
            raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")

    def rewrite(self, state: RunState, start: int) -> None:
        """Save ``state``, whose transcript was changed from message ``start`` on (a rewind):
        the journal is rewritten as it (:meth:`compact`), atomically."""
        self.compact(state)

    def compact(self, state: RunState) -> None:
        """Rewrite the journal as the state alone (one commit), atomically. The new file is
        locked before it replaces the old one, so the run is never unheld in between."""
        tmp = self.directory / f".{JOURNAL_FILE}.{os.getpid()}.tmp"
        data = commit_bytes(state.messages, header_of(state))
        fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a file no one else knows yet
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, "short write while compacting")
            os.replace(tmp, self.directory / JOURNAL_FILE)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(self._fd)
        self._fd = fd
        self.attach(state, len(data))



def decision_records(state: RunState) -> list[DecisionRecord]:
    """The decisions ``state`` holds, as the index keeps them."""
    return list(records_of(state))
