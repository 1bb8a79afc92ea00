"""``tether diff``, ``tether workspaces [prune]``, ``tether discard`` and ``tether merge``: what a
run changed in its own workspace, every workspace with what git knows that the store does not,
workspaces removed, and a run's work merged as a decision (docs/workspaces.md). None of them
loads a harness or an agent file."""

from __future__ import annotations

import argparse
import json
import os
import sys

from tether.actions.workspace import discard_question, discard_run, merge_run
from tether.vocab.state import RunState, RunWorkspace, StateError
from tether.vocab.text import clean
from tether.store.private import default_home
from tether.store.protocol import call
from tether.tui.cli import context
from tether.tui.cli.parser import UsageError
from tether.workspaces import merging
from tether.workspaces.changes import changes, diff as unified, stat_words
from tether.workspaces.compare import compare
from tether.workspaces.git import GitError
from tether.workspaces.lifecycle import LIVE_STAGES, usable
from tether.workspaces.survey import survey


def workspace_made(state: RunState) -> RunWorkspace:
    """The run's workspace, made and here, or a StateError in words."""
    ws = state.run_workspace
    if ws is None:
        raise StateError(f"run {state.run_id} has no workspace of its own: its agent works in its folder "
                         f"{state.workspace or '(none)'} (isolation = \"none\"), so Tether cannot tell its changes")
    usable(state)
    if ws.stage not in LIVE_STAGES:
        raise StateError(f"run {state.run_id}: its workspace is not made yet (it is made when the run first starts)")
    return ws


async def diff(args: argparse.Namespace) -> int:
    """``tether diff RUN [--stat] [PATH...] [--json]``: against the workspace's base."""
    store = context.store_of(args)
    state = await call(store, store.load, args.run_id)
    ws = workspace_made(state)
    if len(args.paths) == 1 and await call(store, store.exists, args.paths[0]):  # tether diff RUN RUN2
        return await _compare(args, state, await call(store, store.load, args.paths[0]))
    paths = tuple(args.paths)
    try:
        found = await changes(ws)
        text = None if args.stat else await unified(ws, paths)
    except GitError as exc:
        raise StateError(f"run {state.run_id}: {exc}") from None
    files = [f for f in found.files if not paths or f.path in paths]
    if args.json:
        print(json.dumps({"run_id": state.run_id, "workspace": ws.listed(), "base": ws.base_commit,
                          "tree": found.tree, "files": [f.to_dict() for f in files],
                          "added": sum(f.added or 0 for f in files), "deleted": sum(f.deleted or 0 for f in files),
                          **({} if text is None else {"diff": text})}))
        return 0
    if text is not None:
        # What the agent wrote is untrusted on a terminal; into a pipe it goes as it is (git apply takes it).
        sys.stdout.write(clean(text) if os.isatty(1) else text)
        if not text:
            print(f"run {state.run_id}: no changes" + (f" to {', '.join(paths)}" if paths else ""), file=sys.stderr)
        return 0

    width = max((len(_counts(f.added, f.deleted)) for f in files), default=0)
    for f in files:
        print(clean(f"{f.status:<8} {_counts(f.added, f.deleted):>{width}}  {f.path}", keep_newlines=False))
    print(stat_words(len(files), sum(f.added or 0 for f in files), sum(f.deleted or 0 for f in files)))
    return 0


async def _compare(args: argparse.Namespace, state: RunState, other: RunState) -> int:
    """``tether diff RUN RUN2``: what each changed from its base, and where they differ."""
    names = (state.run_id, other.run_id)
    try:
        found = await compare(workspace_made(state), workspace_made(other), names=names, text=not args.stat)
    except GitError as exc:
        raise StateError(f"runs {names[0]} and {names[1]}: {exc}") from None
    if args.json:
        print(json.dumps({"runs": list(names), "changes": [found.first.counts(), found.second.counts()],
                          "trees": [found.first.tree, found.second.tree],
                          "differ": [f.to_dict() for f in found.differ],
                          **({} if found.diff is None else {"diff": found.diff})}))
        return 0
    if found.diff is not None:
        sys.stdout.write(clean(found.diff) if os.isatty(1) else found.diff)
        print(f"runs {names[0]} and {names[1]}: " + ("the same files" if not found.differ else
              f"{len(found.differ)} files differ"), file=sys.stderr)
        return 0
    for name, changed in zip(names, (found.first, found.second)):
        print(clean(f"{name}: {changed.words()} against its base", keep_newlines=False))
    print(f"where they differ ({names[0]} -> {names[1]}):" if found.differ else "where they differ: nowhere")
    for f in found.differ:
        print(clean(f"  {f.status:<8} {_counts(f.added, f.deleted):>10}  {f.path}", keep_newlines=False))
    return 0


def _counts(added: int | None, deleted: int | None) -> str:
    return "binary" if added is None else f"+{added} \u2212{deleted}"


async def workspaces(args: argparse.Namespace) -> int:
    """``tether workspaces [--json]``: every run's workspace, and what no run owns."""
    if getattr(args, "action", None) == "prune":
        return await prune(args)

    store = context.store_of(args)
    summaries = await call(store, store.summaries)
    found = await survey(summaries, default_home() / "workspaces")
    if args.json:
        print(json.dumps({"workspaces": [r.to_dict() for r in found.rows],
                          "strays": [s.to_dict() for s in found.strays]}))
        return 0

    lines = []
    for row in found.rows:
        changed = "" if not row.changes else stat_words(row.changes.get("files", 0), row.changes.get("added", 0),
                                                        row.changes.get("deleted", 0))
        line = (f"{row.run_id:<40} {row.status:<12} {row.kind:<8} {row.stage:<10} {_bytes(row.size):>8} "
                f"{_age(row.age_s):>5}  {changed}")
        lines.append(clean(line.rstrip(), keep_newlines=False))
        if row.path and row.stage != "discarded":
            lines.append(clean(f"    {row.path}" + (f" (branch {row.branch})" if row.branch else ""),
                               keep_newlines=False))
        if row.problem:
            lines.append(clean(f"    ! {row.problem}", keep_newlines=False))
    if not found.rows:
        lines.append(f"no run in {store.where} has a workspace of its own")
    for stray in found.strays:
        lines.append(clean(f"not a run's: {stray.words}", keep_newlines=False))
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _bytes(size: int | None) -> str:
    if size is None:
        return "-"
    if size < 1024:
        return f"{size} B"
    for unit in ("KB", "MB", "GB"):
        size /= 1024  # type: ignore[assignment]
        if size < 1024 or unit == "GB":
            break
    return f"{size:.1f} {unit}"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds // length:.0f}{unit}"
    return f"{seconds:.0f}s"


async def discard(args: argparse.Namespace) -> int:
    """``tether discard RUN [--yes]``: its workspace and branch removed, its transcript kept."""
    await context.may_operate(args, "discard")
    store = context.store_of(args)
    state = await call(store, store.load, args.run_id)
    ws = state.run_workspace
    if ws is None:
        raise StateError(f"run {args.run_id} has no workspace of its own: nothing to discard")
    holder = await call(store, store.owner, args.run_id)
    if holder is not None and holder.alive:
        raise StateError(f"run {args.run_id} is running ({holder.where}): stop it first (tether stop {args.run_id}), "
                         "then discard its workspace; nothing was removed")
    if ws.stage not in ("planned", "discarded") and not args.yes and not _agreed(state):  # else nothing to remove
        print("nothing was removed", file=sys.stderr)
        return 1
    _, words = await discard_run(store, args.run_id, by=context.who(args))
    print(clean(words))
    return 0


def _agreed(state: RunState) -> bool:
    """Ask on the terminal (or read the answer from stdin): y removes it."""
    sys.stderr.write(clean(discard_question(state) + " [y/N] ", keep_newlines=False))
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if not answer:
        raise UsageError("tether discard asks first: answer y, or give --yes; nothing was removed")
    return answer.strip().lower() in ("y", "yes")


async def merge(args: argparse.Namespace) -> int:
    """``tether merge RUN [--into BRANCH] [--squash]``: the run's work put to the rules and to
    people as the call ``merge``; merged when approved (by a rule at once, or later by ``tether
    approve``). A merge cut short by a crash is finished."""
    await context.may_operate(args, "merge")
    store = context.store_of(args)
    state, words = await merge_run(store, args.run_id, into=args.into, squash=args.squash, by=context.who(args))
    print(clean(words))
    return 3 if merging.waits_on_merge(state) else 0


async def prune(args: argparse.Namespace) -> int:
    """``tether workspaces prune [--merged] [--older-than AGE] [--yes]``: discard the workspaces
    of the runs that are not running and match (merged; not touched for AGE)."""
    if not args.merged and args.older_than is None:
        raise UsageError("tether workspaces prune needs --merged, --older-than AGE or both: it removes nothing "
                         "without being told which")
    await context.may_operate(args, "workspaces prune")
    store = context.store_of(args)
    summaries = await call(store, store.summaries)
    found = await survey(summaries, default_home() / "workspaces")
    chosen = []
    for row in found.rows:
        if row.stage in ("discarded", "planned") or row.status == "running":
            continue
        if args.older_than is not None and (row.age_s is None or row.age_s < args.older_than):
            continue
        if args.merged:
            state = await call(store, store.load, row.run_id)
            merged = (state.run_workspace.merge or {}).get("stage") == "merged" if state.run_workspace else False
            if not merged:
                continue
        chosen.append(row)
    if not chosen:
        print("no workspace matches: nothing was removed")
        return 0
    for row in chosen:
        print(clean(f"{row.run_id}  {row.path}" + (f" (branch {row.branch})" if row.branch else ""),
                    keep_newlines=False))
    if not args.yes:
        sys.stderr.write(f"Remove these {len(chosen)} workspaces? Their runs' transcripts stay. [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
        if not answer:
            raise UsageError("tether workspaces prune asks first: answer y, or give --yes; nothing was removed")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing was removed", file=sys.stderr)
            return 1
    failed = 0
    for row in chosen:
        one = argparse.Namespace(**{**vars(args), "run_id": row.run_id, "yes": True})
        try:
            await discard(one)
        except StateError as exc:  # one run's refusal does not stop the others
            failed += 1
            print(clean(f"{row.run_id}: {exc}"), file=sys.stderr)
    return 1 if failed else 0


COMMANDS = {"diff": diff, "workspaces": workspaces, "discard": discard, "merge": merge}
