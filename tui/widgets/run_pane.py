"""The base of a pane that shows the selected run: the app hands every one of them the run.

So a new pane is one widget file, a :class:`RunPane`, and one line where its screen composes
it (docs/architecture.md, "Adding a pane"): the app finds the panes by their class on each
refresh of the selected run (:mod:`tether.tui.views`), as it finds nothing else by name.
"""

from __future__ import annotations

from textual.containers import Vertical

from tether.vocab.state import RunState


class RunPane(Vertical):
    """A pane of the selected run. :meth:`show_run` is called when the selection changes and
    when the selected run does (a step, its workspace made): cheap when nothing it shows did."""

    def show_run(self, run_id: str | None, state: RunState | None) -> None:
        raise NotImplementedError
