"""A run's merge (``M``) and discard (``X``) from the console: the same operation as ``tether
merge`` and ``tether discard`` (:mod:`tether.actions.workspace`), its result in a dialog.

A merge is checked (conflicts by a dry run, a target checked out with changes the merge would
write over, the agent file's checks) and put to the rules and to people as the call
``merge``: the run then waits in the approvals pane like any call, and ``a`` there merges it.
A discard asks first. A collaborator of :class:`~tether.tui.app.TetherApp`, made by it with
the store, the model (the operator's name among what it knows) and the pump, and the app as
the :class:`WorkspaceHost` it asks for dialogs, workers and notifications; the app's ``M``
and ``X`` actions call it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from textual.screen import Screen
from textual.worker import Worker

from tether.actions.workspace import discard_question, discard_run, discardable, merge_run, mergeable
from tether.store.protocol import Store
from tether.vocab.state import RunState, StateError
from tether.tui.screens.rules import ConfirmDialog
from tether.tui.screens.workspace import MergeDialog, MergeRequest, OutcomeDialog
from tether.tui.state.model import ConsoleModel
from tether.tui.state.pump import EventPump
from tether.tui.state.text import one_line
from tether.workspaces.merging import waits_on_merge


class WorkspaceHost(Protocol):
    """What a merge or a discard asks of the console (the app is one)."""

    def notify(self, message: str, **how: Any) -> None: ...  # App.notify: title, severity, markup, timeout

    def run_worker(self, work: Any, **how: Any) -> Worker[Any]: ...  # App.run_worker: name, group, exit_on_error

    def push_screen(self, screen: Screen[Any], callback: Callable[[Any], None] | None = None) -> Any: ...

    def keys_changed(self) -> None: ...  # what applies to the selected run may have: the keys are looked at again

    def follow_changes(self) -> None: ...  # the panes of the selected run follow it again


class WorkspaceActions:
    """Merge and discard, for one console."""

    def __init__(self, host: WorkspaceHost, store: Store, model: ConsoleModel, pump: EventPump) -> None:
        self.host = host
        self.store = store
        self.model = model
        self.pump = pump

    def can_merge(self, rid: str) -> bool:
        """A worktree's run, made, that nothing runs now and that waits for no decision."""
        st = self.model.states.get(rid)
        return st is not None and mergeable(st) and not self.model.is_live(rid) and not self.model.is_queued(rid)

    def can_discard(self, rid: str) -> bool:
        st = self.model.states.get(rid)
        return st is not None and discardable(st) and not self.model.is_live(rid)

    def merge(self) -> None:
        """``M``: the merge dialog for the selected run, then the merge, checked, off the loop."""
        rid = self.model.selected
        st = self.model.states.get(rid) if rid is not None else None
        if rid is None or st is None or not self.can_merge(rid):
            return

        def done(request: MergeRequest | None) -> None:
            if request is not None:
                self.host.notify(f"checking the merge of {one_line(rid, 60)}…", markup=False)
                self.host.run_worker(self._merge(rid, request), name=f"merge {rid}", group="workspace",
                                     exit_on_error=False)

        self.host.push_screen(MergeDialog(st), done)

    async def _merge(self, rid: str, request: MergeRequest) -> None:
        try:
            state, words = await merge_run(self.store, rid, into=request.into, squash=request.squash,
                                           by=self.model.operator)
        except asyncio.CancelledError:
            raise
        except (StateError, OSError) as exc:
            self.outcome("Not merged", str(exc), ok=False)
            return
        self.took(state)
        merge = (state.run_workspace.merge or {}) if state.run_workspace is not None else {}
        if waits_on_merge(state):
            title = "Asked: waiting for a decision"
        elif merge.get("stage") == "merged":
            title = "Merged"
        else:
            title = "Not merged"
        self.outcome(title, words, ok=title != "Not merged")

    def discard(self) -> None:
        """``X``: asks first, then removes the selected run's workspace and branch."""
        rid = self.model.selected
        st = self.model.states.get(rid) if rid is not None else None
        if rid is None or st is None or not self.can_discard(rid):
            return

        def done(yes: bool | None) -> None:
            if yes:
                self.host.run_worker(self._discard(rid), name=f"discard {rid}", group="workspace",
                                     exit_on_error=False)

        self.host.push_screen(ConfirmDialog(discard_question(st), "Its files and its branch are removed; nothing "
                                            "merged is undone.", yes="Discard"), done)

    async def _discard(self, rid: str) -> None:
        try:
            state, words = await discard_run(self.store, rid, by=self.model.operator)
        except asyncio.CancelledError:
            raise
        except (StateError, OSError) as exc:
            self.outcome("Not discarded", str(exc), ok=False)
            return
        self.took(state)
        self.outcome("Discarded", words)

    def took(self, state: RunState) -> None:
        """The run as the operation left it, on the screen now (the store's watch follows)."""
        self.model.put_state(state)
        self.host.keys_changed()
        self.pump.mark(state.run_id, structure=True)
        self.host.follow_changes()

    def outcome(self, title: str, words: str, *, ok: bool = True) -> None:
        """An operation's result, in a dialog."""
        self.host.push_screen(OutcomeDialog(title, words, ok=ok))
