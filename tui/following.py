"""Following the store: the runs listed, the events in, and who holds what.

A collaborator of :class:`~tether.tui.app.TetherApp`, made by it and handed what it needs:
the store, the model, the options, and the app as a :class:`ConsoleHost` (the few things it
asks of the screen, by name). It makes the :class:`~tether.tui.state.pump.EventPump` and the
:class:`~tether.tui.state.store_client.StoreClient`, which the app keeps. The harness calls
:meth:`StoreFollowing.sink` synchronously from the loop of a run this console drives (the
fast path); the runs other processes drive come from the store client, which follows the
store (inotify on the file store, LISTEN on PostgreSQL) and reads only what was appended.
Either way the event goes to the pump, which asks for a
:class:`~tether.tui.screens.console.Flush` when the views are out of date. A killed owner
tells nobody, so the store's locks are asked once a second whether they live.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Protocol

from textual.css.query import NoMatches
from textual.message import Message

from tether.store.protocol import Store
from tether.tui.screens.console import Flush
from tether.tui.state.model import ConsoleModel
from tether.tui.state.options import ConsoleOptions
from tether.tui.state.pump import EventPump
from tether.tui.state.store_client import StoreClient
from tether.vocab.events import Event


class ConsoleHost(Protocol):
    """What following the store asks of the console (the app is one)."""

    @property
    def rules_shown(self) -> bool: ...  # the rules screen is up: a rule another process changed is shown

    def post_message(self, message: Message) -> bool: ...

    def notify(self, message: str, **how: Any) -> None: ...  # App.notify: title, severity, markup, timeout

    def select(self, rid: str | None) -> None: ...

    def show_events(self) -> None: ...

    def keys_changed(self) -> None: ...  # what applies to the selected run may have: the keys are looked at again

    def refresh_selected(self) -> None: ...  # the selected run's header and panes, now

    def refresh_subtitle(self) -> None: ...

    async def reload_rules(self) -> None: ...


class StoreFollowing:
    """The store followed, for one console."""

    def __init__(self, host: ConsoleHost, store: Store, model: ConsoleModel, options: ConsoleOptions) -> None:
        self.host = host
        self.model = model
        self.options = options
        self.pump = EventPump(model, request_flush=self._request_flush, trace_path=self.trace_path,
                              timings=options.timings, on_buffer=self._trace_opened)
        self.client = StoreClient(store, model, self.pump, on_owner=self._owner_changed,
                                  on_error=self._store_lost, on_listed=self._listed)
        self._checking = False

    def reload_runs(self) -> None:
        """List every run on a store of local files, from its index (runs this console drives
        keep their live state). A network store is listed by the store client, off the loop."""
        self.client.take_listing(*self.client.listing())
        self.pump.structure_dirty = self.pump.approvals_dirty = True

    async def follow(self) -> None:
        """What this console may do on the store (said up front), then follow the store."""
        if self.client.blocking:
            self.model.refusal = await self.client.refusal()
            await self.client.check_queue()
            self.host.keys_changed()
            self.pump.mark(structure=True)
        await self.client.run(follow=self.options.watch)

    def _listed(self) -> None:
        """A network store's first listing is in (it was taken off the loop): show it."""
        if self.model.selected is None and self.model.states:
            self.host.select(self.model.ordered_ids()[-1])
        self.host.show_events()

    def _store_lost(self, words: str, lost: bool = True) -> None:
        if lost:
            self.host.notify(words, title="not following the store", severity="error", markup=False, timeout=15)
        else:
            self.host.notify(words, title="the store is back", severity="information", markup=False, timeout=10)

    def _trace_opened(self, rid: str) -> None:
        self.client.prime(rid)

    async def ready(self) -> None:
        """Wait until the console follows the store: what is written from then on is seen."""
        await self.client.ready.wait()

    def trace_path(self, rid: str) -> Path | None:
        return self.client.trace_path(rid)

    # ---- the event sink, and asking for a flush -----------------------------------------
    def sink(self, event: Event) -> None:
        """Called synchronously by the run's loop for every event: keep it cheap."""
        self.pump.sink(event)

    def _request_flush(self) -> None:
        self.host.post_message(Flush())

    # ---- owners ------------------------------------------------------------------------------
    def _owner_changed(self, rid: str) -> None:
        self.host.keys_changed()
        self.pump.mark(rid, structure=True)

    async def check_owners(self) -> None:
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
                self.pump.mark(structure=True)
                self.host.keys_changed()
            if await self.client.check_notifications():
                self.host.refresh_subtitle()
            if self.host.rules_shown:  # a rule another process added or removed: shown
                await self.host.reload_rules()
        finally:
            self._checking = False
        rid = self.model.selected
        # The header says who holds the run: its owner's heartbeat, or the worker whose workflow
        # waits for its decision (known from the queue, which no run event announces).
        if rid is not None and (queue_changed or rid in self.model.owners and not self.model.is_driven(rid)):
            with contextlib.suppress(NoMatches):
                self.host.refresh_selected()
