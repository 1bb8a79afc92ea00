"""Runs on disk: the file store, all runs under one directory (the embedded default).

:class:`RunStore` implements :class:`tether.store.protocol.Store` over a runs dir
(:mod:`tether.store.files.layout`): a journal per run (:mod:`tether.store.files.journal`), held
under an ``flock`` with ``owner.json`` beside it (:mod:`tether.store.files.lock`) by the one
process that runs it (:class:`tether.store.files.handle.RunHandle`), an SQLite index of
summaries and decisions (:mod:`tether.store.files.index`), the standing rules
(:mod:`tether.store.files.rules`) and each run's control requests
(:mod:`tether.store.files.control`, with the owner poked over :mod:`tether.store.unix`).

A listing does not replay every journal: one directory scan compares each journal's
identity with its index row and replays only the journals that changed since. A save is one
append to the page cache (microseconds, less than a hop to a worker thread), so every call
here runs inline (``blocking = False``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tether.vocab.state import RunExists, RunState, StateError, Status
from tether.store.costs import aggregate, dearest_of
from tether.store.files.control import append, read_from
from tether.store.files.handle import RunHandle, decision_records
from tether.store.files.index import IndexUnavailable, RunIndex
from tether.store.files.journal import commit_bytes, header_of, read_journal
from tether.store.private import open_private, private_dirs, private_file, write_private
from tether.store.files.layout import JOURNAL_FILE, NOT_A_RUN, TRACE_FILE, open_home, run_id_problem
from tether.store.files.lock import lock_held, owner_record
from tether.store.files.tail import TraceTail
from tether.store.files.rules import RulesFile
from tether.store.operator import mark_starter, os_account
from tether.store.owner import Owner, kept_owner
from tether.store.summary import JournalKey, Liveness, RunSummary
from tether.store.trace import TraceWriter, read_trace
from tether.store.unix import ControlServer, deliver

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Iterator

    from tether.store.costs import CostQuery, CostRow
    from tether.store.files.feed import FileFeed
    from tether.store.files.watch import RunWatcher
    from tether.vocab.audit import DecisionQuery, DecisionRecord
    from tether.vocab.rules import Rule
    from tether.vocab.events import Event
    from tether.store.control import ControlReply, ControlRequest

log = logging.getLogger(__name__)


class RunStore:
    """All runs under one directory (the file implementation of :class:`tether.store.protocol.Store`)."""

    blocking = False  # local appends of microseconds: run inline, even on an event loop
    workers = False  # queue workers are a database's

    def __init__(self, runs_dir: Path | str) -> None:
        self.root = Path(runs_dir)
        self.index = RunIndex(self.root)
        self._rules = RulesFile(self.root)
        self._keepers: dict[str, tuple[JournalKey, Any]] = {}  # run id -> (journal read, its keeper)
        open_home(self.root)

    @property
    def where(self) -> str:
        """The store, as messages name it: its directory."""
        return str(self.root)

    @property
    def spec(self) -> str:
        return str(self.root)

    def read_only(self) -> None:
        """None: who may change the runs is the file modes' business, not a role's."""
        return None

    def close(self) -> None:
        """Nothing to let go of: each call opens what it needs and closes it."""

    def account(self) -> str:
        """The operating system's account of this process: whoever may write the store's
        files is someone to the file store by their account alone."""
        return os_account()

    def run_dir(self, run_id: str) -> Path:
        problem = run_id_problem(run_id)
        if problem is not None:
            raise StateError(problem)
        return self.root / run_id

    def exists(self, run_id: str) -> bool:
        return (self.run_dir(run_id) / JOURNAL_FILE).is_file()

    def run_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.parent.name for p in self.root.glob(f"*/{JOURNAL_FILE}"))

    def load(self, run_id: str) -> RunState:
        """Read a run without taking its lock (for listing and showing)."""
        return read_journal(self.run_dir(run_id) / JOURNAL_FILE, missing=f"no run {run_id} in {self.root}")[0]

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
        except NOT_A_RUN:
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
            state = read_journal(path)[0]
            row = RunSummary.of(state, key)
            with contextlib.suppress(IndexUnavailable):
                self.index.put([row], decisions={run_id: decision_records(state)})
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
        record = owner_record(self.run_dir(run_id))
        if record is None:
            return Owner(alive=True) if held else None
        return Owner(**record, alive=held)

    def _live(self, summary: RunSummary, held: bool | None) -> None:
        if held is None:
            held = self._held(summary.run_id)
        summary.liveness = "running" if held else "orphaned"
        record = owner_record(self.run_dir(summary.run_id))
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
            state = read_journal(self.run_dir(run_id) / JOURNAL_FILE)[0]
        except StateError as exc:
            if problems is not None:
                problems[run_id] = str(exc)
            return None
        return RunSummary.of(state, key), decision_records(state)

    # ---- approvals: the standing rules and the record of decisions -------------------------
    def rules(self) -> list[Rule]:
        """Every rule in ``rules.json``, oldest first: a ``stat`` when it has not changed."""
        return self._rules.read()

    def rule_add(self, rule: Rule) -> Rule:
        """Keep ``rule`` under the next id, in one atomic rewrite of ``rules.json``."""
        return self._rules.add(rule)

    def rule_remove(self, rule_id: str) -> Rule:
        """Take rule ``rule_id`` out of ``rules.json`` (its id is not given again)."""
        return self._rules.remove(rule_id)

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
                records.extend(r for r in decision_records(self.load(run_id)) if query.admits(r))
        records.sort(key=lambda r: (r.ts, r.run_id, r.call_id), reverse=True)
        return records[:query.limit] if query.limit is not None else records

    def costs(self, query: CostQuery) -> list[CostRow]:
        """Spend grouped (:mod:`tether.store.costs`) from the index as it stands: every owner writes
        its run's row at each change of status and at most a second apart while it runs, so no
        directory scan first (that is most of a listing's time at 100,000 runs; a row a crash kept
        out is written by the next listing). Without an index, it is built first, as
        :meth:`summaries` does; an index that cannot be used makes this read the summaries."""
        if not self.index.path.exists():
            self._refreshed(None, rows_wanted=False)
        try:
            return self.index.costs(query)
        except IndexUnavailable as exc:
            log.warning("%s; reading the journals instead", exc)
        return aggregate(self.summaries(), query)

    def dearest(self, query: CostQuery, limit: int = 10) -> list[RunSummary]:
        """The dearest runs from the index as it stands, as :meth:`costs` reads it."""
        if not self.index.path.exists():
            self._refreshed(None, rows_wanted=False)
        try:
            return self.index.dearest(query, limit)
        except IndexUnavailable as exc:
            log.warning("%s; reading the journals instead", exc)
        return dearest_of(self.summaries(), query, limit)

    def budget_charge(self, key: str, usd: float, seed: Callable[[], float]) -> float:
        """Add ``usd`` to fleet budget ``key``'s spend this period and return the new total, under
        an exclusive lock on its file (``budgets/KEY``): two processes charging at once are
        counted one after the other. A new period's spend starts at ``seed()`` (what the runs
        made in it have cost so far)."""
        folder = self.root / "budgets"
        folder.mkdir(parents=True, exist_ok=True)
        fd = open_private(folder / key.replace("/", "_"), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            text = os.pread(fd, 64, 0).decode().strip()
            spent = (float(text) if text else seed()) + usd
            data = repr(spent).encode()
            os.pwrite(fd, data.ljust(64), 0)
            return spent
        finally:
            os.close(fd)  # and the lock with it

    # ---- the control channel and the trace, by run id ------------------------------------
    def control_append(self, run_id: str, request: ControlRequest) -> None:
        append(self.run_dir(run_id), request)

    def control_read(self, run_id: str, seen: int) -> list[ControlRequest]:
        return read_from(self.run_dir(run_id), seen)

    def control_server(self) -> ControlServer:
        """A Unix socket of this process's (:mod:`tether.store.unix`): the runs' owners here
        are on this host, as their files are."""
        return ControlServer()

    async def deliver(self, run_id: str, request: ControlRequest, address: str | None) -> ControlReply | None:
        """Append ``request`` to the run's ``control.jsonl``, then poke the owner's socket."""
        self.control_append(run_id, request)
        return await deliver(address, run_id, request.id) if address else None

    def read_trace(self, run_id: str, after_seq: int = 0) -> Iterator[dict[str, Any]]:
        records = read_trace(self.run_dir(run_id) / TRACE_FILE)
        if after_seq <= 0:
            return records
        return (r for r in records if isinstance(r.get("seq"), int) and r["seq"] > after_seq)

    def append_event(self, run_id: str, event: Event) -> None:
        path = self.run_dir(run_id) / TRACE_FILE
        private_file(path)
        trace = TraceWriter(path)
        try:
            trace.write(event)
        finally:
            trace.close()

    def traced_ids(self, prefix: str = "") -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.name.startswith(prefix) and (p / TRACE_FILE).is_file())

    def side_dir(self) -> Path:
        return self.root

    def tables(self) -> None:
        return None

    def feed(self) -> FileFeed:
        # lazy: inotify (watchfiles) and the followers load for tether watch, the console and serve, not for
        # tether runs, stop or approve, which open this store too (docs/performance.md, "Cold start")
        from tether.store.files.feed import FileFeed

        return FileFeed(self, self.root)

    def trace_source(self) -> FileTraceSource:
        return FileTraceSource(self)

    def trace_digests(self, run_ids: list[str], digest: Callable[[Iterator[dict[str, Any]]], tuple[list[Any], float]],
                      ) -> dict[str, tuple[list[Any], float]]:
        try:
            cached = self.index.traces()
        except IndexUnavailable:
            cached = {}
        out: dict[str, tuple[list[Any], float]] = {}
        fresh = []
        for run_id in run_ids:
            path = self.run_dir(run_id) / TRACE_FILE
            try:
                st = os.stat(path)
            except FileNotFoundError:
                out[run_id] = digest(iter(()))
                continue
            key = (st.st_size, st.st_mtime_ns, st.st_ino)
            hit = cached.get(run_id)
            if hit is not None and hit[0] == key:
                out[run_id] = (json.loads(hit[1]), hit[2])
                continue
            out[run_id] = digest(read_trace(path))  # stat first: a trace that grows meanwhile looks stale next time
            fresh.append((run_id, key, json.dumps(out[run_id][0], separators=(",", ":")), out[run_id][1]))
        try:
            self.index.put_traces(fresh)
        except IndexUnavailable as exc:
            log.warning("%s; the trace digests were not kept", exc)
        return out

    def trace_file(self, run_id: str) -> Path:
        return self.run_dir(run_id) / TRACE_FILE

    def watch(self) -> RunWatcher:
        # lazy: inotify (watchfiles) and the followers load for tether watch, the console and serve, not for
        # tether runs, stop or approve, which open this store too (docs/performance.md, "Cold start")
        from tether.store.files.watch import RunWatcher

        return RunWatcher(self.root)

    async def follow_run(self, run_id: str, out: TextIO, *, stop_event: asyncio.Event | None = None,
                         backlog: int = 20, timings: bool = True, on_ready: Callable[[], None] | None = None,
                         ) -> dict[str, Any] | None:
        # lazy: inotify (watchfiles) and the followers load for tether watch, the console and serve, not for
        # tether runs, stop or approve, which open this store too (docs/performance.md, "Cold start")
        from tether.store.files.watch import follow_run

        return await follow_run(self.root, run_id, out, stop_event=stop_event, backlog=backlog, timings=timings,
                                on_ready=on_ready)

    async def follow_all(self, out: TextIO, *, stop_event: asyncio.Event | None = None, backlog: int = 20,
                         timings: bool = True, on_ready: Callable[[], None] | None = None) -> None:
        # lazy: inotify (watchfiles) and the followers load for tether watch, the console and serve, not for
        # tether runs, stop or approve, which open this store too (docs/performance.md, "Cold start")
        from tether.store.files.watch import follow_all

        await follow_all(self.root, out, stop_event=stop_event, backlog=backlog, timings=timings, on_ready=on_ready)

    def create(self, state: RunState) -> None:
        """Save a new run. Its journal appears complete (first commit included) or not at
        all: a crash mid-create leaves nothing to trip over, and of two processes creating
        one id, the second gets "already exists" instead of truncating the first's run.
        Running it is :meth:`open`'s business, like any saved run."""
        directory = self.run_dir(state.run_id)
        mark_starter(state, self.account())
        try:
            private_dirs(directory)
        except (FileExistsError, NotADirectoryError) as exc:
            raise StateError(f"cannot create run {state.run_id}: {exc.filename or directory} is in the way "
                             f"(a file, not a folder)") from None
        tmp = directory / f".{JOURNAL_FILE}.{os.getpid()}.new"
        write_private(tmp, commit_bytes(state.messages, header_of(state)))
        try:
            os.link(tmp, directory / JOURNAL_FILE)
        except FileExistsError:
            raise RunExists(f"run {state.run_id} already exists") from None
        finally:
            tmp.unlink()
        st = os.stat(directory / JOURNAL_FILE)
        self.index.record(RunSummary.of(state, (st.st_size, st.st_mtime_ns, st.st_ino)),
                          decision_records(state) if state.approvals else None)

    def open(self, run_id: str, *, control: str | None = None) -> tuple[RunState, RunHandle]:
        """Lock a run for this process and load it; the second process gets a clear error.
        ``control`` is published in ``owner.json`` (where this process takes requests)."""
        directory = self.run_dir(run_id)
        handle = RunHandle(directory, run_id, index=self.index)
        handle.acquire(control=control)
        try:
            state, committed_bytes = read_journal(directory / JOURNAL_FILE)
            handle.attach(state, committed_bytes)
        except BaseException:
            handle.release()
            raise
        return state, handle


class FileTraceSource:
    """The file store's :class:`~tether.store.protocol.TraceSource`: a tail per run's trace (only what
    was appended is read)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.tails: dict[str, TraceTail] = {}

    def catch_up(self, cutoff: float) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        try:
            entries = list(os.scandir(self.store.root))
        except (FileNotFoundError, NotADirectoryError):
            return out
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path) / TRACE_FILE
            try:
                st = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                continue
            if st.st_mtime < cutoff:
                self.tails[entry.name] = TraceTail(path, offset=st.st_size)
                continue
            tail = self.tails[entry.name] = TraceTail(path)
            records = [r for r in tail.read() if float(r.get("ts") or 0) >= cutoff]
            if records:
                out[entry.name] = records
        return out

    def new_records(self, run_id: str) -> list[dict[str, Any]]:
        tail = self.tails.get(run_id)
        if tail is None:  # a run made since the catch-up: from its first line
            tail = self.tails[run_id] = TraceTail(self.store.run_dir(run_id) / TRACE_FILE)
        return tail.read()

    def forget(self, run_id: str) -> None:
        self.tails.pop(run_id, None)
