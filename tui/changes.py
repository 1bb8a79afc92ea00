"""The Changes pane's half of the app: ``c`` shows what the selected run changed in its own
workspace in place of its trace, and keeps it up to date while the run works.

While the pane is shown, one task follows the selected run's workspace
(:func:`tether.workspaces.live.live_changes`: pushed by inotify on a thread of its own, read
with git as asyncio subprocesses) and hands each reading to the pane, then reads the
highlighted file's diff. Selecting another run, or its workspace being made or found, starts
the follow again; hiding the pane ends it (the watch's thread is joined). A reading also
updates the run's row in the runs list, which otherwise shows the counts its last operation
kept (:attr:`tether.vocab.state.RunWorkspace.changes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from typing import Any

from textual import on
from textual.message_pump import MessagePump

from tether.vocab.state import RunWorkspace
from tether.tui.widgets.changes import ChangesPane
from tether.tui.state.model import ConsoleModel
from tether.tui.screens.console import Shown
from tether.tui.state.text import one_line


def why_not(ws: RunWorkspace | None) -> str | None:
    """Why a run's changes cannot be read here, in words (None: they can)."""
    if ws is None:
        return ("This run works in its agent's own folder (isolation = \"none\"): it has no workspace "
                "of its own to show the changes of. docs/workspaces.md says how to give it one.")
    if ws.stage == "discarded":
        return "This run's workspace was discarded (tether discard): its changes are gone."
    if ws.stage in ("planned", "creating") or ws.path is None:
        return f"This run's {ws.kind} is not made yet: it is made when the run starts."
    if ws.base_commit is None or ws.meta is None:
        return "Reading the run…"
    if ws.host and ws.host != socket.gethostname():
        return f"This run's workspace is on the host {ws.host}: its changes can be read there (tether diff)."
    return None


class ChangesFollowing(MessagePump):
    """Mixed into :class:`~tether.tui.app.TetherApp`, never made alone."""

    model: ConsoleModel
    _changes_task: asyncio.Task[None] | None = None
    _changes_key: tuple[Any, ...] | None = None
    _diff_task: asyncio.Task[None] | None = None

    @property
    def changes_shown(self) -> bool:
        return self.changes_pane.display

    @property
    def changes_pane(self) -> ChangesPane:
        return self.console_screen.query_one("#changes", ChangesPane)  # type: ignore[attr-defined]

    def action_changes(self) -> None:
        """Show the selected run's changes in place of its trace, or the trace again."""
        pane = self.changes_pane
        shown = not pane.display
        pane.display = shown
        self.console_screen.query_one("#traces").display = not shown  # type: ignore[attr-defined]
        if shown:
            self.follow_changes()
        else:
            self._stop_changes()

    def follow_changes(self) -> None:
        """Follow the selected run's workspace, if the pane is shown and it is not followed yet."""
        if not self._console_up or not self.changes_shown:  # type: ignore[attr-defined]
            return
        rid = self.model.selected
        st = self.model.states.get(rid) if rid is not None else None
        ws = st.run_workspace if st is not None else None
        key = (rid, None if ws is None else (ws.path, ws.base_commit, ws.meta, ws.stage == "discarded"))
        if key == self._changes_key:
            return
        self._stop_changes()
        self._changes_key = key
        self.timeline_at = None  # another run, or its workspace anew: the live view (tether.tui.timeline)
        words = "No run selected." if rid is None else why_not(ws)
        if words is not None or rid is None or ws is None:
            self.changes_pane.show_words(rid, words or "")
            return
        self.changes_pane.show_words(rid, "Reading what the run changed…")
        self._changes_task = asyncio.create_task(self._follow_changes(rid, ws), name=f"tether console: changes of {rid}")

    def _stop_changes(self) -> None:
        self._changes_key = None
        for task in (self._changes_task, self._diff_task):
            if task is not None:
                task.cancel()
        self._changes_task = self._diff_task = None

    async def stop_changes(self) -> None:
        """End the follow and wait for it (the app's unmount)."""
        tasks = [t for t in (self._changes_task, self._diff_task) if t is not None]
        self._stop_changes()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _follow_changes(self, rid: str, ws: RunWorkspace) -> None:
        from tether.workspaces.git import GitError
        from tether.workspaces.live import live_changes

        pane = self.changes_pane
        try:
            async with contextlib.aclosing(live_changes(ws)) as readings:
                async for found in readings:
                    pane.show_changes(rid, found)
                    self._note_live(rid, ws, found.counts())
                    current = pane.current
                    if current is not None:
                        await self._read_diff(rid, ws, current)
                    self.post_message(Shown("changes", rid))
        except (GitError, OSError) as exc:
            pane.show_words(rid, f"The changes could not be read: {one_line(exc, 300)}")

    def _note_live(self, rid: str, ws: RunWorkspace, counts: dict[str, int]) -> None:
        """The runs list shows what the pane read, not only what the last operation kept."""
        if ws.changes is None or any(ws.changes.get(k) != v for k, v in counts.items()):
            ws.changes = {**counts, "at": time.time()}
            self.pump.mark(rid)  # type: ignore[attr-defined]

    async def _read_diff(self, rid: str, ws: RunWorkspace, path: str) -> None:
        from tether.workspaces.changes import diff

        text = await diff(ws, (path,))
        if self.changes_pane.run_id == rid:
            self.changes_pane.show_diff(path, text, rid)

    @on(ChangesPane.FileHighlighted)
    def _file_highlighted(self, event: ChangesPane.FileHighlighted) -> None:
        if getattr(self, "timeline_at", None) is not None:  # a checkpoint is shown: its step's diff
            if self._diff_task is not None:
                self._diff_task.cancel()
            self._diff_task = asyncio.create_task(self.show_step_diff(event.path),  # type: ignore[attr-defined]
                                                  name=f"tether console: checkpoint diff of {event.path}")
            return
        rid = self.changes_pane.run_id
        st = self.model.states.get(rid) if rid is not None else None
        if st is None or st.run_workspace is None or self._changes_task is None:
            return
        if self._diff_task is not None:
            self._diff_task.cancel()
        self._diff_task = asyncio.create_task(self._one_diff(rid, st.run_workspace, event.path),  # type: ignore[arg-type]
                                              name=f"tether console: diff of {event.path}")

    async def _one_diff(self, rid: str, ws: RunWorkspace, path: str) -> None:
        from tether.workspaces.git import GitError

        try:
            await self._read_diff(rid, ws, path)
        except (GitError, OSError) as exc:
            self.changes_pane.show_words(rid, f"The diff of {one_line(path, 80)} could not be read: {one_line(exc, 300)}")
