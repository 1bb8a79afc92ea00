"""Following the store: the runs listed, the events in, and who holds what.

A part of :class:`~tether.tui.app.TetherApp` (mixed into it). The harness calls
:meth:`StoreFollowing._sink` synchronously from the loop of a run this console drives (the
fast path); the runs other processes drive come from
:class:`~tether.tui.state.store_client.StoreClient`, which follows the store (inotify on the
file store, LISTEN on PostgreSQL) and reads only what was appended. Either way the event
goes to the :class:`~tether.tui.state.pump.EventPump`, which asks for a
:class:`~tether.tui.screens.console.Flush` when the views are out of date. A killed owner tells
nobody, so the store's locks are asked once a second whether they live.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from textual.css.query import NoMatches
from textual.message_pump import MessagePump

from tether.vocab.events import Event
from tether.tui.screens.rules import RulesScreen
from tether.tui.state.model import ConsoleModel
from tether.tui.state.options import ConsoleOptions
from tether.tui.state.pump import EventPump
from tether.tui.screens.console import Flush
from tether.tui.state.store_client import StoreClient


class StoreFollowing(MessagePump):
    """The store's half of the app. A :class:`MessagePump` only to be mixed into
    :class:`~tether.tui.app.TetherApp` with the other parts, never made alone."""

    options: ConsoleOptions
    model: ConsoleModel
    pump: EventPump
    client: StoreClient

    def reload_runs(self) -> None:
        """List every run on a store of local files, from its index (runs this console drives
        keep their live state). A network store is listed by the store client, off the loop."""
        self.client.take_listing(*self.client.listing())
        self.pump.structure_dirty = self.pump.approvals_dirty = True

    async def _follow(self) -> None:
        """What this console may do on the store (said up front), then follow the store."""
        if self.client.blocking:
            self.model.refusal = await self.client.refusal()
            await self.client.check_queue()
            self._bindings_dirty = True
            self._mark(structure=True)
        await self.client.run(follow=self.options.watch)

    def _listed(self) -> None:
        """A network store's first listing is in (it was taken off the loop): show it."""
        if self.selected is None and self.states:
            self.select(self.model.ordered_ids()[-1])
        self.show_events()

    def _store_lost(self, words: str, lost: bool = True) -> None:
        if lost:
            self.notify(words, title="not following the store", severity="error", markup=False, timeout=15)
        else:
            self.notify(words, title="the store is back", severity="information", markup=False, timeout=10)

    def _trace_opened(self, rid: str) -> None:
        self.client.prime(rid)

    async def store_ready(self) -> None:
        """Wait until the console follows the store: what is written from then on is seen."""
        await self.client.ready.wait()

    def _trace_path(self, rid: str) -> Path | None:
        return self.client.trace_path(rid)

    # ---- the event sink, and asking for a flush -----------------------------------------
    def _sink(self, event: Event) -> None:
        """Called synchronously by the run's loop for every event: keep it cheap."""
        self.pump.sink(event)

    def _request_flush(self) -> None:
        self.post_message(Flush())

    def _mark(self, run_id: str | None = None, *, structure: bool = False) -> None:
        self.pump.mark(run_id, structure=structure)

    # ---- owners ------------------------------------------------------------------------------
    def _owner_changed(self, rid: str) -> None:
        self._bindings_dirty = True
        self.pump.mark(rid, structure=True)

    async def _check_owners(self) -> None:
        """A killed owner tells nobody: ask the store (its locks) once a second. And show the
        heartbeat's age, and the queue's depth."""
        if self._checking:  # the last check is still waiting on the store
            return
        self._checking = True
        queue_changed = False
        try:
            for rid in await self.client.check_owners():
                self._owner_changed(rid)
            if await self.client.check_queue():
                queue_changed = True
                self._mark(structure=True)
                self._bindings_dirty = True
            if await self.client.check_notifications():
                self._refresh_subtitle()
            if isinstance(self.screen, RulesScreen):  # a rule another process added or removed: shown
                await self._reload_rules()
        finally:
            self._checking = False
        rid = self.selected
        # The header says who holds the run: its owner's heartbeat, or the worker whose workflow
        # waits for its decision (known from the queue, which no run event announces).
        if rid is not None and (queue_changed or rid in self.model.owners and not self.model.is_driven(rid)):
            with contextlib.suppress(NoMatches):
                self._refresh_detail()
