"""A run's work merged into a branch, as a decision on the run (``tether merge``).

The merge is a call named ``merge`` on the run, with its target and the diff's hash as its
arguments (``{"into": "main", "squash": false, "diff": TREE, "checks": "..."}``), so every
part of the approvals model applies unchanged: standing rules (``--where into=main``, two
people), deadlines, ``tether approve``/``reject``, the console and the web page, and the
audit (``tether decisions``). Asking it puts the call in the run's transcript and the run
waits on it (``interrupted``, :class:`~tether.vocab.state.NeedsApproval`), as a run that
waits for any approval does; no process holds it. Whoever applies the approving decision
does the merge, then the run is as it was before it asked, the merge's result in the call's
result slot.

Before it asks: the dry run (:func:`~tether.workspaces.merge.merge_check`) refuses in words
a conflict and a checkout of the target with uncommitted changes the merge would write over
(those changes are kept), and the agent file's ``checks`` run in the workspace; their result
is in the call's arguments and its ``why``, so the dialog, the web page and the decision
record show it. An ``allow`` rule does not approve a merge whose checks failed: people do.

The decision is bound to the diff's hash (the tree of the workspace as it was read when it
asked): when it is applied, a workspace that changed since is not merged, and ``tether merge``
asks again. The merge itself is written as commits first (the work on the run's branch, then
the merge commit on the target), recorded in the run before any ref moves; the refs then
move by git's own compare-and-swap (``update-ref OLD``, or ``merge --ff-only`` in the
checkout of the target), so a crash at any point leaves a run that :func:`finish` completes
or reports, never a half merge.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from tether.store.protocol import Store
from tether.vocab.audit import run_source
from tether.approvals.holding import deadline_of, verdict_of
from tether.vocab.rules import Call, Rule
from tether.vocab import faultpoints
from tether.vocab.cancel import CancelSignal
from tether.approvals.decisions import approved_words, reject
from tether.store.hold import open_run, release
from tether.run.controls import take_decision
from tether.vocab.events import ApprovalDecision, ApprovalRequired, WorkspaceChecked, WorkspaceMerged
from tether.vocab.state import (Decision, NeedsApproval, RunState, RunWorkspace, StateError, Status, args_hash,
                              interruption_from_dict)
from tether.workspaces.changes import changes
from tether.workspaces.git import GitError, git, worktrees
from tether.workspaces.merge import merge_check
from tether.workspaces.setup import run_setup
from tether.workspaces.changes import stat_words

MERGE = "merge"
"""The name of the call a merge is asked as (what rules name: ``rules add --ask merge``)."""

Emit = Callable[[Any], None]
Save = Callable[[], Awaitable[None]]
ReadRules = Callable[[], Awaitable[Sequence[Rule]]] | None


class MergeRefused(StateError):
    """The merge cannot be asked or done, in words; nothing was changed."""


def waits_on_merge(state: RunState) -> bool:
    """The run waits for a decision on its merge (not on one of its agent's calls)."""
    ws = state.run_workspace
    waiting = state.interruption
    return (isinstance(waiting, NeedsApproval) and ws is not None and ws.merge is not None
            and waiting.call_id == ws.merge.get("call_id"))


def merging(state: RunState) -> bool:
    """A merge was approved and its writing began: :func:`finish` completes it."""
    ws = state.run_workspace
    return ws is not None and ws.merge is not None and ws.merge.get("stage") == "merging"


async def default_target(ws: RunWorkspace) -> str:
    """The branch checked out in the run's repository (where the user works): the default target."""
    assert ws.repo is not None
    out = await git("symbolic-ref", "--quiet", "--short", "HEAD", cwd=ws.repo, ok=(0, 1))
    if not out.strip():
        raise MergeRefused(f"the repository {ws.repo} has no branch checked out (a detached HEAD): name the "
                           "branch to merge into with --into BRANCH")
    return out.strip()


async def ask(state: RunState, into: str, *, squash: bool, read_rules: ReadRules, save: Save, emit: Emit,
              by: str = "operator") -> str:
    """Check the merge of the run's work into ``into``, run its checks, and put it to the rules
    and to people as the call ``merge``. Words that say what became of it: merged (a rule
    allowed it), declined (a rule denied it), or waiting for a decision. :class:`MergeRefused`
    in words when it cannot merge (nothing is then asked, nothing changed)."""
    ws = state.run_workspace
    assert ws is not None and ws.path is not None
    if state.status is Status.RUNNING:
        raise MergeRefused(f"run {state.run_id} is running: its merge is asked once it stops (tether stop "
                           f"{state.run_id}, or wait); nothing was asked")
    if isinstance(state.interruption, NeedsApproval):
        what = "its merge" if waits_on_merge(state) else f"its call {state.interruption.tool_name}"
        raise MergeRefused(f"run {state.run_id} waits for a decision on {what} ({state.interruption.call_id}): "
                           f"tether approve {state.run_id} or tether reject {state.run_id} first")
    try:
        check = await merge_check(ws, into)
    except GitError as exc:
        raise MergeRefused(f"run {state.run_id} cannot be merged: {exc}") from None
    found = await changes(ws)
    if not found.files:
        raise MergeRefused(f"run {state.run_id} changed nothing in its workspace: there is nothing to merge")
    if not check.ok:
        raise MergeRefused(f"run {state.run_id} cannot be merged into {into}: {check.words()}; nothing was "
                           "changed")
    if check.tree == (await git("rev-parse", f"{check.target}^{{tree}}", cwd=ws.repo or ws.path)).strip():
        raise MergeRefused(f"run {state.run_id}: its work is in {into} already (merged, or made there too): there "
                           "is nothing new to merge; nothing was asked")
    checks, passed = await _run_checks(state, ws, emit)
    call_id = f"merge_{uuid.uuid4().hex[:12]}"
    args = {"into": into, "squash": squash, "diff": found.tree, "checks": checks}
    raw = json.dumps(args, sort_keys=True)
    state.messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": MERGE, "arguments": raw}}]})
    ws.merge = {"call_id": call_id, "into": into, "squash": squash, "tree": found.tree, "stage": "asked",
                "status": state.status.value,
                "interruption": state.interruption.to_dict() if state.interruption is not None else None}
    agent = state.agent.name if state.agent is not None else state.model
    verdict = await verdict_of(read_rules, Call(MERGE, args, agent, run_source(state), state.run_id))  # type: ignore[arg-type]
    asked_at = time.time()
    rule = verdict.rule if verdict is not None else None
    if rule is not None and rule.effect == "deny":
        state.status, state.interruption = Status.INTERRUPTED, NeedsApproval(call_id, MERGE, raw)
        emit(reject(state, call_id, rule.note(), f"rule {rule.id}", rule=rule.id))
        state.approvals[call_id].asked_at = asked_at
        _back(state, "not merged")
        await save()
        return f"run {state.run_id}: its merge into {into} was declined by rule {rule.id} ({rule.note()})"
    if rule is not None and rule.effect == "allow" and passed:
        state.approvals[call_id] = Decision(call_id, "approved", args_hash(raw), rule.note(), f"rule {rule.id}",
                                            tool=MERGE, rule=rule.id, asked_at=asked_at)
        emit(ApprovalDecision(run_id=state.run_id, call_id=call_id, tool=MERGE, verdict="approved",
                              text=approved_words(rule.note(), f"rule {rule.id}"), by=f"rule {rule.id}",
                              rule=rule.id))
        return await apply(state, save=save, emit=emit)
    ask_rule = rule if rule is not None and rule.effect == "ask" else None
    deadline_s, on_deadline = deadline_of(ask_rule, state.policies)
    why = (f"merge the work of run {state.run_id} ({_counts(found)}) into {into}"
           + (" as one commit" if squash else "") + f"; checks: {checks}"
           + (f"; {ask_rule.cited()} asks for it" if ask_rule is not None else "")
           + ("; a rule would allow it, but its checks failed" if rule is not None and rule.effect == "allow" else ""))
    waiting = NeedsApproval(call_id, MERGE, raw, why, asked_at, ask_rule.approvals if ask_rule is not None else 1,
                            (), asked_at + deadline_s if deadline_s else None, on_deadline, False, None,
                            ask_rule.id if ask_rule is not None else None)
    state.status, state.interruption = Status.INTERRUPTED, waiting
    emit(ApprovalRequired(run_id=state.run_id, call_id=call_id, tool=MERGE, args=raw, why=why,
                          needed=waiting.needed if waiting.needed > 1 else None, deadline_at=waiting.deadline_at,
                          on_deadline=on_deadline if waiting.deadline_at else None, rule=waiting.rule))
    await save()
    who = f"{waiting.needed} people" if waiting.needed > 1 else "a person"
    return (f"run {state.run_id}: its merge into {into} waits for a decision by {who} ({why}): tether approve "
            f"{state.run_id} merges it, tether reject {state.run_id} declines it")


def _counts(found: Any) -> str:
    counts = found.counts()
    return stat_words(counts["files"], counts["added"], counts["deleted"])


async def _run_checks(state: RunState, ws: RunWorkspace, emit: Emit) -> tuple[str, bool]:
    """The agent file's ``checks``, run in the workspace: their result in words, and whether all passed."""
    if not ws.checks:
        return "none", True
    said = []
    passed = True
    env = {"TETHER_RUN_ID": state.run_id, "TETHER_WORKSPACE": ws.root or ws.path or ""}
    for command in ws.checks:
        result = await run_setup(command, ws.root or ws.path or "", signal_=CancelSignal(), env=env)
        emit(WorkspaceChecked(run_id=state.run_id, command=command, exit_code=result.exit_code,
                              output=result.output, ms=round(result.ms, 1)))
        if result.ok:
            said.append(f"{command!r} passed")
        else:
            passed = False
            last = result.output.strip().splitlines()[-1:] if result.output.strip() else []
            how = "could not start" if result.exit_code is None else f"failed (exit {result.exit_code})"
            said.append(f"{command!r} {how}" + (f": {last[0]}" if last else ""))
    return "; ".join(said), passed


def _back(state: RunState, stage: str, words: str | None = None) -> None:
    """The run as it was before its merge asked; the merge's ``stage``, and its result in the call's slot."""
    ws = state.run_workspace
    assert ws is not None and ws.merge is not None
    if words is not None:
        state.messages.append({"role": "tool", "tool_call_id": ws.merge["call_id"], "content": words})
    ws.merge["stage"] = stage
    ws.merge["words"] = words
    state.status = Status(ws.merge.get("status") or Status.COMPLETED.value)
    state.interruption = interruption_from_dict(ws.merge.get("interruption"))


async def settle(state: RunState, *, save: Save, emit: Emit) -> str:
    """After a decision was taken on the run's merge call: merge (approved by as many people as
    it needs), go back to how the run was (declined), or keep waiting for the next person.
    Words that say which."""
    ws = state.run_workspace
    assert ws is not None and ws.merge is not None
    call_id = ws.merge["call_id"]
    decision = state.approvals.get(call_id)
    if decision is None:
        return f"run {state.run_id}: its merge still waits for a decision"
    if decision.verdict == "rejected":
        _back(state, "not merged")
        await save()
        return f"run {state.run_id}: its merge into {ws.merge['into']} was declined ({decision.text or 'no reason'})"
    if not decision.complete:
        waiting = state.interruption
        if isinstance(waiting, NeedsApproval):
            state.interruption = replace(waiting, approvers=tuple(decision.approvers),
                                         accounts=tuple(decision.accounts))
        await save()
        return (f"run {state.run_id}: its merge has {len(decision.approvers)} of {decision.needed} approvals; "
                f"{decision.needed - len(decision.approvers)} more must approve")
    return await apply(state, save=save, emit=emit)


async def apply(state: RunState, *, save: Save, emit: Emit) -> str:
    """Do the approved merge: checked again (the workspace must be what was approved, the
    target must still take it), its commits written and recorded, then the refs moved."""
    ws = state.run_workspace
    assert ws is not None and ws.merge is not None and ws.repo is not None and ws.branch is not None
    m = ws.merge
    into = m["into"]
    try:
        now = (await changes(ws)).tree
        if now != m["tree"]:
            _back(state, "not merged", f"Not merged: the workspace changed after the merge was asked (its diff "
                                       f"was {m['tree'][:12]}, it is {now[:12]}), so the decision does not cover "
                                       f"it. tether merge {state.run_id} asks again.")
            await save()
            raise MergeRefused(f"run {state.run_id}: not merged: its workspace changed after the merge was approved; "
                               f"the approval covered the diff {m['tree'][:12]}, and it is now {now[:12]}: tether "
                               f"merge {state.run_id} asks for a new decision")
        check = await merge_check(ws, into)
        if not check.ok:
            _back(state, "not merged", f"Not merged: {check.words()}. Nothing was changed.")
            await save()
            raise MergeRefused(f"run {state.run_id}: not merged into {into}: {check.words()}; nothing was changed")
        assert check.tree is not None
        head = (await git("rev-parse", f"refs/heads/{ws.branch}", cwd=ws.repo)).strip()
        head_tree = (await git("rev-parse", f"{head}^{{tree}}", cwd=ws.repo)).strip()
        work = head if head_tree == now else (await git(
            "commit-tree", "-p", head, "-m", f"The work of the Tether run {state.run_id}", now,
            cwd=ws.repo, identity=True)).strip()
        parents = ["-p", check.target] + ([] if m.get("squash") else ["-p", work])
        message = (f"Merge the work of the Tether run {state.run_id} ({ws.branch}) into {into}" if not m.get("squash")
                   else f"The work of the Tether run {state.run_id}, squashed")
        commit = (await git("commit-tree", *parents, "-m", message, check.tree, cwd=ws.repo, identity=True)).strip()
    except GitError as exc:
        raise MergeRefused(f"run {state.run_id}: not merged: {exc}; tether merge {state.run_id} tries again") from None
    m.update(stage="merging", target=check.target, head=head, work=work, commit=commit)
    await save()  # the intent, with every commit it writes, before any ref moves
    faultpoints.boundary("merge_recorded")
    return await finish(state, save=save, emit=emit)


async def decide(store: Store, run_id: str, request: Any) -> tuple[RunState, str]:
    """A decision (``approve``/``reject`` :class:`~tether.store.control.ControlRequest`) on the
    run's merge, from any route (``tether approve``, the console, the web page, a worker), made
    here: recorded as any decision is (its deadline checked first), then :func:`settle`. The
    run as it then is, and words that say what became of the merge."""
    if request.kind == "approve" and request.args is not None:
        raise MergeRefused(f"run {run_id}: a merge's arguments cannot be edited (its target and diff are what was "
                           f"checked): reject it, then tether merge {run_id} --into BRANCH [--squash] asks again; "
                           "nothing was decided")
    state, handle = await open_run(store, run_id)
    trace = handle.trace(())
    refused: StateError | None = None
    try:
        if merging(state):
            return state, await finish(state, save=lambda: handle.asave(state), emit=trace.write)
        taken, refused = take_decision(state, request)
        for event in taken:
            trace.write(event)
        if taken:
            await handle.asave(state)
        words = await settle(state, save=lambda: handle.asave(state), emit=trace.write)
    finally:
        trace.close()
        await release(handle)
    if refused is not None:
        raise refused
    return state, words


async def finish(state: RunState, *, save: Save, emit: Emit) -> str:
    """Move the refs of a recorded merge (``stage`` ``merging``), each step done again safely:
    the run's branch to its work, then the target to the merge commit. A target that moved
    elsewhere meanwhile is reported, and nothing more is written."""
    ws = state.run_workspace
    assert ws is not None and ws.merge is not None and ws.repo is not None and ws.branch is not None
    m = ws.merge
    into, commit = m["into"], m["commit"]
    try:
        branch = (await git("rev-parse", "--verify", "--quiet", f"refs/heads/{ws.branch}", cwd=ws.repo,
                            ok=(0, 1))).strip()
        if branch == m["head"] and m["work"] != m["head"]:
            await git("update-ref", f"refs/heads/{ws.branch}", m["work"], m["head"], cwd=ws.repo)
            if ws.path is not None:
                await git("reset", "-q", cwd=ws.path)  # its index follows; its files are the work already
        faultpoints.boundary("merge_branch_moved")
        target = (await git("rev-parse", "--verify", "--quiet", f"refs/heads/{into}", cwd=ws.repo, ok=(0, 1))).strip()
        if target == m["target"]:
            checkout = next((w["worktree"] for w in await worktrees(ws.repo)
                             if w.get("branch") == f"refs/heads/{into}" and "prunable" not in w), None)
            if checkout is not None:
                # git refuses to write over a change there, and keeps every other one
                await git("merge", "--ff-only", "--quiet", commit, cwd=checkout)
            else:
                await git("update-ref", f"refs/heads/{into}", commit, m["target"], cwd=ws.repo)
        elif target != commit:
            _back(state, "not merged", f"Not merged: {into} moved to {target[:12] or 'nowhere'} while the merge was "
                                       "written; nothing more was changed.")
            await save()
            raise MergeRefused(f"run {state.run_id}: not merged: {into} moved while the merge was written (it is at "
                               f"{target[:12] or 'no commit'}); tether merge {state.run_id} asks again")
    except GitError as exc:
        raise MergeRefused(f"run {state.run_id}: the merge into {into} was cut short: {exc}; fix that, then tether "
                           f"merge {state.run_id} finishes it") from None
    faultpoints.boundary("merge_target_moved")
    words = (f"Merged into {into} as {commit[:12]}" + (" (squashed)" if m.get("squash") else "")
             + f": the work of run {state.run_id} on {ws.branch}.")
    _back(state, "merged", words)
    m["at"] = time.time()
    emit(WorkspaceMerged(run_id=state.run_id, into=into, commit=commit, squash=bool(m.get("squash")), words=words))
    await save()
    return f"run {state.run_id}: " + words[0].lower() + words[1:]
