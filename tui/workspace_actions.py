"""A run's merge (``M``) and discard (``X``) from the console: the same operation as ``tether
merge`` and ``tether discard`` (:mod:`tether.actions.workspace`), its result in a dialog.

A merge is checked (conflicts by a dry run, a target checked out with changes the merge would
write over, the agent file's checks) and put to the rules and to people as the call
``merge``: the run then waits in the approvals pane like any call, and ``a`` there merges it.
A discard asks first. A part of :class:`~tether.tui.app.TetherApp` (mixed into it)."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.message_pump import MessagePump

from tether.harness import Harness
from tether.vocab.state import RunState, StateError
from tether.tui.screens.rules import ConfirmDialog
from tether.tui.screens.workspace import MergeDialog, MergeRequest, OutcomeDialog
from tether.tui.state.model import ConsoleModel
from tether.tui.state.text import one_line
from tether.actions.workspace import discardable, mergeable


class WorkspaceActions(MessagePump):
    """Mixed into :class:`~tether.tui.app.TetherApp`, never made alone."""

    harness: Harness
    model: ConsoleModel
    operator: str
    _bindings_dirty: bool

    def can_merge(self, rid: str) -> bool:
        """A worktree's run, made, that nothing runs now and that waits for no decision."""
        st = self.model.states.get(rid)
        return st is not None and mergeable(st) and not self.model.is_live(rid) and not self.model.is_queued(rid)

    def can_discard(self, rid: str) -> bool:
        st = self.model.states.get(rid)
        return st is not None and discardable(st) and not self.model.is_live(rid)

    def action_merge(self) -> None:
        rid = self.model.selected
        st = self.model.states.get(rid) if rid is not None else None
        if rid is None or st is None or not self.can_merge(rid):
            return

        def done(request: MergeRequest | None) -> None:
            if request is not None:
                self.notify(f"checking the merge of {one_line(rid, 60)}…", markup=False)
                self.run_worker(self._merge(rid, request), name=f"merge {rid}", group="workspace",
                                exit_on_error=False)

        self.push_screen(MergeDialog(st), done)  # type: ignore[attr-defined]

    async def _merge(self, rid: str, request: MergeRequest) -> None:
        from tether.workspaces.merging import waits_on_merge
        from tether.actions.workspace import merge_run

        try:
            state, words = await merge_run(self.harness.store, rid, into=request.into, squash=request.squash,
                                           by=self.operator)
        except asyncio.CancelledError:
            raise
        except (StateError, OSError) as exc:
            self._outcome("Not merged", str(exc), ok=False)
            return
        self._took(state)
        merge = (state.run_workspace.merge or {}) if state.run_workspace is not None else {}
        if waits_on_merge(state):
            title = "Asked: waiting for a decision"
        elif merge.get("stage") == "merged":
            title = "Merged"
        else:
            title = "Not merged"
        self._outcome(title, words, ok=title != "Not merged")

    def action_discard(self) -> None:
        from tether.actions.workspace import discard_question

        rid = self.model.selected
        st = self.model.states.get(rid) if rid is not None else None
        if rid is None or st is None or not self.can_discard(rid):
            return

        def done(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._discard(rid), name=f"discard {rid}", group="workspace", exit_on_error=False)

        self.push_screen(ConfirmDialog(discard_question(st), "Its files and its branch are removed; nothing "  # type: ignore[attr-defined]
                                       "merged is undone.", yes="Discard"), done)

    async def _discard(self, rid: str) -> None:
        from tether.actions.workspace import discard_run

        try:
            state, words = await discard_run(self.harness.store, rid, by=self.operator)
        except asyncio.CancelledError:
            raise
        except (StateError, OSError) as exc:
            self._outcome("Not discarded", str(exc), ok=False)
            return
        self._took(state)
        self._outcome("Discarded", words)

    def _took(self, state: RunState) -> None:
        """The run as the operation left it, on the screen now (the store's watch follows)."""
        self.model.put_state(state)
        self._bindings_dirty = True
        self.pump.mark(state.run_id, structure=True)  # type: ignore[attr-defined]
        self.follow_changes()  # type: ignore[attr-defined]

    def _outcome(self, title: str, words: str, *, ok: bool = True) -> None:
        self.push_screen(OutcomeDialog(title, words, ok=ok))  # type: ignore[attr-defined]
