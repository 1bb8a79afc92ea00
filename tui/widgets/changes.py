"""The Changes pane: what the selected run changed in its own workspace, as it works.

The files it added, changed and deleted with their +/- line counts (a list to move in), and
the highlighted file's unified diff against the workspace's base, coloured. ``c`` shows it
in place of the trace. It is a :class:`~tether.tui.widgets.run_pane.RunPane`: the app hands
it the selected run, and while it is shown it follows that run's workspace itself
(:func:`tether.workspaces.live.live_changes`: pushed by inotify on a thread of its own, read
with git as asyncio subprocesses), then reads the highlighted file's diff. Another run, or
its workspace being made or found, starts the follow again; hiding the pane ends it (the
watch's thread is joined). Each reading goes up as :class:`ChangesPane.Read`, so the runs
list shows what was read, not only the counts the last operation kept
(:attr:`tether.vocab.state.RunWorkspace.changes`).

The checkpoint timeline (:mod:`tether.tui.timeline`) pauses the follow to show a step
(:meth:`ChangesPane.pause`); the diff of a file moved to then is its step's, so the pane
asks for it (:class:`ChangesPane.FileHighlighted`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tether.tui.state.text import clean, one_line
from tether.tui.widgets.approval_view import diff_text
from tether.tui.widgets.run_pane import RunPane
from tether.vocab.state import RunState, RunWorkspace
from tether.workspaces.changes import Changes, FileChange, diff
from tether.workspaces.git import GitError

STATUS_MARKS = {"added": ("A", "green"), "changed": ("M", "yellow"), "deleted": ("D", "red")}


def file_line(change: FileChange) -> Text:
    """``M src/app.py  +3 −1`` (``binary`` for a binary file)."""
    mark, style = STATUS_MARKS[change.status]
    out = Text.assemble((mark, f"bold {style}"), " ", clean(change.path), "  ")
    if change.added is None:
        out.append("binary", style="dim")
    else:
        out.append(f"+{change.added}", style="green")
        out.append(f" \u2212{change.deleted}", style="red")
    return out


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


class ChangesPane(RunPane):
    """The files a run changed, and the highlighted one's diff."""

    BORDER_TITLE = "Changes"

    class FileHighlighted(Message):
        """The operator moved to ``path`` while a checkpoint is shown: its step's diff is wanted."""

        def __init__(self, path: str) -> None:
            super().__init__()
            self.path = path

    class Read(Message):
        """A reading of ``run_id``'s workspace was shown: its ``counts`` (added, changed, deleted)."""

        def __init__(self, run_id: str, workspace: RunWorkspace, counts: dict[str, int]) -> None:
            super().__init__()
            self.run_id, self.workspace, self.counts = run_id, workspace, counts

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._files: tuple[FileChange, ...] = ()
        self.run_id: str | None = None
        self._listing = False  # the list shows a reading (not words)
        self.timeline_at: int | None = None
        """The index of the checkpoint shown (None: the live view; :mod:`tether.tui.timeline`)."""
        self._followed: tuple[Any, ...] | None = None  # what is followed: the run and its workspace
        self._follow_task: asyncio.Task[None] | None = None
        self._file_diff_task: asyncio.Task[None] | None = None
        self._run: tuple[str | None, RunState | None] = (None, None)

    @property
    def following(self) -> bool:
        """A run's workspace is being followed live."""
        return self._follow_task is not None

    def show_run(self, run_id: str | None, state: RunState | None) -> None:
        """Follow ``run_id``'s workspace, if the pane is shown and it is not followed yet."""
        self._run = (run_id, state)
        if not self.display:
            return
        ws = state.run_workspace if state is not None else None
        key = (run_id, None if ws is None else (ws.path, ws.base_commit, ws.meta, ws.stage == "discarded"))
        if key == self._followed:
            return
        self.stop()
        self._followed = key
        self.timeline_at = None  # another run, or its workspace anew: the live view
        words = "No run selected." if run_id is None else why_not(ws)
        if words is not None or run_id is None or ws is None:
            self.show_words(run_id, words or "")
            return
        self.show_words(run_id, "Reading what the run changed…")
        self._follow_task = asyncio.create_task(self._follow(run_id, ws), name=f"tether console: changes of {run_id}")

    def toggle(self) -> bool:
        """Shown (the app hands it the run to follow) or hidden (the follow ended); returns which."""
        self.display = not self.display
        if not self.display:
            self.stop()
        return bool(self.display)

    def follow_again(self) -> None:
        """Back to the live view: the run handed in last is followed anew."""
        self.stop()
        self.timeline_at = None
        self.show_run(*self._run)

    def pause(self) -> None:
        """The live follow stops (a checkpoint is shown); what it followed stays, so the next
        :meth:`show_run` of the same run does not restart it."""
        for task in (self._follow_task, self._file_diff_task):
            if task is not None:
                task.cancel()
        self._follow_task = self._file_diff_task = None

    def stop(self) -> None:
        self._followed = None
        self.pause()

    async def on_unmount(self) -> None:
        """End the follow and wait for it (the watch's thread is joined)."""
        tasks = [t for t in (self._follow_task, self._file_diff_task) if t is not None]
        self.stop()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _follow(self, rid: str, ws: RunWorkspace) -> None:
        # lazy: the live reading loads watchfiles and multiprocessing, only once the pane is shown
        from tether.workspaces.live import live_changes

        try:
            async with contextlib.aclosing(live_changes(ws)) as readings:
                async for found in readings:
                    self.show_changes(rid, found)
                    current = self.current
                    if current is not None:
                        await self._read_diff(rid, ws, current)
                    self.post_message(self.Read(rid, ws, found.counts()))
        except (GitError, OSError) as exc:
            self.show_words(rid, f"The changes could not be read: {one_line(exc, 300)}")

    async def _read_diff(self, rid: str, ws: RunWorkspace, path: str) -> None:
        text = await diff(ws, (path,))
        if self.run_id == rid:
            self.show_diff(path, text, rid)

    async def _one_diff(self, rid: str, ws: RunWorkspace, path: str) -> None:
        try:
            await self._read_diff(rid, ws, path)
        except (GitError, OSError) as exc:
            self.show_words(rid, f"The diff of {one_line(path, 80)} could not be read: {one_line(exc, 300)}")

    def compose(self) -> ComposeResult:
        yield OptionList(id="changes-files")
        with VerticalScroll(id="changes-diff-scroll"):
            yield Static(id="changes-diff")

    @property
    def files(self) -> tuple[FileChange, ...]:
        return self._files

    @property
    def current(self) -> str | None:
        """The highlighted file's path."""
        index = self.query_one("#changes-files", OptionList).highlighted
        return self._files[index].path if index is not None and 0 <= index < len(self._files) else None

    def show_words(self, run_id: str | None, words: str) -> None:
        """No changes to list: why, in words (no workspace, not made yet, not on this host...)."""
        self.run_id = run_id
        self._files = ()
        self._listing = False
        self.query_one("#changes-files", OptionList).clear_options()
        self.query_one("#changes-diff", Static).update(Text(words, style="dim"))
        self.border_subtitle = ""

    def show_changes(self, run_id: str, changes: Changes) -> None:
        """The run's files; the highlighted file stays highlighted while it is listed."""
        files = self.query_one("#changes-files", OptionList)
        keep = self.current if run_id == self.run_id else None
        self.run_id = run_id
        self.border_subtitle = changes.words()
        if changes.files == self._files and self._listing:
            return
        self._listing = True
        paths = [f.path for f in changes.files]
        with self.prevent(OptionList.OptionHighlighted):
            files.clear_options()
            files.add_options([Option(file_line(f), id=f.path) for f in changes.files])
            self._files = changes.files
            files.highlighted = paths.index(keep) if keep in paths else (0 if paths else None)
        if not paths:
            self.query_one("#changes-diff", Static).update(Text("no changes yet", style="dim"))

    def show_diff(self, path: str, diff: str, run_id: str) -> None:
        shown = diff_text(diff, more=f"tether diff {run_id} {path} has the whole diff") if diff.strip() \
            else Text(f"{clean(path)}: no difference left", style="dim")
        self.query_one("#changes-diff", Static).update(shown)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        path = event.option.id
        if path is None:
            return
        if self.timeline_at is not None:  # a checkpoint is shown: its step's diff, which the timeline reads
            self.post_message(self.FileHighlighted(path))
            return
        run_id, state = self._run
        if run_id != self.run_id or state is None or state.run_workspace is None or self._follow_task is None:
            return
        if self._file_diff_task is not None:
            self._file_diff_task.cancel()
        self._file_diff_task = asyncio.create_task(self._one_diff(run_id, state.run_workspace, path),
                                              name=f"tether console: diff of {path}")
