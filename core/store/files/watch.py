"""Watching the run store: which runs changed, and what, pushed by the kernel.

:func:`watch_runs` (or :class:`RunWatcher`, the same as a context manager) yields a batch
of :class:`RunChange` each time something happens under a runs dir: a new run, its
journal grew (or was compacted), its trace grew, its ``owner.json`` or its control file
changed. The changes are pushed by inotify, through ``watchfiles`` (the Rust ``notify``
crate); nothing is reread on a timer. A consumer then reads only what was appended, with
:class:`tether.store.files.tail.JournalTail` and :class:`tether.store.files.tail.TraceTail`. The index
(``index.sqlite*``), temporary files (``.journal.jsonl.<pid>.tmp`` and every other name
starting with a dot) and files the store does not name are filtered out.

Latency. ``watchfiles`` wakes every ``step`` ms and returns a batch once a step passes
with no new kind of change (or after ``debounce`` ms at most while new paths keep
changing). ``step=10`` and ``debounce=50`` bring an append in another process to the
consumer within a couple of steps, and a flood of appends to another run's trace does not
delay it: the changes are a set, so a busy file is one entry per batch. The measured
latencies and the idle cost are in docs/performance-history.md ("Watching the store").

Recursive or not. inotify needs one watch per *directory* (not per file): a recursive
watch of a store with 10,000 runs takes 10,001 watches, set up on the watcher's thread (not
the event loop), against a per-user limit (``/proc/sys/fs/inotify/max_user_watches``, as
low as 8,192 on older kernels) shared by every watching process of the user. The alternative, the runs
dir alone (new runs) plus the directories of the live runs, restarting the watcher when
that set changes, is cheaper but blind: a stopped run resumed by *another* process
writes only inside its own directory, so nothing would tell this watcher that it is live
again, short of polling. So:

* watching every run (``run_ids=None``: the console, ``tether watch --all``) is
  recursive, one watch per run directory; new run directories get theirs as they appear;
* watching named runs (``run_ids=[...]``: ``tether watch RUN_ID``) watches the runs dir
  (not recursively: to see a named run appear) and each named run's directory, and
  restarts the watcher when one of them appears or goes (two or three watches);
* if the kernel refuses a watch (the limit is reached), the watcher falls back to
  ``notify``'s polling (``poll_delay_ms``, 300 ms by default) and logs why, rather than
  going blind. Raise ``fs.inotify.max_user_watches`` to get the pushed path back.

Stopping. ``stop_event`` (anything with ``is_set()``, e.g. an ``asyncio.Event``) ends the
iteration within one step; so does leaving the ``async with``, cancelling the consumer
(the cancellation is re-raised after the cleanup), or ``aclose()``. Each watcher runs
its blocking ``watch()`` calls on one worker thread of its own; the cleanup stops the
call in flight (within a step), joins that thread and closes the ``notify`` watcher,
whose own thread ends right after: nothing is left behind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, Protocol, TextIO

from watchfiles._rust_notify import RustNotify, WatchfilesRustInternalError

from tether.store.changes import CONTROL, JOURNAL, LEDGER, NEW, OWNER, REMOVED, TRACE, RunChange
from tether.store.private import private_dirs
from tether.store.files.layout import CONTROL_FILE, INDEX_FILE, JOURNAL_FILE, LEDGER_FILE, OWNER_FILE, TRACE_FILE
from tether.store.files.lock import lock_held
from tether.store.files.tail import TraceTail
from tether.store.follow import Printer, follow_one, record_ts, stopped_record
from tether.store.owner import HEARTBEAT_S

log = logging.getLogger(__name__)

FILES = {JOURNAL_FILE: JOURNAL, TRACE_FILE: TRACE, OWNER_FILE: OWNER, CONTROL_FILE: CONTROL, LEDGER_FILE: LEDGER}

DEBOUNCE_MS = 50
STEP_MS = 10
POLL_DELAY_MS = 300

_ADDED, _MODIFIED, _DELETED = 1, 2, 3  # watchfiles.Change


class _Settable(Protocol):
    def is_set(self) -> bool: ...


class _Stop:
    """What ``watch()`` polls each step: the watcher's own halt, or the caller's event."""

    __slots__ = ("halt", "other")

    def __init__(self, other: _Settable | None) -> None:
        self.halt = threading.Event()
        self.other = other

    def is_set(self) -> bool:
        return self.halt.is_set() or (self.other is not None and self.other.is_set())


def _limit_reached(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "watch limit" in text or "maxfileswatch" in text or getattr(exc, "errno", None) == errno.ENOSPC


class RunWatcher:
    """The changes under ``runs_dir``, batch by batch (see the module's docstring).

    ``async with RunWatcher(runs_dir) as watcher:`` returns once the watches are in place
    (anything written after that is reported), then ``async for batch in watcher``. A
    cancelled ``__anext__`` loses nothing: the next one picks up the same wait."""

    def __init__(self, runs_dir: Path | str, *, run_ids: Iterable[str] | None = None,
                 recursive: bool | None = None, debounce_ms: int = DEBOUNCE_MS, step_ms: int = STEP_MS,
                 stop_event: _Settable | None = None, force_polling: bool = False,
                 poll_delay_ms: int = POLL_DELAY_MS) -> None:
        self.root = Path(os.path.abspath(runs_dir))
        self.run_ids = None if run_ids is None else frozenset(run_ids)
        self.recursive = (self.run_ids is None) if recursive is None else recursive
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.polling = force_polling
        self.poll_delay_ms = poll_delay_ms
        self._stop = _Stop(stop_event)
        self._prefix = str(self.root) + os.sep
        self._notify: Any = None
        self._paths: list[str] = []
        self._known: set[str] = set()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._future: concurrent.futures.Future[Any] | None = None
        self._closed = False

    # ---- life -----------------------------------------------------------------------
    async def __aenter__(self) -> "RunWatcher":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def start(self) -> None:
        """Put the watches in place (on the watcher's thread: a large store takes a while)."""
        if self._executor is not None:
            return
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tether-watch")
        self._future = self._executor.submit(self._start)
        try:
            await asyncio.wrap_future(self._future)
        except BaseException:
            self.close()
            raise
        self._future = None

    def close(self) -> None:
        """Stop watching; returns once the watcher's threads have ended (within a step)."""
        if self._closed:
            return
        self._closed = True
        self._stop.halt.set()
        if self._future is not None:
            concurrent.futures.wait([self._future])
            self._future = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        if self._notify is not None:
            self._notify.close()
            self._notify = None

    def __aiter__(self) -> "RunWatcher":
        return self

    async def __anext__(self) -> list[RunChange]:
        if self._closed:
            raise StopAsyncIteration
        if self._executor is None:
            await self.start()  # iterated without ``async with``: close() it when done
        if self._future is None or self._future.cancelled():
            self._future = self._executor.submit(self._next_batch)
        batch = await asyncio.wrap_future(self._future)
        self._future = None
        if batch is None:
            raise StopAsyncIteration
        return batch

    # ---- on the watcher's thread ------------------------------------------------------
    def _start(self) -> None:
        private_dirs(self.root)
        self._paths = self._wanted_paths()
        self._notify = self._make(self._paths)
        # Listed after the watches are in place: a run made in between is known, not missed.
        if self.run_ids is None:
            with os.scandir(self.root) as entries:
                self._known = {e.name for e in entries if not _ignored(e.name) and e.is_dir()
                               and os.path.exists(os.path.join(e.path, JOURNAL_FILE))}
        else:
            self._known = {rid for rid in self.run_ids if (self.root / rid / JOURNAL_FILE).exists()}

    def _wanted_paths(self) -> list[str]:
        paths = [str(self.root)]
        if not self.recursive and self.run_ids is not None:
            paths += sorted(str(self.root / rid) for rid in self.run_ids
                            if _valid(rid) and (self.root / rid).is_dir())
        return paths

    def _make(self, paths: list[str]) -> Any:
        if not self.polling:
            try:
                return RustNotify(paths, False, False, self.poll_delay_ms, self.recursive, True)
            except (OSError, RuntimeError) as exc:
                if not _limit_reached(exc):
                    raise
                self._fall_back(exc)
        return RustNotify(paths, False, True, self.poll_delay_ms, self.recursive, True)

    def _fall_back(self, exc: BaseException) -> None:
        self.polling = True
        try:
            limit = Path("/proc/sys/fs/inotify/max_user_watches").read_text().strip()
        except OSError:
            limit = "?"
        log.warning("watching %s: the kernel refused an inotify watch (%s; max_user_watches=%s): "
                    "polling every %d ms instead. Raise fs.inotify.max_user_watches to be notified again.",
                    self.root, exc, limit, self.poll_delay_ms)

    def _next_batch(self) -> list[RunChange] | None:
        while True:
            try:
                raw = self._notify.watch(self.debounce_ms, self.step_ms, 0, self._stop)
            except WatchfilesRustInternalError as exc:  # e.g. no watch left for a new run's directory
                if self.polling or not _limit_reached(exc):
                    raise
                self._fall_back(exc)
                self._restart(self._paths)
                continue
            if raw == "stop":
                return None
            if not isinstance(raw, set):
                continue  # "timeout" (none is set) or "signal" (only the main thread gets them)
            batch = self._classify(raw)
            if batch:
                return batch

    def _restart(self, paths: list[str]) -> None:
        replacement = self._make(paths)  # the new watches first: nothing happens unwatched
        old, self._notify, self._paths = self._notify, replacement, paths
        old.close()

    def _classify(self, raw: set[tuple[int, str]]) -> list[RunChange]:
        changes: dict[str, set[str]] = {}
        touched: set[str] = set()
        top_level = False
        for change, path in raw:
            if not path.startswith(self._prefix):
                continue
            parts = path[len(self._prefix):].split(os.sep)
            rid = parts[0]
            if _ignored(rid) or (self.run_ids is not None and rid not in self.run_ids):
                continue
            if len(parts) == 1:  # the run's directory itself
                top_level = True
                if change == _DELETED:
                    if rid in self._known and not (self.root / rid).is_dir():
                        self._known.discard(rid)
                        changes.setdefault(rid, set()).add(REMOVED)
                else:
                    touched.add(rid)
                continue
            if len(parts) != 2 or parts[1].startswith("."):
                continue
            what = FILES.get(parts[1])
            if what is not None:
                changes.setdefault(rid, set()).add(what)
                touched.add(rid)
        if top_level and not self.recursive:
            paths = self._wanted_paths()
            if paths != self._paths:
                added = set(paths) - set(self._paths)
                self._restart(paths)
                for path in added:  # written before its watch existed: say what it has
                    rid = os.path.basename(path)
                    touched.add(rid)
                    changes.setdefault(rid, set()).update(self._present(rid))
        for rid in touched - self._known:
            if (self.root / rid / JOURNAL_FILE).exists():
                self._known.add(rid)
                changes.setdefault(rid, set()).update({NEW, *self._present(rid)})
        return [RunChange(rid, frozenset(what)) for rid, what in sorted(changes.items()) if what]

    def _present(self, rid: str) -> set[str]:
        try:
            with os.scandir(self.root / rid) as entries:
                return {FILES[e.name] for e in entries if e.name in FILES}
        except OSError:
            return set()


def _ignored(name: str) -> bool:
    """Not a run: the index (and its -wal, -shm, -journal files), dot files (temporary)."""
    return not name or name.startswith(".") or name.startswith(INDEX_FILE)


def _valid(rid: str) -> bool:
    return bool(rid) and "/" not in rid and rid not in (".", "..") and "\0" not in rid


async def watch_runs(runs_dir: Path | str, *, run_ids: Iterable[str] | None = None, recursive: bool | None = None,
                     debounce_ms: int = DEBOUNCE_MS, step_ms: int = STEP_MS, stop_event: _Settable | None = None,
                     ready: asyncio.Event | None = None, force_polling: bool = False,
                     poll_delay_ms: int = POLL_DELAY_MS) -> AsyncIterator[list[RunChange]]:
    """Batches of :class:`RunChange` under ``runs_dir`` (every run, or ``run_ids``), until
    ``stop_event`` is set or the consumer stops. ``ready`` is set once the watches are in
    place: what is written from then on is reported."""
    async with RunWatcher(runs_dir, run_ids=run_ids, recursive=recursive, debounce_ms=debounce_ms,
                          step_ms=step_ms, stop_event=stop_event, force_polling=force_polling,
                          poll_delay_ms=poll_delay_ms) as watcher:
        if ready is not None:
            ready.set()
        async for batch in watcher:
            yield batch


# ---- following runs in a terminal (tether watch) ------------------------------------------

async def follow_run(runs_dir: Path | str, run_id: str, out: TextIO, *, stop_event: _Settable | None = None,
                     backlog: int = 20, timings: bool = True, on_ready: Callable[[], None] | None = None,
                     orphan_check_s: float = HEARTBEAT_S) -> dict[str, Any] | None:
    """Print ``run_id``'s trace lines as they are written, starting with its last
    ``backlog`` lines, until the run stops (its ``run_stopped`` line, and for an approval,
    how to decide it) or ``stop_event`` is set. Returns the ``run_stopped`` record.

    A run whose process died without stopping it never writes that line, and nothing on
    disk changes when a process dies: after ``orphan_check_s`` without a change, the run's
    lock is probed (:func:`tether.store.files.lock.lock_held`), and a run no process holds ends the
    watch with a line saying so (``tether resume`` adopts it). A live owner rewrites its
    ``owner.json`` every :data:`~tether.store.owner.HEARTBEAT_S`, so a live run is seldom probed."""
    root = Path(runs_dir)
    async with RunWatcher(root, run_ids=[run_id], stop_event=stop_event) as watcher:
        run = _FollowedFile(watcher, TraceTail(root / run_id / TRACE_FILE), root / run_id / JOURNAL_FILE)
        records = run.trace.backlog(backlog)
        return await follow_one(run_id, run, Printer(out, timings=timings, prefixed=False), records, records,
                                on_ready, orphan_check_s)


class _FollowedFile:
    """A run of the file store as :func:`follow_one` follows it."""

    def __init__(self, watcher: RunWatcher, trace: TraceTail, journal: Path) -> None:
        self.watcher, self.trace, self.journal = watcher, trace, journal

    async def changes(self, timeout_s: float) -> list[RunChange] | None:
        try:
            batch = await asyncio.wait_for(anext(self.watcher), timeout_s)  # a timeout loses nothing
        except StopAsyncIteration:
            return None
        return None if any(REMOVED in change for change in batch) else batch  # None: the run was deleted

    async def new_records(self) -> list[dict[str, Any]]:
        return self.trace.read()

    async def held(self) -> bool:
        return lock_held(self.journal)


async def follow_all(runs_dir: Path | str, out: TextIO, *, stop_event: _Settable | None = None,
                     backlog: int = 20, timings: bool = True, on_ready: Callable[[], None] | None = None) -> None:
    """Print every run's trace lines as they are written, each prefixed with its run id,
    new runs included, until ``stop_event`` is set. The runs being run when it starts show
    their last ``backlog`` lines first."""
    root = Path(runs_dir)
    printer = Printer(out, timings=timings, prefixed=True)
    async with RunWatcher(root, stop_event=stop_event) as watcher:
        tails: dict[str, TraceTail] = {}
        context: list[tuple[float, str, list[dict[str, Any]]]] = []
        with os.scandir(watcher.root) as entries:
            names = [e.name for e in entries if not _ignored(e.name) and e.is_dir()]
        for rid in names:
            tail = tails[rid] = TraceTail(watcher.root / rid / TRACE_FILE)
            last = tail.backlog(1, max_bytes=64 * 1024)  # where it ends, and whether it stopped
            if last and stopped_record(last) is None:
                tail = tails[rid] = TraceTail(tail.path)
                records = tail.backlog(backlog)
                if records and stopped_record(records) is None and lock_held(watcher.root / rid / JOURNAL_FILE):
                    context.append((record_ts(records[-1]), rid, records))  # live: not an orphan of long ago
        for _, rid, records in sorted(context):
            for record in records:
                printer.record(rid, record)
        printer.flush()
        if on_ready is not None:
            on_ready()
        async for batch in watcher:
            lines: list[tuple[float, int, str, dict[str, Any]]] = []
            for change in batch:
                if not change.what & {TRACE, NEW}:
                    continue
                tail = tails.get(change.run_id)
                if tail is None:  # a run made since the watch began: from its first line
                    tail = tails[change.run_id] = TraceTail(watcher.root / change.run_id / TRACE_FILE)
                for n, record in enumerate(tail.read()):
                    lines.append((record_ts(record), n, change.run_id, record))
            printer.in_order(lines)


__all__ = ["RunWatcher", "follow_all", "follow_run", "watch_runs"]
