"""The console as a client of the store: every run on it, whoever runs it, live.

:class:`StoreClient` lists the runs from the store's summaries (a stub per run, so 10,000
finished runs cost one query, not 10,000 replays), then follows the store's changes
through the store's :class:`tether.store.feed.StoreFeed` (``Store.feed()``): inotify and file tails for the file store,
LISTEN/NOTIFY for PostgreSQL. A run another process drives is followed in full (its state
read again when its journal changes) and its new trace records go through the same event
pump as the console's own events (:func:`tether.store.trace.event_from_record`). Who runs a run
comes with the changes; whether that process still lives is asked at most once a second
(:meth:`StoreClient.check_owners`), since a killed process tells nobody. Runs this console
drives are left to the in-process sink.

A feed whose calls wait on a network (``blocking``) is read in a worker thread, one hop per
batch of changes: the event loop never waits on the store. The file feed's reads are local
and stay inline, as they always were.

Textual-free; the app calls :meth:`run` in a task it cancels when it ends, and
:meth:`aclose` after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from tether.store.protocol import Store
from tether.store.summary import RunSummary
from tether.vocab.state import NeedsApproval, RunState, StateError, Status
from tether.store.owner import Owner
from tether.store.trace import event_from_record
from tether.store.feed import Listing, StoreFeed
from tether.tui.state.model import ConsoleModel, QueueInfo
from tether.tui.state.pump import EventPump
from tether.store.changes import JOURNAL, NEW, OWNER, REMOVED, TRACE, RunChange

log = logging.getLogger(__name__)
T = TypeVar("T")
RECONNECT_S = 1.0  # a network store that went away is tried again this often (no oftener)


class StoreClient:
    def __init__(self, store: Store, model: ConsoleModel, pump: EventPump,
                 on_owner: Callable[[str], None] | None = None, *, feed: StoreFeed | None = None,
                 on_error: Callable[[str, bool], None] | None = None,
                 on_listed: Callable[[], None] | None = None) -> None:
        self.store = store
        self.feed: StoreFeed = feed if feed is not None else store.feed()
        self._no_workers = not store.workers  # True too once the workers' module is found missing
        self.model = model
        self.pump = pump
        self.on_owner = on_owner  # a run's liveness changed (the app refreshes its keys)
        self.on_error = on_error  # the console stopped (True) or went back to (False) following the store, in words
        self.on_listed = on_listed  # a network store's listing is in the model (taken off the loop)
        self.ready = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loading: set[str] = set()
        self._primed: set[str] = set()
        self._closed = False
        self.notify_lines: list[str] = []  # the notifications' sender's failures (tether.notify.sender_status)

    @property
    def blocking(self) -> bool:
        return self.feed.blocking

    @property
    def where(self) -> str:
        return self.feed.where

    async def _io(self, fn: Callable[..., T], *args: Any) -> T:
        if self.feed.blocking:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- listing ---------------------------------------------------------------------------
    def listing(self) -> Listing:
        """The store's runs and the unreadable ones (blocking for a network store)."""
        return self.feed.listing()

    def take_listing(self, summaries: list[RunSummary], problems: dict[str, str]) -> bool:
        """Put a listing in the model (runs known in full keep their state); True when a run
        is new. The runs other processes hold are followed at once: only for a feed of local
        files (otherwise :meth:`take_listing_async`)."""
        known = set(self.model.states)
        self._owners_of_waiting(self.feed.owners(self._list(summaries, problems)))
        for rid in self._unfollowed(summaries):
            self._put_followed(rid, self.feed.follow(rid))
        return bool(set(self.model.states) - known)

    async def take_listing_async(self, listing: Listing) -> bool:
        known = set(self.model.states)
        waiting = self._list(*listing)
        if waiting:
            self._owners_of_waiting(await self._io(self.feed.owners, waiting))
        rids = self._unfollowed(listing[0])
        if rids:
            for rid, state in (await self._io(self._follow_all, rids)).items():
                self._put_followed(rid, state)
        return bool(set(self.model.states) - known)

    def _list(self, summaries: list[RunSummary], problems: dict[str, str]) -> list[str]:
        """The model takes the summaries; the runs that wait for approval. A summary says
        who holds a run only while it is saved as running, and a process may hold a run
        waiting for a decision (``--wait-for-decision``): those are asked."""
        model = self.model
        model.list_summaries(s for s in summaries if not model.is_driven(s.run_id))
        model.load_problems.update(problems)
        return [s.run_id for s in summaries if not model.is_driven(s.run_id)
                and isinstance(s.interruption, dict) and s.interruption.get("type") == "approval"]

    def _owners_of_waiting(self, owners: dict[str, Owner | None]) -> None:
        for rid, owner in owners.items():
            if owner is not None and owner.alive and not self.model.is_driven(rid):
                self.model.set_owner(rid, owner)

    def _unfollowed(self, summaries: list[RunSummary]) -> list[str]:
        """The runs held elsewhere and not followed yet."""
        return [s.run_id for s in summaries
                if self.model.held_elsewhere(s.run_id) and not self.feed.following(s.run_id)]

    def _follow_all(self, rids: Iterable[str]) -> dict[str, RunState | None]:
        out: dict[str, RunState | None] = {}
        for rid in rids:
            try:
                out[rid] = self.feed.follow(rid)
            except (StateError, OSError) as exc:
                log.debug("run %s not readable yet: %s", rid, exc)
                out[rid] = None
        return out

    def _put_followed(self, rid: str, state: RunState | None) -> bool:
        return state is not None and self.model.put_state(state)

    def load(self, rid: str) -> None:
        """``rid`` in full (a selected stub). From a network store it comes a moment later
        (loaded in a thread), and the run is marked for the views then."""
        if not self.feed.blocking:
            try:
                self.model.put_state(self.feed.current(rid))
            except (StateError, OSError) as exc:
                self.model.load_problems[rid] = str(exc)
            return
        if rid not in self._loading and not self._closed:
            self._loading.add(rid)
            self._spawn(self._load(rid), f"tether console: load {rid}")

    async def _load(self, rid: str) -> None:
        try:
            state = await self._io(self.feed.current, rid)
        except (StateError, OSError) as exc:
            self.model.load_problems[rid] = str(exc)
            return
        finally:
            self._loading.discard(rid)
        if rid in self.model.stubs or rid not in self.model.states:
            self.model.put_state(state)
            self.pump.mark(rid, structure=True)

    # ---- the trace view's history ---------------------------------------------------------
    def trace_path(self, rid: str) -> Path | None:
        """The run's trace file, for a store of files (the trace view reads its history there)."""
        return self.store.trace_file(rid)

    def prime(self, rid: str) -> None:
        """A run's trace view was opened: for a store with no trace file, read the run's last
        trace lines (in a thread) and put them before what the view holds."""
        if not self.feed.blocking or rid in self._primed or self._closed:
            return
        self._primed.add(rid)
        self._spawn(self._prime(rid), f"tether console: trace of {rid}")

    async def _prime(self, rid: str) -> None:
        try:
            records = await self._io(self.feed.history, rid)
        except (StateError, OSError) as exc:
            log.debug("the trace of %s could not be read: %s", rid, exc)
            self._primed.discard(rid)
            return
        if self.pump.prime(rid, records):
            self.pump.mark(rid)

    # ---- following -----------------------------------------------------------------------------
    async def run(self, *, follow: bool = True) -> None:
        """Follow the store until cancelled (``follow=False``: list it once, in the
        background, for a network store). A network store that goes away (a restart) is
        reached again once a second, and what changed meanwhile is read again."""
        lost: str | None = None
        while True:
            try:
                if not follow:
                    self._listed(await self.take_listing_async(await self._io(self.feed.listing)))
                    return
                async with self.feed.changes() as changes:
                    # Runs made between the first listing and the watch: list again, once.
                    listing = await self._io(self.feed.listing)
                    if lost is not None:
                        await self._catch_up(listing)
                        lost = None
                        if self.on_error is not None:
                            self.on_error(f"following the store {self.feed.where} again", False)
                    self._listed(await self.take_listing_async(listing))
                    async for batch in changes:
                        await self.apply(batch)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the console goes on without live updates from other processes
                self.ready.set()
                if not self.feed.blocking:
                    log.warning("the console stopped following %s: %s", self.feed.where, exc)
                    if self.on_error is not None:
                        self.on_error(f"the console stopped following the store {self.feed.where}: {exc}", True)
                    return
                if lost is None:
                    lost = str(exc)
                    log.warning("the console lost the store %s: %s", self.feed.where, exc)
                    if self.on_error is not None:
                        self.on_error(f"the console lost the store: {exc}; trying again every "
                                      f"{RECONNECT_S:g} s", True)
                await asyncio.sleep(RECONNECT_S)

    async def _catch_up(self, listing: Listing) -> None:
        """After the store was away: the listed runs' summaries again, the followed runs'
        states and their trace lines since the last read."""
        model = self.model
        summaries, _ = listing
        for summary in summaries:
            if summary.run_id in model.stubs and not model.is_driven(summary.run_id):
                model.put_summary(summary)
                self.pump.mark(summary.run_id)
        followed = [rid for rid in self.feed.followed() if not model.is_driven(rid)]
        if not followed:
            return
        plan = [(rid, "follow", "read") for rid in followed]
        for (rid, _, _), (got, records) in zip(plan, await self._io(self._read, plan)):
            if isinstance(got, RunState) and not model.is_driven(rid):
                model.put_state(got)
            events = [e for e in map(event_from_record, records) if e is not None]
            if events:
                self.pump.feed(events)
            self.pump.mark(rid, structure=True)

    def _listed(self, new: bool) -> None:
        if new:
            self.pump.mark(structure=True)
        self.ready.set()
        if self.feed.blocking and self.on_listed is not None:
            self.on_listed()

    async def apply(self, batch: list[RunChange]) -> None:
        """One batch of changes into the model: the owners first, then what each changed run
        needs read (its summary, its state, its new trace records), read in one go."""
        model, pump, feed = self.model, self.pump, self.feed
        changes = [c for c in batch if REMOVED not in c and not model.is_driven(c.run_id)]
        asked = [c.run_id for c in changes if OWNER in c or NEW in c]
        structure: set[str] = set()
        if asked:
            for rid, owner in (await self._io(self._owners, asked)).items():
                if not model.is_driven(rid) and model.set_owner(rid, owner):
                    structure.add(rid)
                    if self.on_owner is not None:
                        self.on_owner(rid)
        plan: list[tuple[str, str | None, str | None]] = []  # (run, journal: how, trace: how)
        for change in changes:
            rid = change.run_id
            if model.is_driven(rid):
                continue
            journal = trace = None
            # Our own run's last saves and trace lines: its state is the one we drove. Not a run
            # of ours we left waiting for a decision: a short-lived ``tether approve`` may have
            # taken it, finished it and let go before its owner was ever seen here.
            ours = rid in model.ours and not model.held_elsewhere(rid) and rid in model.states \
                and not _waits(model.states[rid])
            if JOURNAL in change or NEW in change:
                if ours:
                    journal = "ours"
                elif rid in model.stubs and not feed.following(rid) and not model.held_elsewhere(rid) \
                        and rid != model.selected:
                    journal = "summary"  # listed, not shown: its summary will do
                else:
                    journal = "follow"
            if TRACE in change:
                trace = "ours" if ours else "read"
            plan.append((rid, journal, trace))
        results = await self._io(self._read, plan) if plan else []
        for (rid, journal, trace), (got, records) in zip(plan, results):
            if journal is not None:
                before = model.states.get(rid)
                if isinstance(got, RunSummary):
                    if model.put_summary(got):
                        structure.add(rid)
                elif isinstance(got, RunState) and not model.is_driven(rid):
                    if model.put_state(got):
                        structure.add(rid)
                after = model.states.get(rid)
                if after is not before and (before is None or after is None or _where(before) != _where(after)):
                    pump.approvals_dirty = True  # it may wait for approval now, or no longer
                pump.mark(rid)
            if trace == "ours":
                self.released(rid)  # what our own run wrote: seen through the sink
            elif records:
                events = [e for e in map(event_from_record, records) if e is not None]
                if events:
                    pump.feed(events)
        for rid in structure:
            pump.mark(rid, structure=True)
        self._drop_finished()

    def _owners(self, rids: list[str]) -> dict[str, Owner | None]:
        out: dict[str, Owner | None] = {}
        for rid in rids:
            try:
                out[rid] = self.feed.owner(rid)
            except (StateError, OSError) as exc:
                log.debug("the owner of %s could not be read: %s", rid, exc)
        return out

    def _read(self, plan: list[tuple[str, str | None, str | None]]) -> list[tuple[object, list[dict[str, Any]]]]:
        """What ``plan`` says to read, per run (in a worker thread for a network store)."""
        out: list[tuple[object, list[dict[str, Any]]]] = []
        for rid, journal, trace in plan:
            got: object = None
            records: list[dict[str, Any]] = []
            try:
                if journal == "summary":
                    got = self.feed.summary(rid)
                elif journal == "follow":
                    got = self.feed.follow(rid)
                if trace == "read":
                    records = self.feed.new_trace(rid)
            except (StateError, OSError) as exc:
                log.debug("run %s not readable yet: %s", rid, exc)
            out.append((got, records))
        return out

    def _drop_finished(self) -> None:
        """Stop following the runs nobody runs any more and nobody looks at (their state stays)."""
        for rid in [r for r in self.feed.followed() if not self.model.is_live(r) and r != self.model.selected]:
            self.feed.unfollow(rid)

    async def check_owners(self) -> list[str]:
        """Ask whether the processes holding runs elsewhere still live (a killed one tells
        nobody): one question to the store; the runs whose liveness changed."""
        model = self.model
        rids = [rid for rid, owner in model.owners.items() if owner.alive and not model.is_driven(rid)]
        if not rids or self._closed:
            return []
        try:
            owners = await self._io(self.feed.owners, rids)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # asked again in a second; the console goes on
            log.debug("owners not checked: %s", exc)
            return []
        changed, again = [], []
        followed: dict[str, RunState | None] = {}
        for rid, owner in owners.items():
            if model.is_driven(rid):
                continue
            if model.set_owner(rid, owner):
                changed.append(rid)
                if self.feed.following(rid):
                    again.append(rid)
        if again:  # what it saved last, before it died or let go
            with contextlib.suppress(Exception):
                followed = await self._io(self._follow_all, again)
            for rid, state in followed.items():
                if state is not None and not model.is_driven(rid):
                    model.put_state(state)
        return changed

    async def refusal(self) -> str | None:
        """Why this console may only watch the store, in words (None: it may operate)."""
        try:
            role = await self._io(self.store.read_only)  # asked up front, not learnt from a failed write
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return f"the store did not say what this console may do ({exc}); it only watches"
        if role is None:
            return None
        return (f"this console connects as {role}, a role that may only read the store: "
                f"Stop, approve, reject, resume and New run need the operator role")

    async def check_queue(self) -> bool:
        """Ask the workers' queue (a store that has one); True when what is shown changed."""
        if self._no_workers or self._closed:
            return False
        try:
            queue = await self._io(self._queue)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the queue is extra: the runs are shown without it
            log.debug("the queue was not read: %s", exc)
            return False
        if queue == self.model.queue:
            return False
        self.model.queue = queue
        return True

    def _queue(self) -> QueueInfo | None:
        """The workers' queue (None: their module is not installed here: asked once)."""
        try:
            # lazy: the workers' module loads psycopg, and may not be installed here (then asked once)
            from tether.workers.view import queue_view
        except ImportError:
            self._no_workers = True
            return None
        view = queue_view(self.store)
        return QueueInfo(view.depth, frozenset(view.queued), dict(view.executors))

    async def check_notifications(self) -> bool:
        """Read the notification sender's failures from the store (whichever process sends);
        True when what the header shows changed."""
        # lazy: tether.notify (its store of notices, sqlite3) at the first check, not at the console's start
        from tether.notify import sender_status

        if self._closed:
            return False
        try:
            lines = await asyncio.to_thread(sender_status, self.store)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # extra: the runs are shown without it
            log.debug("the notifications' status was not read: %s", exc)
            return False
        if lines == self.notify_lines:
            return False
        self.notify_lines = lines
        return True

    def driven_here(self, rid: str) -> None:
        """The console starts driving ``rid``: its events come from the sink now."""
        self.model.ours.add(rid)
        self.feed.unfollow(rid)

    def released(self, rid: str) -> None:
        """The console stopped driving ``rid``: what its trace holds now was seen."""
        self.feed.trace_seen(rid, self.pump.seen_seq(rid))

    async def aclose(self) -> None:
        """Stop the loads and reads under way, and let go of what the feed holds."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.close()

    def close(self) -> None:
        self._closed = True
        self.feed.close()


def _waits(state: RunState) -> bool:
    return state.status is Status.INTERRUPTED and isinstance(state.interruption, NeedsApproval)


def _where(state: object) -> tuple[object, object]:
    return (getattr(state, "status", None), getattr(state, "interruption", None))
