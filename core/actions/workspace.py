"""A run's merge and discard as one operation on the store, the same from every front:
``tether merge``/``tether discard``, the console's ``M``/``X`` and the web run page's buttons.

Each checks what the front cannot be trusted to (the run is not running anywhere, it has a
workspace of its own, a copy has no branch to merge into), takes the run
(:func:`~tether.store.hold.open_run`), does the core step (:mod:`tether.workspaces.merging`,
:func:`tether.workspaces.lifecycle.discard`) with its trace, and lets it go. The result is
the run as it then is and words that say what became of it; a refusal is a
:class:`~tether.vocab.state.StateError` in words, and nothing was changed.
"""

from __future__ import annotations


from tether.store.hold import open_run, release
from tether.vocab.state import RunState, StateError
from tether.store.protocol import Store, call
from tether.workspaces import merging
from tether.workspaces.lifecycle import LIVE_STAGES, discard, usable
from tether.workspaces.changes import stat_words


def mergeable(state: RunState) -> bool:
    """Whether the run's workspace can be offered a merge (a worktree, made); not whether it runs."""
    ws = state.run_workspace
    return ws is not None and ws.kind == "worktree" and ws.stage in LIVE_STAGES


def discardable(state: RunState) -> bool:
    """Whether the run has a workspace left to discard; not whether it runs."""
    ws = state.run_workspace
    return ws is not None and ws.stage != "discarded" and ws.kind != "none"


async def _not_running(store: Store, run_id: str, then: str) -> RunState:
    state = await call(store, store.load, run_id)
    holder = await call(store, store.owner, run_id)
    if holder is not None and holder.alive:
        raise StateError(f"run {run_id} is running ({holder.where}): stop it first, then {then}")
    return state


async def merge_run(store: Store, run_id: str, *, into: str | None = None, squash: bool = False,
                    by: str = "operator") -> tuple[RunState, str]:
    """Ask the merge of the run's work into ``into`` (the branch checked out in its repository
    by default) as the decision ``merge``, or finish a merge a crash cut short. The run as it
    then is (:func:`merging.waits_on_merge` says whether it waits for people) and words."""
    state = await _not_running(store, run_id, "its merge is asked; nothing was asked")
    if not merging.merging(state):
        ws = state.run_workspace
        if ws is None:
            raise StateError(f"run {run_id} has no workspace of its own (isolation = \"none\"): its agent worked in "
                             f"its folder {state.workspace or '(none)'}, so there is nothing to merge")
        usable(state)
        if ws.stage not in LIVE_STAGES:
            raise StateError(f"run {run_id}: its workspace is not made yet (it is made when the run first starts): "
                             "there is nothing to merge")
        if ws.kind == "none":
            raise StateError(f"run {run_id} worked in its session's own folder {ws.root}: its changes are there "
                             f"already, nothing to merge (tether diff {run_id} shows them)")
        if ws.kind != "worktree":
            raise StateError(f"run {run_id} works in a copy of {ws.source}, which is no repository to merge into: "
                             f"take its work with tether diff {run_id} | patch -p1 (in {ws.source})")
    try:
        state, handle = await open_run(store, run_id)
    except StateError as exc:  # taken by another process since
        raise StateError(f"{exc}; nothing was asked") from None
    trace = handle.trace()
    save = lambda: handle.asave(state)  # noqa: E731
    try:
        if merging.merging(state):
            words = await merging.finish(state, save=save, emit=trace.write)
        else:
            assert state.run_workspace is not None
            target = into or await merging.default_target(state.run_workspace)
            words = await merging.ask(state, target, squash=squash, save=save, emit=trace.write,
                                      read_rules=lambda: call(store, store.rules), by=by)
    finally:
        trace.close()
        await release(handle)
    return state, words


async def discard_run(store: Store, run_id: str, *, by: str = "") -> tuple[RunState, str]:
    """Remove the run's workspace and its branch (its transcript stays), or finish a discard a
    crash cut short. The run as it then is, and words that say what was removed."""
    state = await _not_running(store, run_id, "discard its workspace; nothing was removed")
    if state.run_workspace is None:
        raise StateError(f"run {run_id} has no workspace of its own: nothing to discard")
    try:
        state, handle = await open_run(store, run_id)
    except StateError as exc:
        raise StateError(f"{exc}; nothing was removed") from None
    trace = handle.trace()
    try:
        words = await discard(state, save=lambda: handle.asave(state), trace=trace.write, by=by)
    finally:
        trace.close()
        await release(handle)
    return state, words


def discard_question(state: RunState) -> str:
    """What a discard removes, as the question put before it (the CLI, the console, the web)."""
    ws = state.run_workspace
    assert ws is not None
    changed = ws.changes or {}
    what = f"{ws.path}" + (f" and the branch {ws.branch}" if ws.branch else "")
    made = stat_words(changed.get("files", 0), changed.get("added", 0), changed.get("deleted", 0)) if changed else ""
    return (f"Remove {what} of run {state.run_id}" + (f" ({made}, as of its last step)" if made else "")
            + "? Its transcript stays.")
