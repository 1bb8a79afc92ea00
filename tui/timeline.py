"""The Changes pane's timeline: ``←`` and ``→`` move between the selected run's checkpoints,
showing at each what that step changed (its files, and the highlighted file's diff), and ``B``
rewinds the run to the one shown, after a confirmation (docs/checkpoints.md).

``←`` from the live view goes to the last checkpoint, ``→`` past the last one comes back to
the live view. The checkpoints are read with git (:func:`tether.workspaces.checkpoints.listing`)
when the timeline is first entered for a run. The rewind is ``tether rewind``'s own operation
(:func:`tether.workspaces.rewinding.rewind_run`): a run a process holds is refused in words,
and its result is said in a dialog. A collaborator of :class:`~tether.tui.app.TetherApp`,
made by it with the store, the model (the operator's name among what it knows) and the pump,
what a merge's result is said with (``took``, ``outcome``), and the app as the
:class:`TimelineHost` it asks for the Changes pane, dialogs, workers and notifications; the
app's arrow and ``B`` actions call it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from textual.screen import Screen
from textual.worker import Worker

from tether.actions import takeback
from tether.store.protocol import Store
from tether.vocab.state import RunState, StateError
from tether.tui.screens.rules import ConfirmDialog
from tether.tui.state.model import ConsoleModel
from tether.tui.state.pump import EventPump
from tether.tui.state.text import one_line
from tether.tui.widgets.changes import ChangesPane, why_not
from tether.workspaces.changes import Changes, FileChange
from tether.workspaces.checkpoints import Checkpoint, listing, step_diff
from tether.workspaces.git import GitError

TIMELINE_ACTIONS = frozenset({"checkpoint_earlier", "checkpoint_later", "rewind_here", "fork_here"})


class TimelineHost(Protocol):
    """What the timeline asks of the console (the app is one)."""

    @property
    def changes_pane(self) -> ChangesPane: ...

    @property
    def changes_shown(self) -> bool: ...

    def notify(self, message: str, **how: Any) -> None: ...  # App.notify: title, severity, markup, timeout

    def run_worker(self, work: Any, **how: Any) -> Worker[Any]: ...  # App.run_worker: name, group, exclusive

    def push_screen(self, screen: Screen[Any], callback: Callable[[Any], None] | None = None) -> Any: ...


class CheckpointTimeline:
    """The Changes pane's checkpoints, for one console."""

    def __init__(self, host: TimelineHost, store: Store, workspaces_dir: Path, model: ConsoleModel,
                 pump: EventPump, *, took: Callable[[RunState], None],
                 outcome: Callable[..., None]) -> None:
        """``took``: the run as an operation left it, on the screen now; ``outcome(title, words,
        ok=True)``: an operation's result, in a dialog (the merge's, as the workspace actions say it)."""
        self.host = host
        self.store = store
        self.workspaces_dir = workspaces_dir
        self.model = model
        self.pump = pump
        self._took = took
        self._outcome = outcome
        self._timeline: list[Checkpoint] | None = None
        self._timeline_run: str | None = None

    @property
    def changes_pane(self) -> ChangesPane:
        return self.host.changes_pane

    def _timeline_workspace(self) -> Any:
        rid = self.model.selected
        st = self.model.states.get(rid) if rid is not None else None
        ws = st.run_workspace if st is not None else None
        if not self.host.changes_shown or ws is None or why_not(ws) is not None:
            return None
        return ws

    def check(self, action: str) -> bool | None:
        """The arrows only while the Changes pane shows a run with checkpoints to move in (else
        they are the focused widget's); ``B`` only on a checkpoint of a run nothing runs."""
        if action in ("rewind_here", "fork_here"):
            rid = self.model.selected
            shown = self.changes_pane.timeline_at is not None and rid == self._timeline_run
            return True if shown and (action == "fork_here" or not self.model.is_live(rid)) else None
        return self._timeline_workspace() is not None

    def move(self, by: int) -> None:
        """``←`` (``by`` -1) or ``→`` (1): the checkpoint before or after the one shown."""
        self.host.run_worker(self._move(by), name="checkpoint timeline", group="timeline", exclusive=True,
                             exit_on_error=False)

    async def _move(self, by: int) -> None:
        ws = self._timeline_workspace()
        rid = self.model.selected
        if ws is None or rid is None:
            return
        pane = self.changes_pane
        if self._timeline is None or self._timeline_run != rid or pane.timeline_at is None:
            try:
                self._timeline = await listing(ws, rid)
            except (GitError, OSError) as exc:
                self.host.notify(f"The checkpoints could not be read: {one_line(exc, 200)}", severity="error", markup=False)
                return
            self._timeline_run = rid
        count = len(self._timeline)
        if not count:
            self.host.notify("No checkpoints yet: one is taken after each step that changes the workspace.", markup=False)
            return
        at = pane.timeline_at
        if by < 0:
            at = count - 1 if at is None else max(0, at - 1)
        elif at is None:
            return
        else:
            at = at + 1 if at + 1 < count else None
        if at is None:
            pane.follow_again()
            return
        pane.pause()  # the live view stops following; what it followed stays, so a refresh does not restart it
        pane.timeline_at = at
        cp = self._timeline[at]
        files = tuple(FileChange(f["path"], f["status"], f["added"], f["deleted"]) for f in cp.files)
        pane.show_changes(rid, Changes(files, cp.tree))
        what = cp.label or (f"{cp.tool} ({cp.call_id})" if cp.tool else "")
        pane.border_subtitle = f"checkpoint {cp.step} of {count} · {one_line(what, 40)} · ←/→ · B rewinds here"
        if pane.current is not None:
            await self.show_step_diff(pane.current)
        else:
            pane.show_words(rid, f"checkpoint {cp.step}: no files changed in this step")

    def file_highlighted(self, path: str) -> None:
        """A file moved to while a checkpoint is shown: its step's diff."""
        self.host.run_worker(self.show_step_diff(path), name=f"checkpoint diff of {path}",
                             group="timeline-diff", exclusive=True, exit_on_error=False)

    async def show_step_diff(self, path: str) -> None:
        """The diff of ``path`` made by the step of the checkpoint shown."""
        ws = self._timeline_workspace()
        if ws is None or self.changes_pane.timeline_at is None or self._timeline is None:
            return
        rid = self._timeline_run
        text = await step_diff(ws, self._timeline[self.changes_pane.timeline_at], path)
        if self.changes_pane.run_id == rid and self.changes_pane.timeline_at is not None:
            self.changes_pane.show_diff(path, text, rid)

    def rewind_here(self) -> None:
        """``B``: rewind the run to the checkpoint shown, after a confirmation."""
        rid = self.model.selected
        if self.check("rewind_here") is None or self._timeline is None or self.changes_pane.timeline_at is None:
            return
        step = self._timeline[self.changes_pane.timeline_at].step

        def done(yes: bool | None) -> None:
            if yes:
                self.host.run_worker(self._rewind(rid, step), name=f"rewind {rid}", group="workspace",
                                     exit_on_error=False)

        self.host.push_screen(ConfirmDialog(
            f"Rewind {rid} to checkpoint {step}?",
            "Its workspace and its transcript go back to that step. The present is kept as a checkpoint first: "
            f"tether rewind {rid} --undo brings it all back.", yes="Rewind"), done)

    async def _rewind(self, rid: str, step: int) -> None:
        try:
            state, said = await takeback.rewind(self.store, rid, to=step, by=self.model.operator)
        except asyncio.CancelledError:
            raise
        except (StateError, OSError) as exc:
            self._outcome("Not rewound", str(exc), ok=False)
            return
        self._timeline = None
        self.changes_pane.stop()  # followed anew, from the live view, on the refresh of the run taken
        self.changes_pane.timeline_at = None
        self._took(state)
        self._outcome("Rewound", "\n".join(said))

    def fork_here(self) -> None:
        """A new run from the checkpoint shown (``tether fork RUN --at N``); the original is only read."""
        rid = self.model.selected
        if self.check("fork_here") is None or self._timeline is None or self.changes_pane.timeline_at is None:
            return
        self.host.run_worker(self._fork(rid, self._timeline[self.changes_pane.timeline_at].step),
                             name=f"fork {rid}", group="workspace", exit_on_error=False)

    async def _fork(self, rid: str, step: int) -> None:
        try:
            state, origin = await takeback.fork(self.store, rid, step, self.workspaces_dir)
        except asyncio.CancelledError:
            raise
        except (StateError, OSError) as exc:
            self._outcome("Not forked", str(exc), ok=False)
            return
        self.model.put_state(state)
        self.pump.mark(state.run_id, structure=True)
        told = takeback.fork_words(state, origin)
        self._outcome("Forked", f"run {state.run_id} forked from {rid} at checkpoint {step}: its workspace "
                      f"starts there, {told}. Select it and follow up (m) or resume it (R) to go on.")
