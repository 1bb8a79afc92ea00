"""Runs on disk: one append-only journal per run, so every step costs the same.

Layout of ``<runs_dir>/<run_id>/``:

* ``journal.jsonl``: the run. Two kinds of line: ``{"m": message}`` adds a message to
  the transcript; ``{"commit": header}`` makes everything before it the saved state.
  The header is the run without its transcript (:meth:`RunState.header`), its
  ``message_count``, and, for the list fields that only grow, just the entries added
  since the previous commit. A save is a single ``write`` of its new messages and its
  commit line. Loading keeps the last complete commit; anything after it (a crash
  mid-write leaves at most a torn tail) is cut off before the next write.
* ``trace.jsonl``: the event trace (:mod:`tether.observe.trace`).
* ``ledger.jsonl``: the idempotency ledger of the run's writes (:mod:`tether.run.ledger`).
* ``owner.json``: while a process runs the run, who it is (pid, host, user, since when,
  its command) and its heartbeat; written when it takes the run, removed when it lets go.

``<runs_dir>/index.sqlite`` holds a summary of every run and its decisions
(:mod:`tether.store.index`), so that listing runs, or every decision on the store, does not
replay every journal.

``<runs_dir>/rules.json`` holds the store's standing rules (:mod:`tether.approvals.rules`),
so every process that uses the store sees one set: rewritten whole and atomically under
an ``flock`` of ``<runs_dir>/.rules.lock`` (rules are few and seldom change), with the
next id kept in it so that an id is never given twice; a reader keeps what it parsed
until the file's identity changes, so reading the rules before each call is a ``stat``.

Transcripts are private: the folders the store creates (the runs dir, any missing parent
of it such as ``$TETHER_HOME``, each run's folder) are made ``0700`` and every file in
them ``0600`` (:data:`PRIVATE_DIR`, :data:`PRIVATE_FILE`), whatever the umask. A Tether
home that already exists with looser modes is left as it is, with one warning on stderr
per process naming the ``chmod`` that fixes it (:func:`check_home`).

The process running a run holds an exclusive ``flock`` on the journal's descriptor,
the one its saves append through: one system call, released by the kernel when the
process ends however it ends, and no lock file to create or clean up. That lock, not
``owner.json`` nor its heartbeat, says whether a run is held: a run whose saved status
is ``running`` and whose lock is free is *orphaned* (its process died without stopping
it), whatever ``owner.json`` a killed process left behind; resuming it adopts it.

Rewriting the state each step would make a long run quadratic; here a step writes
its new messages and a header whose size does not grow with the run. A save is one
append to the page cache (microseconds, less than a hop to a worker thread), so it is
made inline; durability against a crashed *process* comes from the single write and
the commit rule, not from fsync (a power cut may lose the last steps, never tear one).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import getpass
import json
import logging
import os
import shlex
import socket
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tether.store.index import (
    INDEX_EVERY_S, INDEX_FILE, IndexUnavailable, JournalKey, Liveness, RunIndex, RunSummary, decisions_key,
)
from tether.run.state import RunState, StateError, Status

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tether.approvals import DecisionQuery, DecisionRecord, Rule
    from tether.store.control import ControlRequest
    from tether.run.events import Event
    from tether.run.ledger import Ledger
    from tether.observe.trace import TraceWriter

log = logging.getLogger(__name__)
T = TypeVar("T")

JOURNAL_FILE = "journal.jsonl"
TRACE_FILE = "trace.jsonl"
LEDGER_FILE = "ledger.jsonl"
OWNER_FILE = "owner.json"
RULES_FILE = "rules.json"
RULES_LOCK = ".rules.lock"
HEARTBEAT_S = 5.0
"""How often the process running a run should call :meth:`RunHandle.heartbeat`."""
# Header fields that only grow: a commit carries what was appended since the last one.
GROWING_FIELDS = ("per_turn_prompt_tokens", "estimated_turns")
# Header fields that seldom change: a commit carries them only when they did (a run's
# agent reference is written at creation and when its MCP tools are first listed).
STICKY_FIELDS = ("agent",)
PRIVATE_DIR = 0o700
"""The mode of every folder the store creates (as ~/.ssh): transcripts are nobody else's."""
PRIVATE_FILE = 0o600
"""The mode of every file the store creates."""
# Names the store keeps in the runs dir for itself: never a run's id.
RESERVED_NAMES = frozenset({*(INDEX_FILE + suffix for suffix in ("", "-wal", "-shm", "-journal")), RULES_FILE})


class SaveError(Exception):
    """A save failed (disk full, I/O error). The previous saved state is intact."""


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def default_home() -> Path:
    """``$TETHER_HOME`` (default ``~/.local/share/tether``), without importing the harness."""
    return Path(os.environ.get("TETHER_HOME") or Path.home() / ".local" / "share" / "tether")


def default_runs_dir() -> Path:
    """``$TETHER_HOME/runs`` (the harness's default), without importing the harness."""
    return default_home() / "runs"


def private_dirs(path: Path | str) -> None:
    """Make the folder ``path`` and whichever of its parents are missing, each ``0700``
    (set after ``mkdir``, so the umask cannot widen or narrow it). Folders that exist are
    left as they are."""
    path = Path(path)
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, PRIVATE_DIR)
        except FileExistsError:
            if folder.is_dir():
                continue  # made by another process meanwhile: its own business
            raise
        os.chmod(folder, PRIVATE_DIR)


def private_file(path: Path | str) -> None:
    """Create ``path`` empty with mode ``0600`` if it does not exist, so that a writer that
    opens it later with ``O_CREAT`` (a trace, the control channel) appends to a private file."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, PRIVATE_FILE))


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


def _open_home(root: Path) -> None:
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


@dataclass(frozen=True, slots=True)
class Owner:
    """Who runs a run: what its ``owner.json`` says, and whether the run's lock is held.

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
    """Alive because the run's keeper lives (:mod:`tether.integrations.keeper`: Claude Code, between its
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
    (:mod:`tether.integrations.keeper`) lives on this host: alive, and ``kept``. None otherwise."""
    from tether.integrations import keeper

    if not keeper.living(kept):
        return None
    since = kept.get("since")
    return Owner(pid=kept["pid"], host=kept["host"], since=since if isinstance(since, (int, float)) else None,
                 command=str(kept.get("command") or "") or None, alive=True, kept=True)


_OWNER_TYPES = {"pid": int, "host": str, "user": str, "since": (int, float), "heartbeat": (int, float),
                "command": str, "control": str}


class RunStore:
    """All runs under one directory (the file implementation of :class:`tether.store.protocol.Store`)."""

    blocking = False  # local appends of microseconds: run inline, even on an event loop

    def __init__(self, runs_dir: Path | str) -> None:
        self.root = Path(runs_dir)
        self.index = RunIndex(self.root)
        self._rules = _RulesFile(self.root)
        self._keepers: dict[str, tuple[JournalKey, Any]] = {}  # run id -> (journal read, its keeper)
        _open_home(self.root)

    @property
    def where(self) -> str:
        """The store, as messages name it: its directory."""
        return str(self.root)

    def run_dir(self, run_id: str) -> Path:
        if not run_id or "/" in run_id or run_id in (".", "..") or "\0" in run_id:
            raise StateError(f"invalid run id {run_id!r}")
        if run_id in RESERVED_NAMES:
            what = "standing rules" if run_id == RULES_FILE else "index"
            raise StateError(f"invalid run id {run_id!r}: {run_id} is the run store's {what}, not a run")
        return self.root / run_id

    def exists(self, run_id: str) -> bool:
        return (self.run_dir(run_id) / JOURNAL_FILE).is_file()

    def run_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.parent.name for p in self.root.glob(f"*/{JOURNAL_FILE}"))

    def load(self, run_id: str) -> RunState:
        """Read a run without taking its lock (for listing and showing)."""
        return _read(self.run_dir(run_id) / JOURNAL_FILE, missing=f"no run {run_id} in {self.root}")[0]

    # ---- summaries, from the index --------------------------------------------------
    def summaries(self, *, live_only: bool = False, problems: dict[str, str] | None = None) -> list[RunSummary]:
        """A summary of every readable run, oldest first, from the index.

        One directory scan (a ``stat`` per journal) finds the runs the index lacks and the
        rows whose journal changed since they were written (size, ``mtime_ns`` or inode
        differ: a crash between a commit and its row, an edit, a compaction); only those
        journals are replayed, and their rows rewritten. The row of a running run whose
        owner is alive is used as it is: the owner rewrites it on every change of status
        and, while it saves, once a second has passed since its last row, so its turns and
        cost may be about a second behind the journal. A missing or unreadable index file
        is rebuilt; an index that cannot be used at all (locked past its timeout, a
        read-only disk) makes this read every journal instead.

        Each summary's ``liveness`` is ``"running"`` or ``"orphaned"`` when its saved status
        is ``running`` (whether a process holds its lock), and ``owner`` who holds it (or
        held it); both None otherwise. ``live_only`` keeps the running runs (orphans
        included) and those waiting for an approval. Unreadable runs are left out; their
        reasons go into ``problems`` when given."""
        out, held = self._refreshed(problems)
        for summary in out:
            if summary.status == "running":
                self._live(summary, held.get(summary.run_id))
        if live_only:
            out = [s for s in out if s.status == "running" or s.waiting]
        out.sort(key=lambda s: s.created_at)
        return out

    def _refreshed(self, problems: dict[str, str] | None, *,
                   rows_wanted: bool = True) -> tuple[list[RunSummary], dict[str, bool]]:
        """Every readable run's row, the index brought up to date with the journals first
        (see :meth:`summaries`): the rows of new or changed journals, and their decisions,
        written from a replay. Also whether each running run whose row was stale is held.
        Without ``rows_wanted`` only the index is brought up to date: the rows that are
        current are not read (only their journals' identity), nor returned."""
        disk = self._scan()
        try:
            rows: dict[str, Any] = {}
            if disk or self.index.path.exists():
                rows = self.index.all() if rows_wanted else self.index.keys()
            usable = True
        except IndexUnavailable as exc:
            log.warning("%s; reading the journals instead", exc)
            rows, usable = {}, False
        held: dict[str, bool] = {}
        out: list[RunSummary] = []
        fresh: list[RunSummary] = []
        decided: dict[str, list[DecisionRecord]] = {}
        for run_id, key in disk.items():
            row = rows.get(run_id)
            if row is not None:
                current = row.key == key
                if not current and row.status == "running":
                    current = held[run_id] = self._held(run_id)
                if current:
                    if rows_wanted:
                        out.append(row)
                    continue
            replayed = self._replay(run_id, key, problems)
            if replayed is not None:
                out.append(replayed[0])
                fresh.append(replayed[0])
                decided[run_id] = replayed[1]
        gone = [run_id for run_id in rows if run_id not in disk]
        if usable and (fresh or gone):
            try:
                self.index.put(fresh, remove=gone, decisions=decided)
            except IndexUnavailable as exc:
                log.warning("%s; the index was not updated", exc)
        return out, held

    def summary(self, run_id: str) -> RunSummary:
        """One run's summary (from the index when its row is current), with its liveness."""
        path = self.run_dir(run_id) / JOURNAL_FILE
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                raise IsADirectoryError(path)
        except _NOT_A_RUN:
            raise StateError(f"no run {run_id} in {self.root}") from None
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        try:
            row = self.index.get(run_id)
        except IndexUnavailable:
            row = None
        held = None
        if row is not None and row.key != key:
            held = self._held(run_id) if row.status == "running" else False
            if not held:
                row = None
        if row is None:
            state = _read(path)[0]
            row = RunSummary.of(state, key)
            with contextlib.suppress(IndexUnavailable):
                self.index.put([row], decisions={run_id: _records(state)})
        if row.status == "running":
            self._live(row, held)
        return row

    def liveness(self, run_id: str) -> Liveness | None:
        """``"running"`` (a process holds the run), ``"orphaned"`` (saved as running, but no
        process holds it) or None (its saved status is not ``running``)."""
        return self.summary(run_id).liveness

    def owner(self, run_id: str) -> Owner | None:
        """Who holds the run, or last held it without letting go (``alive`` says which);
        None when no process holds it and no record was left."""
        held = self._held(run_id)
        kept = None if held else self._kept(run_id)
        if kept is not None:
            return kept
        record = self._owner_record(run_id)
        if record is None:
            return Owner(alive=True) if held else None
        return Owner(**record, alive=held)

    def _live(self, summary: RunSummary, held: bool | None) -> None:
        if held is None:
            held = self._held(summary.run_id)
        summary.liveness = "running" if held else "orphaned"
        record = self._owner_record(summary.run_id)
        summary.owner = Owner(**record, alive=held) if record is not None else Owner(alive=True) if held else None
        kept = None if held or summary.source in ("tether", "acp") else self._kept(summary.run_id)
        if kept is not None:
            summary.liveness, summary.owner = "running", kept

    def _kept(self, run_id: str) -> Owner | None:
        """A run saved ``running`` that no process holds, alive through its keeper
        (:func:`kept_owner`). Its journal is read once per change (a program's runs only)."""
        try:
            st = os.stat(self.run_dir(run_id) / JOURNAL_FILE)
            key = (st.st_size, st.st_mtime_ns, st.st_ino)
            cached = self._keepers.get(run_id)
            if cached is None or cached[0] != key:
                row = self.index.get(run_id)
                kept = None
                if row is None or (row.status == "running" and row.source not in ("tether", "acp")):
                    state = self.load(run_id)
                    spec = state.agent.spec if state.agent is not None else {}
                    kept = spec.get("keeper") if state.status is Status.RUNNING else None
                cached = self._keepers[run_id] = (key, kept)
        except (OSError, StateError, IndexUnavailable):
            return None
        return kept_owner(cached[1]) if cached[1] is not None else None

    def _owner_record(self, run_id: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self.run_dir(run_id) / OWNER_FILE).read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        return {k: data.get(k) if isinstance(data.get(k), t) and not isinstance(data.get(k), bool) else None
                for k, t in _OWNER_TYPES.items()}

    def _held(self, run_id: str) -> bool:
        return lock_held(self.run_dir(run_id) / JOURNAL_FILE)

    def _scan(self) -> dict[str, JournalKey]:
        """Every run directory's journal identity: one ``scandir`` and a ``stat`` per run."""
        found: dict[str, JournalKey] = {}
        try:
            entries = os.scandir(self.root)
        except (FileNotFoundError, NotADirectoryError):
            return found
        with entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    st = os.stat(os.path.join(entry.path, JOURNAL_FILE))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                found[entry.name] = (st.st_size, st.st_mtime_ns, st.st_ino)
        return found

    def _replay(self, run_id: str, key: JournalKey,
                problems: dict[str, str] | None) -> tuple[RunSummary, list[DecisionRecord]] | None:
        """A summary and the decisions from the journal (``key`` was read before it: if the
        journal grows meanwhile, the row looks stale next time rather than fresh)."""
        try:
            state = _read(self.run_dir(run_id) / JOURNAL_FILE)[0]
        except StateError as exc:
            if problems is not None:
                problems[run_id] = str(exc)
            return None
        return RunSummary.of(state, key), _records(state)

    # ---- approvals: the standing rules and the record of decisions -------------------------
    def rules(self) -> list[Rule]:
        """Every rule in ``rules.json``, oldest first: a ``stat`` when it has not changed."""
        return self._rules.read()

    def rule_add(self, rule: Rule) -> Rule:
        """Keep ``rule`` under the next id, in one atomic rewrite of ``rules.json``."""
        from dataclasses import replace

        def add(data: dict[str, Any]) -> Rule:
            number = int(data.get("next") or 1)
            added = replace(rule, id=f"R{number}")
            data["next"] = number + 1
            data["rules"].append(added.to_dict())
            return added

        return self._rules.change(add)

    def rule_remove(self, rule_id: str) -> Rule:
        """Take rule ``rule_id`` out of ``rules.json`` (its id is not given again)."""
        from tether.approvals import Rule

        def remove(data: dict[str, Any]) -> Rule:
            for i, kept in enumerate(data["rules"]):
                if kept.get("id") == rule_id:
                    del data["rules"][i]
                    return Rule.from_dict(kept)
            raise _no_rule(rule_id)

        return self._rules.change(remove)

    def decisions(self, query: DecisionQuery) -> list[DecisionRecord]:
        """From the index, brought up to date first as :meth:`summaries` does (only the
        journals that changed since their row are replayed). An index that cannot be used
        at all makes this read every journal instead, as a listing does."""
        self._refreshed(None, rows_wanted=False)
        try:
            return self.index.decisions(query)
        except IndexUnavailable as exc:
            log.warning("%s; reading the journals instead", exc)
        records = []
        for run_id in self.run_ids():
            with contextlib.suppress(StateError):
                records.extend(r for r in _records(self.load(run_id)) if query.admits(r))
        records.sort(key=lambda r: (r.ts, r.run_id, r.call_id), reverse=True)
        return records[:query.limit] if query.limit is not None else records

    # ---- the control channel and the trace, by run id ------------------------------------
    def control_append(self, run_id: str, request: ControlRequest) -> None:
        from tether.store import control

        directory = self.run_dir(run_id)
        private_file(directory / control.CONTROL_FILE)
        control.append(directory, request)

    def control_read(self, run_id: str, seen: int) -> list[ControlRequest]:
        from tether.store import control

        return control.read_from(self.run_dir(run_id), seen)

    def read_trace(self, run_id: str, after_seq: int = 0) -> Iterator[dict[str, Any]]:
        from tether.observe.trace import read_trace

        records = read_trace(self.run_dir(run_id) / TRACE_FILE)
        if after_seq <= 0:
            return records
        return (r for r in records if isinstance(r.get("seq"), int) and r["seq"] > after_seq)

    def append_event(self, run_id: str, event: Event) -> None:
        from tether.observe.trace import TraceWriter

        path = self.run_dir(run_id) / TRACE_FILE
        private_file(path)
        trace = TraceWriter(path)
        try:
            trace.write(event)
        finally:
            trace.close()

    def create(self, state: RunState) -> None:
        """Save a new run. Its journal appears complete (first commit included) or not at
        all: a crash mid-create leaves nothing to trip over, and of two processes creating
        one id, the second gets "already exists" instead of truncating the first's run.
        Running it is :meth:`open`'s business, like any saved run."""
        directory = self.run_dir(state.run_id)
        try:
            private_dirs(directory)
        except (FileExistsError, NotADirectoryError) as exc:
            raise StateError(f"cannot create run {state.run_id}: {exc.filename or directory} is in the way "
                             f"(a file, not a folder)") from None
        tmp = directory / f".{JOURNAL_FILE}.{os.getpid()}.new"
        _write_private(tmp, _commit_bytes(state.messages, _header(state)))
        try:
            os.link(tmp, directory / JOURNAL_FILE)
        except FileExistsError:
            raise StateError(f"run {state.run_id} already exists") from None
        finally:
            tmp.unlink()
        st = os.stat(directory / JOURNAL_FILE)
        self.index.record(RunSummary.of(state, (st.st_size, st.st_mtime_ns, st.st_ino)),
                          _records(state) if state.approvals else None)

    def open(self, run_id: str, *, control: str | None = None) -> tuple[RunState, RunHandle]:
        """Lock a run for this process and load it; the second process gets a clear error.
        ``control`` is published in ``owner.json`` (where this process takes requests)."""
        directory = self.run_dir(run_id)
        handle = RunHandle(directory, run_id, index=self.index)
        handle.acquire(control=control)
        try:
            state, committed_bytes = _read(directory / JOURNAL_FILE)
            handle.attach(state, committed_bytes)
        except BaseException:
            handle.release()
            raise
        return state, handle


class RunHandle:
    """One process's exclusive hold on a run directory, and its saves.

    With an ``index``, a save also refreshes the run's summary there when its status or
    interruption changed, and otherwise at most every :data:`~tether.store.index.INDEX_EVERY_S`."""

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
        from tether.observe.trace import TraceWriter

        private_file(self.trace_path)
        return TraceWriter(self.trace_path, secrets=secrets)

    def ledger(self) -> Ledger:
        """The run's idempotency ledger (``ledger.jsonl``: every record fsynced as it is made)."""
        from tether.run.ledger import Ledger

        return Ledger(self.ledger_path)

    def control_read(self, seen: int) -> list[ControlRequest]:
        from tether.store import control

        return control.read_from(self.directory, seen)

    def acquire(self, *, control: str | None = None) -> None:
        """Open the journal for appending and lock it; a run someone else holds is refused.
        Then write ``owner.json``: who holds it, since when, and ``control`` if given."""
        path = self.directory / JOURNAL_FILE
        try:
            fd = os.open(path, os.O_WRONLY)
        except _NOT_A_RUN:
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
        self._owner = {"pid": os.getpid(), **_whoami(), "since": now, "heartbeat": now}
        if control is not None:
            self._owner["control"] = control
        self._write_owner()

    def heartbeat(self) -> None:
        """Say the owner is still at it: rewrite ``owner.json`` with the time now. Call it
        every :data:`HEARTBEAT_S` while the run is held (liveness itself is the lock's)."""
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
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, PRIVATE_FILE)
            try:
                os.write(fd, _dumps(self._owner).encode())
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
        self._sticky = {f: state.header()[f] for f in STICKY_FIELDS} if committed_bytes else {}
        # The row is taken to say what was loaded (the creator wrote it, or the last owner on
        # its last change of status); if it does not, it is stale, and readers replay it.
        self._indexed, self._indexed_at = (state.status, state.interruption), time.monotonic()
        # Decisions are not taken on trust: a run that holds some writes them with its first
        # save (a crash may have kept the last owner from writing them).
        self._decided = () if not state.approvals else None

    def save(self, state: RunState) -> None:
        """Commit the state: its new messages and a header, in one write."""
        header = _header(state, since=self._grown)
        sticky = {f: header[f] for f in STICKY_FIELDS}
        for name in STICKY_FIELDS:
            if name in self._sticky and self._sticky[name] == header[name]:
                del header[name]
        data = _commit_bytes(state.messages[self._messages:], header)
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
        self._sticky = sticky
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
        records = _records(state) if decided != self._decided else None
        written = self._index.record(RunSummary.of(state, (st.st_size, st.st_mtime_ns, st.st_ino)),  # type: ignore[union-attr]
                                     records)
        if written and records is not None:
            self._decided = decided

    def _append(self, data: bytes) -> None:
        written = os.write(self._fd, data)
        if written != len(data):
            raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")

    def compact(self, state: RunState) -> None:
        """Rewrite the journal as the state alone (one commit), atomically. The new file is
        locked before it replaces the old one, so the run is never unheld in between."""
        tmp = self.directory / f".{JOURNAL_FILE}.{os.getpid()}.tmp"
        data = _commit_bytes(state.messages, _header(state))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, PRIVATE_FILE)
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


def has_workers(store: Any) -> bool:
    """Whether queue workers may hold runs of ``store``: a database's (PostgreSQL); the file
    store has none, and a command on it does not pay for importing the workers' modules."""
    return not isinstance(store, RunStore)


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


_WHOAMI: dict[str, str] = {}


def _whoami() -> dict[str, str]:
    """This process's host, user and command, for ``owner.json`` (computed once)."""
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
    _whoami()["command"] = words[:80]


# A run id that names something in the runs dir that is not a run: a file (the index, a
# stray file: ENOTDIR), a folder without a journal (ENOENT), a journal that is a folder.
_NOT_A_RUN = (FileNotFoundError, NotADirectoryError, IsADirectoryError)


def _records(state: RunState) -> list[DecisionRecord]:
    from tether.approvals import records_of

    return list(records_of(state))


def _no_rule(rule_id: str) -> Exception:
    from tether.approvals import RuleError

    return RuleError(f"no rule {rule_id} on this store; tether rules lists them")


class _RulesFile:
    """``<runs_dir>/rules.json``: ``{"next": N, "rules": [...]}`` (see the module)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / RULES_FILE
        self._key: JournalKey | None = None
        self._rules: list[Rule] = []

    def read(self) -> list[Rule]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        if key != self._key:  # replaced since it was parsed (every write is a new file)
            rules = self._parse(self._load())
            self._key, self._rules = key, rules
        return list(self._rules)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {"next": 1, "rules": []}
        except (OSError, ValueError) as exc:
            raise StateError(f"the store's rules in {self.path} cannot be read ({exc}); fix the file "
                             "or move it away") from None
        if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
            raise StateError(f"the store's rules in {self.path} are not a rules file; fix it or move it away")
        return data

    def _parse(self, data: dict[str, Any]) -> list[Rule]:
        from tether.approvals import Rule

        try:
            return [Rule.from_dict(r) for r in data["rules"]]
        except (TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"a rule in {self.path} cannot be read ({exc}); fix the file or move it away") from None

    def change(self, edit: Callable[[dict[str, Any]], T]) -> T:
        """``edit(data)`` on the rules as they are now, under the lock, then the file replaced
        (written and synced first: a crash leaves the old rules or the new ones); its result."""
        private_dirs(self.root)
        lock = os.open(self.root / RULES_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._load()
            self._parse(data)  # a file this process cannot read is not written over
            result = edit(data)
            tmp = self.root / f".{RULES_FILE}.{os.getpid()}.tmp"
            _write_private(tmp, (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode(), sync=True)
            os.replace(tmp, self.path)
            return result
        finally:
            os.close(lock)  # drops the lock


def _write_private(path: Path, data: bytes, *, sync: bool = False) -> None:
    """Write a new file of mode ``0600`` (truncating any left by a crashed process)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _header(state: RunState, since: dict[str, int] | None = None) -> dict[str, Any]:
    return {**state.header(since), "message_count": len(state.messages)}


def _commit_bytes(messages: list[dict[str, Any]], header: dict[str, Any]) -> bytes:
    """Journal lines for ``messages`` followed by the commit of ``header``."""
    lines = [_dumps({"m": m}) for m in messages]
    lines.append(_dumps({"commit": header}))
    return ("\n".join(lines) + "\n").encode()


def _read(path: Path, *, missing: str | None = None) -> tuple[RunState, int]:
    """Replay a journal up to its last complete commit; return the state and where it ends.
    No journal there (or something else in its place) is a StateError saying ``missing``."""
    messages: list[dict[str, Any]] = []
    uncommitted: list[dict[str, Any]] = []
    grown: dict[str, list[Any]] = {f: [] for f in GROWING_FIELDS}
    header: dict[str, Any] | None = None
    sticky: dict[str, Any] = {}
    committed_bytes = offset = 0
    try:
        f = open(path, "rb")
    except _NOT_A_RUN:
        raise StateError(missing or f"no saved run at {path}") from None
    with f:
        for number, line in enumerate(f, 1):
            offset += len(line)
            if not line.endswith(b"\n"):
                break  # a torn tail: the write a crash interrupted
            try:
                record = json.loads(line)
                if "m" in record:
                    uncommitted.append(record["m"])
                    continue
                header = dict(record["commit"])
                for name in GROWING_FIELDS:
                    grown[name].extend(header.pop(name, ()))
                for name in STICKY_FIELDS:
                    if name in header:
                        sticky[name] = header[name]
                    elif name in sticky:
                        header[name] = sticky[name]
            except (ValueError, TypeError, KeyError) as exc:
                raise StateError(f"corrupt journal {path} at line {number}: {exc}") from None
            messages.extend(uncommitted)
            uncommitted.clear()
            committed_bytes = offset
            if header.get("message_count") != len(messages):
                raise StateError(f"corrupt journal {path} at line {number}: "
                                 f"{len(messages)} messages, the commit says {header.get('message_count')}")
    if header is None:
        raise StateError(f"corrupt journal {path}: no committed state")
    del header["message_count"]
    return RunState.from_dict({**header, **grown, "messages": messages}), committed_bytes
