"""What the harness, the CLI and the console need from a run store, as an interface.

Two stores implement it: the file store (:class:`tether.store.files.store.RunStore`, the embedded
default: a journal per run, an ``flock``, ``owner.json``, an SQLite index) and PostgreSQL
(:class:`tether.store.postgres.store.PgStore`). One contract test suite (tests/processes/test_store_contract.py)
runs against both.

The shape:

* :class:`Store` is all runs: create one, open one with ownership (a :class:`Handle`),
  load one without owning it, list summaries, say who owns a run and whether it is alive,
  and carry the control channel (requests appended by anyone, read by the owner, and the
  owner told of them: :meth:`Store.control_server`, :meth:`Store.deliver`).
* :class:`Handle` is one process's exclusive hold on one run: it saves the state
  atomically (the new messages, the header, the ledger records and the trace lines written
  since the last save, all or nothing), gives the run's trace writer (``seq`` increasing
  across every process that ever held the run) and its idempotency ledger, heartbeats,
  and lets go. File paths, connections and locks stay behind it.

**Blocking.** Every method here but :meth:`Store.deliver` is synchronous, so the CLI can use
either store as it is.
A store whose calls wait on a network says so with ``blocking = True``; code on an event
loop then calls it through :func:`call` (a worker thread), and saves with
:meth:`Handle.asave`, which snapshots the state on the loop and does the I/O off it. The
file store's calls are local appends of microseconds, cheaper than a hop to a thread, so
they run inline (``blocking = False``), as they always have.

This module imports neither store: which one a ``--store`` names is
:func:`tether.store.spec.open_store`'s business, and the shared words (:mod:`tether.store.owner`,
:mod:`tether.store.summary`, :mod:`tether.store.control`) are modules of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeVar, runtime_checkable

from tether.vocab.state import StateError

if TYPE_CHECKING:
    from tether.vocab.audit import DecisionQuery, DecisionRecord
    from tether.vocab.rules import Rule
    from tether.vocab.events import Event
    from tether.vocab.ledger import LedgerEntry
    from tether.vocab.state import RunState
    from tether.store.changes import RunChange
    from tether.store.costs import CostQuery, CostRow
    from tether.store.feed import StoreFeed
    from tether.store.control import ControlListener, ControlReply, ControlRequest
    from tether.store.owner import Owner
    from tether.store.summary import Liveness, RunSummary

T = TypeVar("T")


class SaveError(Exception):
    """A save failed (disk full, I/O error, the database gone). The previous saved state is intact."""


class StoreUnavailable(StateError):
    """The database could not be reached or used (the message never holds a password). Here,
    not in the PostgreSQL store, so that code which waits for a database to come back (a
    worker's drive step) knows the error without importing the store that raises it."""


@runtime_checkable
class TraceSink(Protocol):
    """A run's event trace, as its owner writes it: each event gets the next ``seq``."""

    @property
    def last_seq(self) -> int: ...

    def write(self, event: Event) -> None:
        """Give ``event`` the next ``seq`` and the time, redact the secrets, record it."""

    def close(self) -> None: ...


@runtime_checkable
class IdempotencyLedger(Protocol):
    """What each write call meant to do, and whether it did (:mod:`tether.vocab.ledger`)."""

    def begin(self, key: str, intent: dict[str, Any]) -> None:
        """Record the intent, durably, before the side effect."""

    def complete(self, key: str, result: str) -> None:
        """Record the result. A store may hold it until the save that records the call's
        result in the transcript, and commit both together."""

    def lookup(self, key: str) -> LedgerEntry | None: ...

    async def abegin(self, key: str, intent: dict[str, Any]) -> None:
        """:meth:`begin` from a tool on an event loop (off it, for a blocking store)."""

    async def acomplete(self, key: str, result: str) -> None: ...

    async def alookup(self, key: str) -> LedgerEntry | None: ...


@runtime_checkable
class Handle(Protocol):
    """One process's exclusive hold on one run (from :meth:`Store.open`)."""

    run_id: str

    def save(self, state: RunState) -> None:
        """Commit the state, atomically: what was saved before stays if this fails
        (:class:`SaveError`)."""

    async def asave(self, state: RunState) -> None:
        """:meth:`save` from an event loop: the state is read on the loop, the I/O of a
        blocking store happens off it."""

    def trace(self, secrets: tuple[str, ...] = ()) -> TraceSink:
        """The run's trace writer; ``secrets`` never reach what it stores."""

    def ledger(self) -> IdempotencyLedger: ...

    def control_read(self, seen: int) -> list[ControlRequest]:
        """The run's control requests after the first ``seen``."""

    def heartbeat(self) -> None:
        """Say the owner is still at it (informative: liveness is the store's lock)."""

    def release(self) -> None:
        """Let go of the run (idempotent)."""

    @property
    def owner(self) -> dict[str, Any] | None:
        """This process's owner record while it holds the run."""

    @property
    def scratch_dir(self) -> Path | None:
        """A directory of the run's for side files (MCP servers' stderr), or None."""


class Changes(Protocol):
    """A store's changes, batch by batch (:meth:`Store.watch`): ``async with store.watch() as
    changes:`` returns once the watch is in place (anything written after that is reported),
    then ``async for batch in changes``."""

    async def __aenter__(self) -> Changes: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def __aiter__(self) -> Changes: ...

    async def __anext__(self) -> list[RunChange]: ...


class Tables(Protocol):
    """A store's database, for a room that keeps rows of its own beside the runs (the web's
    users, the queue workers' tables): :meth:`Store.tables`."""

    schema: str

    held: str
    """SQL that selects the keys of the advisory locks held now in the database (the runs'
    owners', the workers'), for a query that tells the living from the dead beside them."""

    lock_seed: int
    """The seed of ``hashtextextended`` for the store's lock keys (``{seed}`` in :meth:`q`),
    so that a room's own locks (a worker's) are taken apart from other programs' hashes."""

    roles_sql: str
    """The script that makes the database's roles and schemas (``roles.sql``), for an error
    to name when a role lacks a right that only a superuser can give."""

    @property
    def where(self) -> str: ...

    def q(self, text: str) -> Any:
        """``text`` (SQL) with ``{s}`` as the store's schema and ``{seed}`` as :attr:`lock_seed`."""

    def ensure_schema(self, conn: Any) -> None:
        """Make the store's tables on ``conn`` if they are missing: a room that makes tables of
        its own beside them, on a session of its own (a worker's), does so first."""

    def words(self, exc: BaseException) -> str:
        """``exc``'s message in one line, with no password in it, for an error of the room's."""

    def connection(self) -> AbstractContextManager[Any]:
        """A connection from the store's pool (psycopg's), for one thread at a time."""

    def session(self) -> Any:
        """A connection of its own (psycopg's), outside the pool, with the store's session
        settings, open until the caller closes it: for a lock that lasts as long as its
        session (the notifications sender's lease)."""

    def unavailable(self, words: str, exc: BaseException | None = None) -> StoreUnavailable:
        """The store's error for a database it could not use (a lost session): ``words``,
        then ``exc``'s message with no password in it."""


class TraceSource(Protocol):
    """Every run's trace records as one reader takes them in (:meth:`Store.trace_source`; the
    notifications' sender), each record once: told of a change by :meth:`Store.watch`, it
    reads only what is new."""

    def catch_up(self, cutoff: float) -> dict[str, list[dict[str, Any]]]:
        """The records written since ``cutoff`` (a time), by run; what comes later is new."""

    def new_records(self, run_id: str) -> list[dict[str, Any]]:
        """The run's records written since the last read (a run made since: all of them)."""

    def forget(self, run_id: str) -> None:
        """The run is gone: drop what is kept for it."""


@runtime_checkable
class Store(Protocol):
    """All runs (see the module)."""

    blocking: bool
    """Its calls wait on a network: from an event loop, go through :func:`call`."""

    workers: bool
    """Queue workers may hold its runs (a database's, :mod:`tether.workers`); the file store
    has none, and a command on it does not pay for importing the workers' modules."""

    @property
    def where(self) -> str:
        """The store as messages name it (a directory, or a URL without its password)."""

    @property
    def spec(self) -> str:
        """The store as another process opens it (``--store``, ``$TETHER_STORE``): its
        directory, or its URL with the password. Never put in a message: :attr:`where` is."""

    def read_only(self) -> str | None:
        """The role this process may only watch runs as (a database role without the
        operator's rights), else None: a command that changes runs is refused when it is
        not. The file store's answer is always None (the file modes decide)."""

    def close(self) -> None:
        """Let go of what the store keeps open (a database's connections); idempotent."""

    def exists(self, run_id: str) -> bool: ...

    def account(self) -> str:
        """Who this process is to the store, which no option of a command changes: the
        operating system's account on the file store, the database role it connected as on
        PostgreSQL. A decision counts as its account (:mod:`tether.vocab.people`)."""

    def create(self, state: RunState) -> None:
        """Save a new run, complete or not at all; an id that exists is a StateError."""

    def open(self, run_id: str, *, control: str | None = None) -> tuple[RunState, Handle]:
        """Take the run (a run someone else holds is a StateError, in words) and load it.
        ``control`` is where this process takes control requests, published as the owner's."""

    def load(self, run_id: str) -> RunState:
        """Read a run without taking it."""

    def run_ids(self) -> list[str]: ...

    def summaries(self, *, live_only: bool = False, problems: dict[str, str] | None = None) -> list[RunSummary]:
        """Every readable run's summary, oldest first, with liveness and owner filled in."""

    def summary(self, run_id: str) -> RunSummary: ...

    def liveness(self, run_id: str) -> Liveness | None: ...

    def owner(self, run_id: str) -> Owner | None:
        """Who holds the run, or last held it without letting go (``alive`` says which)."""

    def control_append(self, run_id: str, request: ControlRequest) -> None:
        """Add a request to the run's control channel (kept until the owner handles it)."""

    def control_read(self, run_id: str, seen: int) -> list[ControlRequest]: ...

    def control_server(self) -> ControlListener:
        """What a process that runs runs of this store takes control requests behind; its
        ``address`` is published as the owner's ``control`` (:mod:`tether.store.control`)."""

    async def deliver(self, run_id: str, request: ControlRequest, address: str | None) -> ControlReply | None:
        """Append ``request`` to the run's control channel and tell the owner listening at
        ``address`` (when given) of it; the owner's answer, or None when none came in time.
        The one call here that waits on another process: always awaited, on the loop."""

    def read_trace(self, run_id: str, after_seq: int = 0) -> Iterator[dict[str, Any]]:
        """The run's trace records with ``seq`` above ``after_seq``, in ``seq`` order."""

    def append_event(self, run_id: str, event: Event) -> None:
        """Add one event to the trace of a run this process does not drive."""

    def traced_ids(self, prefix: str = "") -> list[str]:
        """The ids, sorted, of the runs with a trace whose id starts with ``prefix`` (a run's
        subagents: ``RUN_ID.``), a trace left without its journal too."""

    def trace_digests(self, run_ids: list[str], digest: Callable[[Iterator[dict[str, Any]]], tuple[list[Any], float]],
                      ) -> dict[str, tuple[list[Any], float]]:
        """``digest`` of each run's trace records, by run id (a run without a trace: of none). The
        file store keeps the digests in its index, keyed by each trace file's size, ``mtime_ns``
        and inode, so a listing reads only the traces that changed; a database digests each."""

    def trace_file(self, run_id: str) -> Path | None:
        """The file the run's trace is appended to, for a reader that follows it on disk (the
        console's trace pane, ``tether trace``'s bytes as written); None on a store that keeps
        traces elsewhere (a database): :meth:`read_trace` reads either."""

    # ---- where another room keeps its own things beside the runs ----
    def side_dir(self) -> Path | None:
        """A private folder of the store's, beside the runs (the file store's runs dir), for
        what another room keeps there (the web's users); None on a store with tables."""

    def tables(self) -> Tables | None:
        """The store's database, for such a room's rows (:class:`Tables`); None on the file
        store (:meth:`side_dir`)."""

    # ---- following the store as it changes ----
    def feed(self) -> StoreFeed:
        """What a reader that shows every run follows the store through (the console):
        :class:`tether.store.feed.StoreFeed`."""

    def trace_source(self) -> TraceSource:
        """A reader of every run's new trace records (:class:`TraceSource`)."""

    def watch(self) -> Changes:
        """The changes of every run (:class:`tether.store.changes.RunChange`), pushed: inotify
        on the file store's folder, ``LISTEN`` on PostgreSQL; never polled."""

    async def follow_run(self, run_id: str, out: TextIO, *, stop_event: asyncio.Event | None = None,
                         backlog: int = 20, timings: bool = True, on_ready: Callable[[], None] | None = None,
                         ) -> dict[str, Any] | None:
        """Print ``run_id``'s trace lines to ``out`` as they are written, its last ``backlog``
        first, until the run stops (its ``run_stopped`` record, returned) or ``stop_event``."""

    async def follow_all(self, out: TextIO, *, stop_event: asyncio.Event | None = None, backlog: int = 20,
                         timings: bool = True, on_ready: Callable[[], None] | None = None) -> None:
        """Print every run's trace lines to ``out``, each prefixed with its run id, new runs
        included, until ``stop_event`` is set."""

    # ---- approvals (tether.approvals): standing rules and the record of decisions ----
    def rules(self) -> list[Rule]:
        """Every standing rule on the store, expired ones too, oldest first. Cheap to call
        before each call that needs approval: a store may answer from a cache it checks."""

    def rule_add(self, rule: Rule) -> Rule:
        """Keep ``rule`` under the next id (``R1``, ``R2``…; an id is never reused) and return it."""

    def rule_remove(self, rule_id: str) -> Rule:
        """Remove rule ``rule_id`` and return it; a :class:`~tether.approvals.RuleError`, in
        words, when the store has no such rule."""

    def decisions(self, query: DecisionQuery) -> list[DecisionRecord]:
        """The decisions ``query`` selects, newest first, from the index (every save of a run
        records its decisions there: :func:`tether.approvals.records_of`)."""

    def costs(self, query: CostQuery) -> list[CostRow]:
        """The runs' own spend, tokens, runs nobody priced and dearest run, grouped by agent,
        model, source or day (:mod:`tether.store.costs`): one aggregate query, no run loaded."""

    def dearest(self, query: CostQuery, limit: int = 10) -> list[RunSummary]:
        """The ``limit`` runs made in ``query``'s period (its ``by`` is ignored) that cost the
        most of their own (``cost_usd - child_cost_usd``), dearest first, then by run id: their
        summaries as saved (no liveness), from one ``ORDER BY … LIMIT`` query."""

    def budget_charge(self, key: str, usd: float, seed: Callable[[], float]) -> float:
        """Add ``usd`` to fleet budget ``key``'s spend this period and return the new total,
        two processes charging at once counted one after the other; a new period's spend
        starts at ``seed()`` (:mod:`tether.approvals.budgets`)."""


async def call(store: Store | Handle, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` from an event loop: inline for a store of local files, in a
    worker thread for one that blocks (``store.blocking``)."""
    if getattr(store, "blocking", False):
        return await asyncio.to_thread(fn, *args, **kwargs)
    return fn(*args, **kwargs)
