"""A run's own workspace (issue 38, item 8): ready against plain ``git worktree add``, on a
generated repository of 10,000 files, both measured here, in this process, in turns.

* **Baseline**: ``git worktree add -b plain/N PATH main`` as a subprocess.
* **A run's workspace ready**: what the harness does before a run's agent starts, for a
  worktree without setup commands (:func:`tether.workspaces.lifecycle.prepare`): the folder
  located from the run's id, the repository and base checked with git, the intent saved to the
  run's journal, ``git worktree add``, the private index put in place, the workspace recorded
  as made and saved again.
* The merge's dry run (:func:`tether.workspaces.merge.merge_check`, what ``tether merge``, the
  console's M and the web's Merge ask before anything is put to people) against plain ``git
  merge-tree --write-tree`` of the same two commits, with ``main`` moved on in other files and
  its checkout clean (so the check reads it too).
* Beside them, what reading the run's changes costs (:func:`tether.workspaces.changes.changes`,
  what ``tether diff --stat`` and the end of every operation run): the first reading of a fresh
  workspace, the next, and one after 10 files were changed.

Each trial times both, plain first in one trial and Tether first in the next, each on a fresh
path, after ``sync`` (the previous checkout's writes would otherwise be flushed during the next
one, a cost that grows trial by trial on this VM); the worktrees are removed between trials
(none of that timed). Medians; the ratio is Tether's over plain git's (goal ≤ 1.2).
No timing is asserted: docs/performance.md has a run's figures.

Run: ``.venv/bin/python -m tests.benchmarks.bench_workspaces [--files N] [--kb K] [--trials N]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from tether.agents.agent import Agent, Isolation
from tether.vocab.cancel import CancelSignal
from tether.store.files.store import RunStore
from tether.workspaces import lifecycle
from tether.workspaces.changes import changes
from tether.workspaces.merge import merge_check
from tests.benchmarks.bench_harness import host_speed_ms

FILES = 10_000
KB = 8  # 10,000 files of about 8.7 KB: an 87 MB repository
TRIALS = 5
GOAL = 1.2


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def generate(repo: Path, files: int, kb: int) -> None:
    """``files`` text files of about ``kb`` KB each, in 100 folders, committed on ``main``."""
    _git(repo.parent, "init", "-q", "-b", "main", str(repo))
    line = "the quick brown fox jumps over the lazy dog 0123456789\n"
    for i in range(files):
        folder = repo / f"pkg{i % 100:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"module_{i:05d}.py").write_text(f"# file {i}\n" + line * (kb * 1024 // len(line)))
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=bench", "-c", "user.email=bench@x", "commit", "-qm", "generated")


def plain(repo: Path, where: Path, n: int) -> float:
    started = time.perf_counter()
    _git(repo, "worktree", "add", "-q", "-b", f"plain/{n}", str(where / f"plain-{n}"), "main")
    return time.perf_counter() - started


async def tether_ready(store: RunStore, agent: Agent, workspaces: Path, n: int) -> tuple[float, object]:
    """A run made on the store, then timed from its first operation to its workspace made."""
    from tether.vocab.state import RunState

    state = RunState(run_id=f"bench-{n}", model="m", run_workspace=lifecycle.plan_for(agent))
    store.create(state)
    state, handle = store.open(state.run_id)
    trace = handle.trace()
    try:
        started = time.perf_counter()
        lifecycle.locate(state, workspaces)
        await lifecycle.prepare(state, emit=trace.write, save=lambda: handle.asave(state), signal=CancelSignal())
        took = time.perf_counter() - started
    finally:
        trace.close()
        handle.release()
    return took, state.run_workspace


def _clear(repo: Path, where: Path) -> None:
    for path in where.iterdir():
        if path.name != ".tether":
            shutil.rmtree(path)
    _git(repo, "worktree", "prune")


async def main_async(files: int, kb: int, trials: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tether-bench-ws-") as tmp:
        root = Path(tmp)
        repo = root / "repo"
        started = time.perf_counter()
        generate(repo, files, kb)
        size = sum(p.stat().st_size for p in repo.rglob("*.py"))
        print(f"a repository of {files:,} files, {size / 1e6:.0f} MB, made in {time.perf_counter() - started:.0f} s")
        where, workspaces = root / "plain", root / "workspaces"
        where.mkdir()
        store = RunStore(root / "runs")
        agent = Agent(name="bench", model="m", workspace=repo, isolation=Isolation("worktree"))
        git_s, tether_s = [], []
        last = None
        for n in range(trials):
            for first in ((True, False) if n % 2 == 0 else (False, True)):  # each goes first every other trial
                os.sync()  # the last checkout's writes leave the page cache before this one is timed
                if first:
                    git_s.append(plain(repo, where, n))
                else:
                    took, last = await tether_ready(store, agent, workspaces, n)
                    tether_s.append(took)
            checked_out = sum(len(names) for _, _, names in os.walk(last.path)) - 1  # type: ignore[attr-defined]
            assert checked_out == files, f"the run's worktree holds {checked_out} files, not {files}"  # its .git aside
            _clear(repo, where)
            if n < trials - 1:
                _clear(repo, workspaces)
        base, ours = statistics.median(git_s), statistics.median(tether_s)
        print(f"git worktree add:       median {base * 1000:7.0f} ms  ({', '.join(f'{t * 1000:.0f}' for t in git_s)})")
        print(f"a run's workspace ready: median {ours * 1000:7.0f} ms  "
              f"({', '.join(f'{t * 1000:.0f}' for t in tether_s)})")
        print(f"ratio {ours / base:.2f}x (goal <= {GOAL}x)")

        reads = []
        for _ in range(2):
            t = time.perf_counter()
            await changes(last)  # type: ignore[arg-type]
            reads.append(time.perf_counter() - t)
        tree = Path(last.path)  # type: ignore[attr-defined]
        for i in range(10):
            path = tree / f"pkg{i:02d}" / f"module_{i:05d}.py"
            path.write_text(path.read_text() + "# changed\n")
        t = time.perf_counter()
        found = await changes(last)  # type: ignore[arg-type]
        edited = time.perf_counter() - t
        print(f"the run's changes read: first {reads[0] * 1000:.0f} ms, next {reads[1] * 1000:.0f} ms, "
              f"after 10 files changed {edited * 1000:.0f} ms ({found.words()})")
        await dry_runs(repo, last, trials)


async def dry_runs(repo: Path, ws: object, trials: int) -> None:
    """The merge's dry run against ``git merge-tree --write-tree`` of the same commits, after
    ``main`` moved on in 10 other files; medians of ``trials`` each, in turns."""
    for i in range(10, 20):
        path = repo / f"pkg{i:02d}" / f"module_{i:05d}.py"
        path.write_text(path.read_text() + "# on main\n")
    _git(repo, "-c", "user.name=bench", "-c", "user.email=bench@x", "commit", "-qam", "main moves on")
    check = await merge_check(ws, "main")  # type: ignore[arg-type]
    assert check.ok, check.words()
    tree_s, plain_s, ours_s = [], [], []
    for n in range(trials):
        for first in ((True, False) if n % 2 == 0 else (False, True)):
            t = time.perf_counter()
            if first:
                _git(repo, "merge-tree", "--write-tree", "--name-only", "main", check.work)
                tree_s.append(time.perf_counter() - t)
                # what one would run by hand to know the same: both checkouts' status, then merge-tree
                _git(Path(ws.path), "status", "--porcelain")  # type: ignore[attr-defined]
                _git(repo, "status", "--porcelain")
                plain_s.append(time.perf_counter() - t)
            else:
                await merge_check(ws, "main")  # type: ignore[arg-type]
                ours_s.append(time.perf_counter() - t)
    base, ours = statistics.median(plain_s), statistics.median(ours_s)
    print(f"git merge-tree --write-tree alone: median {statistics.median(tree_s) * 1000:7.0f} ms")
    print(f"the same + git status in both checkouts: median {base * 1000:7.0f} ms  "
          f"({', '.join(f'{t * 1000:.0f}' for t in plain_s)})")
    print(f"the merge's dry run:         median {ours * 1000:7.0f} ms  ({', '.join(f'{t * 1000:.0f}' for t in ours_s)})"
          f"  ratio {ours / base:.2f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=FILES)
    parser.add_argument("--kb", type=int, default=KB)
    parser.add_argument("--trials", type=int, default=TRIALS)
    args = parser.parse_args(argv)
    print(f"[host speed check: {host_speed_ms():.1f} ms]")
    asyncio.run(main_async(args.files, args.kb, args.trials))


if __name__ == "__main__":
    main()
