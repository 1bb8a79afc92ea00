"""Named points in the loop where a crash leaves the state most worth testing.

The loop calls :func:`boundary` with a name before and after each model reply is
saved, before and after each tool runs, and before and after each save; a run's own
workspace (:mod:`tether.workspaces.lifecycle`) after each intent it saves and after each
step on the disk (``workspace_creating``, ``workspace_made``, ``workspace_discarding``,
``workspace_removed``). In the product
it does nothing. The crash campaign (``tests/campaign``) installs a hook that exits the
process hard at a chosen boundary, then resumes the run, to show that no boundary loses
a committed turn or repeats a write.
"""

from __future__ import annotations

from collections.abc import Callable

def _nothing(name: str) -> None:
    return None


_hook: Callable[[str], None] = _nothing


def boundary(name: str) -> None:
    """The loop passed ``name``: tell the installed hook, if any."""
    _hook(name)


def install(hook: Callable[[str], None] | None) -> None:
    """Call ``hook`` at every boundary of this process (None: nothing again)."""
    global _hook
    _hook = hook or _nothing
