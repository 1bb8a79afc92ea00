"""An index of run summaries, so that listing runs does not replay every journal.

``<runs_dir>/index.sqlite`` holds one row per run: what a listing shows (status, model,
agent, task, turns, cost, limits, the interruption, timestamps) and the identity of the
journal it was read from (size, ``mtime_ns``, inode). Beside them, one row per decision a
run holds (:func:`tether.approvals.records_of`), written in the same transaction as the
run's row, so ``tether decisions`` lists the whole store's without replaying a journal.
The journals stay the truth; the index is a cache of them that any process may rebuild:

* the process running a run writes its row when it creates the run, on every save that
  changes the status or the interruption, and otherwise at most once a second
  (:data:`INDEX_EVERY_S`) while the run goes on, so a save rarely touches it; a save
  whose decisions changed writes the row and the run's decisions at once, whatever the
  throttle says, and until they are written every save tries again;
* a reader (:meth:`tether.store.files.store.RunStore.summaries`) compares every row with its journal
  in one directory scan (a ``stat`` per run) and replays only the journals that are new
  or changed since their row was written; a missing or corrupt index file is rebuilt
  from the journals.

A row is only ever written from a state together with the journal identity *of that
state* (the writer's ``fstat`` after its append; a reader's ``stat`` before its replay,
so that a concurrent append makes the row look stale, never fresh). A crash between a
commit and its row, a row written by a slower reader over a newer one, a write that
failed: each leaves a row whose identity differs from the journal's, which the next
reader replays. So the index can be behind, never wrong for long.

Why SQLite (the standard library's ``sqlite3``): it is the well-kept, crash-safe choice
for a small file that several processes update at once. In WAL mode readers never block
the writer nor the other way round; ``synchronous=NORMAL`` makes a commit an append to
the WAL without an fsync, which is safe against a crashed process (a power cut may lose
the last commits, never corrupt the file: and then the rows are stale and get replayed);
``busy_timeout`` makes concurrent writers wait their turn instead of failing. A JSON file
rewritten whole would cost the size of the store on every update and need its own
locking; an append-only log of summaries would need compaction. Index errors never fail
a save: the journal is what counts, and readers repair what the index missed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from tether.store.costs import CostQuery, CostRow, missing, ordered, row_of, where as cost_where
from tether.store.decisions import DECISION_COLUMNS, decision_filter, decision_row, decisions_of
from tether.store.private import open_private
from tether.store.files.layout import INDEX_FILE
from tether.store.summary import SUMMARY_COLUMNS, JournalKey, RunSummary

if TYPE_CHECKING:
    from tether.vocab.audit import DecisionQuery, DecisionRecord

log = logging.getLogger(__name__)
T = TypeVar("T")

SCHEMA = 9  # PRAGMA user_version: another value means the tables are rebuilt (2: decisions; 3: source; 4: accounts; 5: workspace; 6: price;
# 7: forked_from; 8: operator; 9: runs_costs)
INDEX_EVERY_S = 1.0
"""A running run's row is refreshed at most this often (besides every change of status)."""
BUSY_S = 5.0
RETRY_AFTER_S = 5.0  # after an index error, a writer leaves the index alone this long

_TABLES = f"""
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, status TEXT NOT NULL, model TEXT, agent TEXT, parent_run_id TEXT, task TEXT,
    turns INTEGER, cost_usd REAL, budget_usd REAL, max_turns INTEGER, created_at REAL, updated_at REAL,
    interruption TEXT, error TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, child_cost_usd REAL,
    per_turn_prompt_tokens TEXT, estimated_turns TEXT, assumed_price INTEGER, answer TEXT, tool_runs INTEGER,
    source TEXT, workspace TEXT, price TEXT, forked_from TEXT, operator TEXT, journal_size INTEGER, journal_mtime_ns INTEGER, journal_ino INTEGER
) WITHOUT ROWID;
-- What tether costs groups and adds, by time: its GROUP BY reads this narrow index, not the wide rows.
CREATE INDEX runs_costs ON runs (created_at, agent, model, source, operator, cost_usd, child_cost_usd, prompt_tokens,
                                 completion_tokens, price);
CREATE TABLE traces (
    run_id TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, ino INTEGER, tool_runs TEXT, ms REAL
) WITHOUT ROWID;
CREATE TABLE decisions (
    run_id TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT, agent TEXT, source TEXT, args TEXT, edited_args TEXT,
    verdict TEXT, words TEXT, decider TEXT, rule TEXT, approvers TEXT, ts REAL NOT NULL, waited_s REAL,
    account TEXT, accounts TEXT, needed INTEGER,
    PRIMARY KEY (run_id, call_id)
) WITHOUT ROWID;
CREATE INDEX decisions_ts ON decisions (ts);
PRAGMA user_version = {SCHEMA};
"""
_UPSERT = (f"INSERT OR REPLACE INTO runs ({', '.join(SUMMARY_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(SUMMARY_COLUMNS))})")
_PUT_DECISION = (f"INSERT OR REPLACE INTO decisions ({', '.join(DECISION_COLUMNS)}) "
                 f"VALUES ({', '.join('?' * len(DECISION_COLUMNS))})")


def _casefold(text: object) -> object:
    return text.casefold() if isinstance(text, str) else text


class Indexed(NamedTuple):
    """What the index says of a run's journal: its identity when the row was written, and
    the run's status then (a :class:`RunSummary` says as much, with the rest of the row)."""

    key: JournalKey
    status: str


class IndexUnavailable(Exception):
    """The index could not be used (locked past the timeout, unwritable, unreadable)."""


# Errors that say nothing about the file's contents: the index is kept and tried again later.
_TRANSIENT = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_FULL", "SQLITE_READONLY", "SQLITE_CANTOPEN",
              "SQLITE_PERM", "SQLITE_NOMEM", "SQLITE_INTERRUPT", "SQLITE_PROTOCOL", "SQLITE_AUTH")


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    """Whether an error means the file itself is bad (not a database, malformed, a schema
    that is not ours): then it is thrown away and rebuilt from the journals."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")  # none: Python's own check, not the file
    return bool(name) and not name.startswith(_TRANSIENT)


class RunIndex:
    """The summaries of the runs under ``runs_dir``, in ``<runs_dir>/index.sqlite``.

    One connection per instance, opened on first use and reopened when the file was
    replaced (a rebuild by another process). Safe to share between threads."""

    def __init__(self, runs_dir: Path | str) -> None:
        self.root = Path(runs_dir)
        self.path = self.root / INDEX_FILE
        self._db: sqlite3.Connection | None = None
        self._ino = -1
        self._lock = threading.Lock()
        self._failed_at = -RETRY_AFTER_S

    # ---- the connection ------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def _connection(self) -> sqlite3.Connection:
        """The open connection, reopened if the file was replaced or deleted since."""
        try:
            ino = os.stat(self.path).st_ino
        except FileNotFoundError:
            ino = -1
        if self._db is not None and ino == self._ino:
            return self._db
        self._close()
        if ino == -1:
            # Made here, mode 0600 (0660 in a shared store), before SQLite opens it: SQLite gives
            # its -wal and -shm files the database's own mode, so the three keep it (docs/run-store.md).
            with contextlib.suppress(OSError):  # no runs dir, a read-only disk: connect says so
                os.close(open_private(self.path, os.O_WRONLY))
        db = sqlite3.connect(self.path, timeout=BUSY_S, isolation_level=None, check_same_thread=False)
        # SQLite's own lower() folds ASCII only: names are folded as Python folds them.
        db.create_function("casefold", 1, _casefold, deterministic=True)
        try:
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_S * 1000)}")
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
                _create(db)
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            self._ino = os.stat(self.path).st_ino
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    def _discard(self) -> None:
        """Remove a bad index file (and its WAL): the next use makes a new one."""
        self._close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        log.warning("the run index %s was unreadable: rebuilt from the journals", self.path)

    def _op(self, fn: Callable[[sqlite3.Connection], T], *, repair: bool = True) -> T:
        """``fn`` on the connection. With ``repair``, a bad file is discarded and ``fn`` tried
        once more on a new one; any other error closes the connection and raises
        :class:`IndexUnavailable`."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    return fn(self._connection())
                except sqlite3.DatabaseError as exc:
                    self._close()
                    if repair and attempt == 1 and _damaged(exc):
                        self._discard()
                        continue
                    raise IndexUnavailable(f"run index {self.path}: {exc}") from exc
                except OSError as exc:
                    self._close()
                    raise IndexUnavailable(f"run index {self.path}: {exc}") from exc
        raise AssertionError("unreachable")

    # ---- reading and writing rows -------------------------------------------------------
    def all(self) -> dict[str, RunSummary]:
        """Every row (a bad file is rebuilt, empty, first)."""
        rows = self._op(lambda db: db.execute(f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM runs").fetchall())
        return {row[0]: RunSummary.from_row(row) for row in rows}

    def keys(self) -> dict[str, Indexed]:
        """Every row's journal identity and status, without the rest of the row: what a
        reader needs to know which rows are stale."""
        rows = self._op(lambda db: db.execute("SELECT run_id, journal_size, journal_mtime_ns, journal_ino, status "
                                              "FROM runs").fetchall())
        return {r[0]: Indexed((r[1], r[2], r[3]), r[4]) for r in rows}

    def get(self, run_id: str) -> RunSummary | None:
        row = self._op(lambda db: db.execute(f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM runs WHERE run_id = ?",
                                             (run_id,)).fetchone())
        return None if row is None else RunSummary.from_row(row)

    def put(self, summaries: Iterable[RunSummary], *, remove: Iterable[str] = (),
            decisions: Mapping[str, Sequence[DecisionRecord]] | None = None) -> None:
        """Write rows (and drop the rows of runs that are gone) in one transaction.
        ``decisions``: run id -> every decision the run holds, replacing its rows."""
        rows = [s.row() for s in summaries]
        gone = [(run_id,) for run_id in remove]
        decided = decisions or {}
        if not rows and not gone and not decided:
            return

        def write(db: sqlite3.Connection) -> None:
            with _transaction(db):
                db.executemany(_UPSERT, rows)
                db.executemany("DELETE FROM runs WHERE run_id = ?", gone)
                db.executemany("DELETE FROM traces WHERE run_id = ?", gone)
                db.executemany("DELETE FROM decisions WHERE run_id = ?", [*gone, *((r,) for r in decided)])
                db.executemany(_PUT_DECISION, [decision_row(d) for records in decided.values() for d in records])

        self._op(write)

    def record(self, summary: RunSummary, decisions: Sequence[DecisionRecord] | None = None) -> bool:
        """The owner's write: one row, and with ``decisions`` the run's decision rows in the
        same transaction; best effort (never raises; False if not written). After an error
        the index is left alone for :data:`RETRY_AFTER_S`: readers replay what it missed,
        and repair a bad file."""
        now = time.monotonic()
        if now - self._failed_at < RETRY_AFTER_S:
            return False
        try:
            if decisions is None:
                self._op(lambda db: db.execute(_UPSERT, summary.row()), repair=False)
            else:
                self._op(lambda db: self._write_run(db, summary, decisions), repair=False)
            return True
        except (IndexUnavailable, sqlite3.Error, OSError) as exc:
            self._failed_at = now
            log.warning("run %s: its summary was not indexed (%s); readers will replay its journal",
                        summary.run_id, exc)
            return False

    @staticmethod
    def _write_run(db: sqlite3.Connection, summary: RunSummary, decisions: Sequence[DecisionRecord]) -> None:
        with _transaction(db):
            db.execute(_UPSERT, summary.row())
            db.execute("DELETE FROM decisions WHERE run_id = ?", (summary.run_id,))
            db.executemany(_PUT_DECISION, [decision_row(d) for d in decisions])

    def decisions(self, query: DecisionQuery) -> list[DecisionRecord]:
        """The decisions ``query`` selects, newest first (raises :class:`IndexUnavailable`)."""
        where, params = decision_filter(
            query, among="EXISTS (SELECT 1 FROM json_each(decisions.{column}) WHERE casefold(value) = %s)",
            fold="casefold")
        text = (f"SELECT {', '.join(DECISION_COLUMNS)} FROM decisions{where} "
                "ORDER BY ts DESC, run_id DESC, call_id DESC").replace("%s", "?")
        if query.limit is not None:
            text += " LIMIT ?"
            params.append(query.limit)
        return decisions_of(self._op(lambda db: db.execute(text, params).fetchall()))

    def costs(self, query: CostQuery) -> list[CostRow]:
        """Spend grouped as ``query`` says, in one aggregate query (raises :class:`IndexUnavailable`).
        SQLite takes the bare ``run_id`` from the row whose own cost is the group's ``max``."""
        key = "date(created_at, 'unixepoch')" if query.by == "day" else f"coalesce({query.by}, '{missing(query.by)}')"
        filtered, params = cost_where(query)
        text = (f"SELECT {key}, count(*), total(cost_usd - coalesce(child_cost_usd, 0)), total(prompt_tokens), "
                "total(completion_tokens), total(price = 'unknown'), run_id, "
                f"max(cost_usd - coalesce(child_cost_usd, 0)) FROM runs{filtered} GROUP BY 1").replace("%s", "?")
        return ordered((row_of(r) for r in self._op(lambda db: db.execute(text, params).fetchall())), query.by)

    def dearest(self, query: CostQuery, limit: int) -> list[RunSummary]:
        """The dearest runs' rows (:meth:`tether.store.protocol.Store.dearest`; raises :class:`IndexUnavailable`)."""
        filtered, params = cost_where(query)
        text = (f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM runs{filtered} "
                "ORDER BY coalesce(cost_usd, 0) - coalesce(child_cost_usd, 0) DESC, run_id LIMIT %s").replace("%s", "?")
        rows = self._op(lambda db: db.execute(text, [*params, limit]).fetchall())
        return [RunSummary.from_row(r) for r in rows]

    # ---- the trace digests (what ``tether runs --json`` reads of each trace) -------------
    def traces(self) -> dict[str, tuple[JournalKey, str, float]]:
        """run id -> (the trace's key when digested, its tool runs as JSON, its ms)."""
        rows = self._op(lambda db: db.execute("SELECT run_id, size, mtime_ns, ino, tool_runs, ms FROM traces")
                        .fetchall())
        return {r[0]: ((r[1], r[2], r[3]), r[4], r[5]) for r in rows}

    def put_traces(self, rows: Iterable[tuple[str, JournalKey, str, float]]) -> None:
        values = [(run_id, *key, tool_runs, ms) for run_id, key, tool_runs, ms in rows]
        if not values:
            return

        def write(db: sqlite3.Connection) -> None:
            with _transaction(db):
                db.executemany("INSERT OR REPLACE INTO traces VALUES (?, ?, ?, ?, ?, ?)", values)

        self._op(write)


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _create(db: sqlite3.Connection) -> None:
    """Make the tables (dropping those of another schema); one creator at a time."""
    with _transaction(db):
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                db.execute(f'DROP TABLE "{name}"')
            for statement in _TABLES.split(";"):
                if statement.strip():
                    db.execute(statement)
