"""The Changes pane: what the selected run changed in its own workspace, as it works.

The files it added, changed and deleted with their +/- line counts (a list to move in), and
the highlighted file's unified diff against the workspace's base, coloured. The app hands it
what to show (:meth:`ChangesPane.show_changes`, :meth:`ChangesPane.show_diff`,
:meth:`ChangesPane.show_words`) and reads the diff of the file the operator moves to
(:class:`ChangesPane.FileHighlighted`); the reading and the watching are the app's
(:mod:`tether.tui.changes`).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tether.tui.widgets.approval_view import diff_text
from tether.tui.state.text import clean
from tether.workspaces.changes import Changes, FileChange

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


class ChangesPane(Vertical):
    """The files a run changed, and the highlighted one's diff."""

    BORDER_TITLE = "Changes"

    class FileHighlighted(Message):
        """The operator moved to ``path``: its diff is wanted."""

        def __init__(self, path: str) -> None:
            super().__init__()
            self.path = path

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._files: tuple[FileChange, ...] = ()
        self.run_id: str | None = None
        self._listing = False  # the list shows a reading (not words)

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
        if event.option.id is not None:
            self.post_message(self.FileHighlighted(event.option.id))
