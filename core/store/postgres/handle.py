"""One process's hold on a run of the PostgreSQL store, and its saves.

:meth:`tether.store.postgres.store.PgStore.open` gives a :class:`PgHandle`: the run's advisory
lock taken on the store's holding session (:mod:`tether.store.postgres.locks`), with an owner
token that fences every save.

**A save is one transaction**: the step's new messages, the header and summary, the ledger
results recorded since the last save, and the trace lines emitted since then, sent in one
statement. It either happens whole or not at all; so a write's result is in the ledger
exactly when the transcript holds the result it gave the model. Saves go through the
store's pool, fenced by the run's ``owner_token``: every save checks it in its own statement,
so an owner whose lock was lost and taken by another process cannot write over its
successor; and before each save the holding session is looked at (a socket poll, no round
trip): one the server has ended is replaced, and the run's lock taken again on the new one,
only if its token is still the run's. A save that finds the database gone waits for it
(:data:`tether.store.postgres.connection.RECONNECT_S`) and writes what is missing, nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from tether.store.trace import stamped_line
from tether.vocab.ledger import LedgerEntry
from tether.vocab.state import RunState, StateError
from tether.store.changes import JOURNAL, OWNER, TRACE
from tether.store.decisions import decisions_key
from tether.store.owner import whoami
from tether.store.postgres.connection import RECONNECT_S, StoreUnavailable, clean
from tether.store.postgres.rows import address_in, decisions_json, read_control, summary_row
from tether.store.postgres.schema import FLUSH, SAVE, SAVE_AGAIN, TAKE, dumps, notice
from tether.store.protocol import SaveError

if TYPE_CHECKING:
    from tether.vocab.events import Event
    from tether.store.control import ControlRequest
    from tether.store.postgres.database import Database

log = logging.getLogger(__name__)

_RETRY_S = 1.0

class _Lost(SaveError):
    """An owner's session went away with the server (the run may still be the owner's)."""



class PgHandle:
    """One process's hold on one run: the run's advisory lock, on the store's holding session,
    and the owner token every save of the run (through the store's pool) is fenced by."""

    blocking = True

    def __init__(self, store: Database, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self._holds = store._holds
        self._lock = threading.RLock()  # one save, flush or release of this run at a time
        self._key: int | None = None  # the run's lock key
        self._generation: int | None = None  # the holding session the lock was taken on
        self._token: str | None = None
        self._owner: dict[str, Any] | None = None
        self._messages = 0
        self._seq = 0
        self._trace_lines: list[tuple[int, str]] = []  # emitted since the last save
        self._done: dict[str, str] = {}  # ledger results recorded since the last save
        self._buffers = threading.Lock()
        self._ledger: PgLedger | None = None
        self._released = False
        self._flusher: object | None = None  # armed by the first line no save has taken (_arm)
        self._lost = False  # a statement's connection went away; the run may still be ours
        self._saving = 0  # saves whose lines are taken but not committed yet
        self._decided: tuple[Any, ...] | None = None  # the decisions the table holds (index.decisions_key)

    @property
    def scratch_dir(self) -> None:
        return None

    @property
    def owner(self) -> dict[str, Any] | None:
        return dict(self._owner) if self._owner is not None else None

    def _q(self, text: str) -> sql.SQL:
        return self.store.q(text)

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        """A connection of the store's pool, once this handle's lock is known to be held: a
        holding session the server ended is replaced first, and the lock taken again
        (:meth:`_reattach`)."""
        with self._lock:
            if self._released:
                raise SaveError(f"run {self.run_id}: this process no longer holds it")
            holds = self._holds
            # The holding session is looked at unless another run of this store is using it
            # this instant (that one finds it ended, if it is, and each run then takes its
            # lock again): a save never waits for another run's open.
            if self._token is not None and holds.lock.acquire(
                    blocking=self._lost or self._generation != holds.generation):
                try:
                    try:
                        session, generation = holds.session()
                    except StoreUnavailable as exc:
                        self._lost = True
                        raise _Lost(f"run {self.run_id}: the database {self.store.where} is not back: {exc}") from None
                    if self._lost or generation != self._generation:
                        self._reattach(session, generation)
                finally:
                    holds.lock.release()
            try:
                with self.store._pool.connection() as conn:
                    yield conn
            except (psycopg.OperationalError, psycopg.InterfaceError, StoreUnavailable) as exc:
                # The statement's connection is gone (the pool drops it). The run is still
                # ours if nobody took it meanwhile: the next use checks the lock and the token.
                self._lost = self._token is not None
                words = clean(exc, self.store.url) if isinstance(exc, psycopg.Error) else str(exc)
                raise _Lost(f"run {self.run_id}: lost the connection to {self.store.where}: {words}") from None

    def _reattach(self, session: psycopg.Connection, generation: int) -> None:
        """After a lost connection (called holding the holding session's lock): on a holding
        session that is new, the run's lock taken again and the token checked, so the run goes
        on only if no other process took it while the database was away."""
        if generation == self._generation:
            self._lost = False  # only a pooled connection was lost: the lock is held still
            return
        try:
            got = session.execute(self._q("SELECT pg_try_advisory_lock(lock_key), owner_token FROM {s}.runs "
                                          "WHERE run_id = %s"), (self.run_id,)).fetchone()
            if got is None or not got[0] or got[1] != self._token:
                if got is not None and got[0]:
                    session.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
                self._token = None
                self._lost = False
                self._let_go()
                raise SaveError(f"run {self.run_id}: lost the connection to {self.store.where}, and another "
                                f"process took the run meanwhile; this process lets go of it")
            session.execute(self._q("UPDATE {s}.owners SET backend_pid = pg_backend_pid() WHERE run_id = %s "
                                    "AND token = %s"), (self.run_id, self._token))
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            self._holds.broken()
            self._lost = True
            raise _Lost(f"run {self.run_id}: the database {self.store.where} is not back: "
                        f"{clean(exc, self.store.url)}") from None
        self._generation = generation
        self._lost = False
        log.warning("run %s: the connection to %s was lost and is back; the run goes on", self.run_id, self.store.where)

    def _let_go(self) -> None:
        """No longer this store's run: a later open of it here is not refused."""
        with self._holds.lock:
            if self._holds.held.get(self.run_id) is self:
                del self._holds.held[self.run_id]

    def acquire(self, *, control: str | None = None) -> RunState:
        """Take the run, then load it: the lock, the token, the owner record and its
        notification in one statement on the holding session (which writes nothing unless the
        lock was free), then the messages and the last ``seq`` through the pool."""
        token = uuid.uuid4().hex
        now = time.time()
        owner = {"pid": os.getpid(), **whoami(), "since": now, "heartbeat": now}
        if control is not None:
            owner["control"] = control
        with self._lock:
            pauses = iter((0.0005, 0.001, 0.002, 0.004))  # a note being traced holds the lock for an instant
            while True:
                taken = self._take(token, owner)
                if taken is not None:
                    header, count = taken
                    break
                pause = next(pauses, None)
                if pause is None:
                    other = self.store.owner(self.run_id)
                    who = (f" (pid {other.pid} on {other.host})"
                           if other is not None and other.pid is not None else "")
                    raise StateError(f"run {self.run_id} is already being run by another process{who}: it "
                                     f"holds the run's lock in the database {self.store.where}; wait for it, "
                                     f"or stop it")
                time.sleep(pause)
            self._token, self._owner = token, owner
            try:
                with self.store._pool.connection() as conn, conn.pipeline():
                    # Nobody else writes a run whose lock this process holds: one snapshot is not needed.
                    messages = conn.execute(self._q("SELECT message FROM {s}.messages WHERE run_id = %s "
                                                    "ORDER BY idx"), (self.run_id,))
                    last = conn.execute(self._q("SELECT coalesce(max(seq), 0) FROM {s}.trace WHERE run_id = %s"),
                                        (self.run_id,))
                loaded = [m for (m,) in messages.fetchall()][:count]
                seq = last.fetchone()[0]
            except psycopg.OperationalError as exc:
                raise StoreUnavailable(f"{self.store.where}: {clean(exc, self.store.url)}") from None
            if len(loaded) != count:
                raise StateError(f"run {self.run_id}: {len(loaded)} messages stored, its header says {count}")
            state = RunState.from_dict({**header, "messages": loaded})
            self._seq = seq
            self._messages = len(state.messages)
            self._decided = () if not state.approvals else None  # written again by the first save
            return state

    def _take(self, token: str, owner: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
        """The taking statement (:data:`TAKE`) on the holding session: the run's header and
        message count, or None when another session holds the lock (nothing was written);
        StateError when there is no such run, or when this store holds it already."""
        run_id = self.run_id
        holds = self._holds
        with holds.lock:
            if run_id in holds.held:
                raise StateError(f"run {run_id} is already being run by another process (this one, pid "
                                 f"{os.getpid()}, holds it); wait for it, or stop it")
            params = {"run": run_id, "token": token, "pid": owner["pid"], "host": owner.get("host"),
                      "user": owner.get("user"), "since": owner["since"], "heartbeat": owner["heartbeat"],
                      "command": owner.get("command"), "control": address_in(owner.get("control")),
                      "channel": self.store.channel, "notice": notice(run_id, OWNER)}
            for fresh in (False, True):
                try:
                    session, generation = holds.session()
                    got, header, count, _, key = session.execute(self._q(TAKE), params).fetchone()
                    break
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    # A session the server has since ended: once more, on a new one.
                    holds.broken()
                    if fresh:
                        raise StoreUnavailable(f"{self.store.where}: {clean(exc, self.store.url)}") from None
            if got is None:
                raise StateError(f"no run {run_id} in {self.store.where}")
            if not got:
                return None
            holds.held[run_id] = self
            self._key, self._generation = key, generation
        return header, count

    # ---- saving -------------------------------------------------------------------------
    def _snapshot(self, state: RunState) -> tuple[Any, ...]:
        """What a save writes, read from the state now (on the caller's thread), and the
        trace lines and ledger results waiting for it, taken out of their buffers."""
        with self._buffers:
            lines, self._trace_lines = self._trace_lines, []
            done, self._done = self._done, {}
            self._saving += 1
        new = [(self.run_id, i, dumps(m)) for i, m in enumerate(state.messages[self._messages:], self._messages)]
        decided = decisions_key(state)
        decisions = decisions_json(state) if decided != self._decided else "[]"
        return (state.status.value, state.updated_at, len(state.messages), dumps(state.header()),
                summary_row(state), new, lines, done, decisions, decided)

    def _commit(self, snap: tuple[Any, ...], cut: int | None = None) -> None:
        """The save's statements in one pipeline: one round trip to the server. The first
        divides by zero unless this handle's token is still the run's, so a fenced owner's
        transaction aborts before it writes anything. The run's decisions go with it when
        they changed since the last save that committed."""
        status, updated_at, count, header, summary, new, lines, done, decisions, decided = snap
        deadline = time.monotonic() + RECONNECT_S
        try:
            while True:
                try:
                    self._commit_locked(status, updated_at, count, header, summary, new, lines, done,
                                        decisions, again=self._lost and cut is None, cut=cut)
                    break
                except _Lost as exc:
                    # The database went away. Its transaction either committed or not: the
                    # retry writes what is missing and nothing twice (the turn is not paid again).
                    if time.monotonic() + _RETRY_S > deadline:
                        self._restore(lines, done)
                        self._token = None
                        raise SaveError(f"could not save run {self.run_id}: {exc}; gave up after "
                                        f"{RECONNECT_S:.0f} s. The run is left as it was last saved, "
                                        f"and tether resume {self.run_id} goes on from there") from None
                    time.sleep(_RETRY_S)
                except SaveError:
                    self._restore(lines, done)
                    raise
        finally:
            with self._buffers:
                self._saving -= 1
        self._messages = count
        self._decided = decided

    def _commit_locked(self, status: str, updated_at: float, count: int, header: str, summary: dict[str, Any],
                       new: list[tuple[str, int, str]], lines: list[tuple[int, str]], done: dict[str, str],
                       decisions: str, *, again: bool = False, cut: int | None = None) -> None:
        try:
            with self._conn() as conn, (conn.transaction() if cut is not None else contextlib.nullcontext()):
                if cut is not None:  # a rewind: the messages from ``cut`` on go, in this transaction
                    conn.execute(self._q("DELETE FROM {s}.messages WHERE run_id = %s AND idx >= %s"),
                                 (self.run_id, cut))
                conn.execute(self._q(SAVE_AGAIN if again else SAVE), {
                    "run": self.run_id, "token": self._token, "status": status, "updated_at": updated_at,
                    "count": count, "header": header, **summary,
                    "idxs": [i for _, i, _ in new], "messages": [m for _, _, m in new],
                    "seqs": [seq for seq, _ in lines], "records": [line for _, line in lines],
                    "keys": list(done), "results": list(done.values()), "decisions": decisions,
                    "channel": self.store.channel, "journal": notice(self.run_id, JOURNAL),
                    "traced": bool(lines), "trace": notice(self.run_id, TRACE)})
        except psycopg.errors.DivisionByZero:
            raise SaveError(f"could not save run {self.run_id}: another process has taken it over") from None
        except psycopg.Error as exc:
            raise SaveError(f"could not save run {self.run_id}: {clean(exc, self.store.url)}") from None

    def _restore(self, lines: list[tuple[int, str]], done: dict[str, str]) -> None:
        with self._buffers:
            self._trace_lines[:0] = lines
            self._done = {**done, **self._done}

    def rewrite(self, state: RunState, start: int) -> None:
        """Save ``state``, whose transcript was changed from message ``start`` on (a rewind):
        the stored messages from there are deleted in the save's own transaction."""
        self._messages = min(self._messages, start)
        self._commit(self._snapshot(state), cut=start)

    def save(self, state: RunState) -> None:
        """One transaction: the new messages, the header and summary, the ledger results and
        the trace lines since the last save (see the module)."""
        self._commit(self._snapshot(state))

    async def asave(self, state: RunState) -> None:
        snap = self._snapshot(state)
        await asyncio.to_thread(self._commit, snap)

    # ---- the trace and the ledger -------------------------------------------------------
    def trace(self, secrets: tuple[str, ...] = ()) -> PgTrace:
        return PgTrace(self, secrets)

    def _trace_line(self, record_line: str, seq: int) -> None:
        with self._buffers:
            self._trace_lines.append((seq, record_line))
            if self._flusher is None and not self._released:
                self._arm()

    def _arm(self) -> None:
        """Commit the pending lines in :data:`TRACE_FLUSH_S` unless a save takes them first
        (called holding ``_buffers``; the store's timer calls :meth:`_flush` with this mark,
        which a disarm or a later arm makes stale)."""
        mark = self._flusher = object()
        self.store._flushes.later(lambda: self._flush(mark))

    def _flush(self, mark: object) -> None:
        """The trace lines no save took, in a statement of their own (:data:`FLUSH`), fenced
        by the owner's token like a save, with a ``trace`` notification. Lines are committed in ``seq``
        order: while a save that took earlier lines is still committing them, this waits
        for the next round (a follower reads after the last ``seq`` it saw)."""
        with self._lock:
            with self._buffers:
                if self._flusher is not mark:
                    return  # disarmed, or armed again since
                self._flusher = None
                if self._released or self._token is None or not self._trace_lines:
                    return
                if self._saving:
                    self._arm()
                    return
                lines, self._trace_lines = self._trace_lines, []
            try:
                with self._conn() as conn:
                    conn.execute(self._q(FLUSH), {
                        "run": self.run_id, "token": self._token, "seqs": [seq for seq, _ in lines],
                        "records": [line for _, line in lines], "channel": self.store.channel,
                        "trace": notice(self.run_id, TRACE)})
            except psycopg.errors.DivisionByZero:
                self._restore(lines, {})
                log.warning("run %s: trace lines not committed: another process has taken the run over", self.run_id)
            except (SaveError, psycopg.Error) as exc:
                # The next save (or the release) takes them again, or says why it cannot.
                self._restore(lines, {})
                (log.info if isinstance(exc, _Lost) else log.warning)("run %s: trace lines not committed yet: %s", self.run_id,
                            clean(exc, self.store.url) if isinstance(exc, psycopg.Error) else exc)

    def ledger(self) -> PgLedger:
        if self._ledger is None:
            self._ledger = PgLedger(self)
        return self._ledger

    def control_read(self, seen: int) -> list[ControlRequest]:
        with self._conn() as conn:
            return read_control(conn, self.store.schema, self.run_id, seen)

    # ---- the owner's record -------------------------------------------------------------
    def heartbeat(self) -> None:
        """Best effort (the lock, not the heartbeat, says whether the owner lives)."""
        if self._owner is None or self._token is None:
            return
        now = time.time()
        try:
            with self._conn() as conn:
                conn.execute(self._q("UPDATE {s}.owners SET heartbeat = %s WHERE run_id = %s AND token = %s"),
                             (now, self.run_id, self._token))
        except (SaveError, psycopg.Error) as exc:
            log.warning("run %s: heartbeat not recorded: %s", self.run_id, exc)
            return
        self._owner["heartbeat"] = now

    def _disarm(self) -> None:
        with self._buffers:
            self._flusher = None

    def release(self) -> None:
        """Commit the trace lines no save took, remove the owner record, then let go of the
        lock (best effort: a holding session that is gone has let go of it already)."""
        self._disarm()
        with self._lock:
            if self._token is not None:
                with self._buffers:
                    lines, self._trace_lines = self._trace_lines, []
                try:
                    with self._conn() as conn, conn.pipeline():  # one round trip
                        with conn.transaction():
                            if lines:
                                with conn.cursor() as c:
                                    c.executemany(self._q("INSERT INTO {s}.trace (run_id, seq, record) "
                                                          "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"),
                                                  [(self.run_id, seq, line) for seq, line in lines])
                                self.store.notify(conn, self.run_id, TRACE)
                            conn.execute(self._q("DELETE FROM {s}.owners WHERE run_id = %s AND token = %s"),
                                         (self.run_id, self._token))
                            self.store.notify(conn, self.run_id, OWNER)
                except (SaveError, psycopg.Error) as exc:
                    log.warning("run %s: letting go was not clean (%s); the lock is let go of all the same",
                                self.run_id, exc)
            self._unhold()  # after the commit: the next owner never finds this one's record
        self._disarm()  # armed by a line traced while letting go: nothing is left to flush

    def abandon(self) -> None:
        """Let go of the lock as a killed process would: no release, the record left behind
        (for the crash tests; a killed process's holding session ends with it)."""
        self._disarm()
        with self._lock:
            self._unhold()

    def _unhold(self) -> None:
        """Let go of the lock on the holding session and forget the hold (under ``_lock``)."""
        self._holds.unlock(self._key, self._generation)
        self._let_go()
        self._token = None
        self._owner = None
        self._generation = None
        self._released = True


class PgTrace:
    """The run's trace, as its owner writes it: each event gets the next ``seq`` at once,
    and its line is committed by the next save (or by the release)."""

    def __init__(self, handle: PgHandle, secrets: tuple[str, ...] = ()) -> None:
        self._handle = handle
        self._secrets = tuple(s for s in secrets if s)

    @property
    def last_seq(self) -> int:
        return self._handle._seq

    def write(self, event: Event) -> None:
        handle = self._handle
        handle._seq += 1
        handle._trace_line(stamped_line(event, handle._seq, self._secrets), handle._seq)

    def close(self) -> None:
        """Nothing to do here: the lines left are committed by the handle's release."""


class PgLedger:
    """The run's idempotency ledger in the ``ledger`` table. An intent is committed at once
    (before the side effect); a result waits for the save that records it in the transcript,
    and is committed with it."""

    blocking = True

    def __init__(self, handle: PgHandle) -> None:
        self._handle = handle

    def begin(self, key: str, intent: dict[str, Any]) -> None:
        h = self._handle
        # Fenced like a save: a process that lost the run (its session replaced, another
        # owner in) records no intent, so it never goes on to the side effect.
        with h._conn() as conn:
            written = conn.execute(h._q(
                "INSERT INTO {s}.ledger (run_id, key, status, intent) SELECT %s, %s, 'begun', %s "
                "WHERE EXISTS (SELECT 1 FROM {s}.runs WHERE run_id = %s AND owner_token = %s) "
                "ON CONFLICT (run_id, key) DO UPDATE SET status = 'begun', intent = EXCLUDED.intent, "
                "result = NULL"), (h.run_id, key, dumps(intent), h.run_id, h._token)).rowcount
        if written != 1:
            raise SaveError(f"run {h.run_id}: another process has taken it over; the write {key} was not begun")
        with h._buffers:
            h._done.pop(key, None)

    def complete(self, key: str, result: str) -> None:
        with self._handle._buffers:
            self._handle._done[key] = result

    def lookup(self, key: str) -> LedgerEntry | None:
        h = self._handle
        with h._conn() as conn:
            row = conn.execute(h._q("SELECT status, intent, result FROM {s}.ledger WHERE run_id = %s AND key = %s"),
                               (h.run_id, key)).fetchone()
        with h._buffers:
            pending = h._done.get(key)
        if pending is not None:
            return LedgerEntry(key, "done", dict((row[1] if row else None) or {}), pending)
        if row is None:
            return None
        status, intent, result = row
        return LedgerEntry(key, status, dict(intent or {}), None if status != "done" else str(result or ""))

    async def abegin(self, key: str, intent: dict[str, Any]) -> None:
        await asyncio.to_thread(self.begin, key, intent)

    async def acomplete(self, key: str, result: str) -> None:
        self.complete(key, result)  # a buffer: no I/O

    async def alookup(self, key: str) -> LedgerEntry | None:
        return await asyncio.to_thread(self.lookup, key)
