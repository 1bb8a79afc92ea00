"""Checkpoints (issue 39, item 8): a checkpoint against plain ``git add -A && git commit`` of the
same change, on the generated repository of 10,000 files of bench_workspaces, both measured
here, in this process, in turns; its cost at step 1,000 against step 10; rewind, undo and fork.

* **Baseline**: one file changed in a plain worktree of the repository, then ``git add -A``
  and ``git commit -q`` as subprocesses (the user's way of keeping a step).
* **A checkpoint**: one file changed in a run's worktree, then
  :meth:`tether.workspaces.checkpoints.Checkpointer.take` (its own index, ``add -A``,
  ``write-tree``, ``commit-tree`` with ``diff-tree``, ``update-ref``).
* **Step 1,000 against step 10**: a new process's first checkpoint (it lists the run's refs)
  and the ones after it, with 10 refs, then with 1,000 (the 990 between made by one
  ``git update-ref --stdin``: what grows with the steps is the refs; each step's objects are
  one file's).
* **Rewind and undo**: :func:`tether.workspaces.rewinding.rewind` to an early checkpoint on
  the file store, then :func:`~tether.workspaces.rewinding.undo`; **fork**: the new run's
  state, then its worktree made.

Medians and p99 (the largest but one of 100); the ratio is Tether's over git's (goal <= 1).
No timing is asserted: docs/performance.md has a run's figures.

Run: ``.venv/bin/python -m tests.benchmarks.bench_checkpoints [--files N] [--steps N]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from tether.agents.agent import Agent, Isolation
from tether.vocab.state import RunState
from tether.store.files.store import RunStore
from tether.workspaces import forking, rewinding
from tether.workspaces.checkpoints import Checkpointer, ref_of
from tests.benchmarks.bench_harness import host_speed_ms
from tests.benchmarks.bench_workspaces import FILES, KB, generate, tether_ready

STEPS = 100


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, input=stdin).stdout


def _touch(tree: Path, i: int) -> None:
    path = tree / f"pkg{i % 100:02d}" / f"module_{i % FILES:05d}.py"
    with path.open("a") as f:
        f.write(f"# step {i}\n")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _line(name: str, values: list[float]) -> str:
    return f"{name:<34} p50 {statistics.median(values) * 1000:6.1f} ms   p99 {_p(values, 0.99) * 1000:6.1f} ms"


async def main_async(files: int, steps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tether-bench-cp-") as tmp:
        root = Path(tmp)
        repo = root / "repo"
        started = time.perf_counter()
        generate(repo, files, KB)
        print(f"a repository of {files:,} files, made in {time.perf_counter() - started:.0f} s")
        plain = root / "plain"
        _git(repo, "worktree", "add", "-q", "-b", "plain", str(plain), "main")
        store = RunStore(root / "runs")
        agent = Agent(name="bench", model="m", workspace=repo, isolation=Isolation("worktree"))
        _, ws = await tether_ready(store, agent, root / "workspaces", 0)
        state = store.load("bench-0")
        tree = Path(ws.path)  # type: ignore[attr-defined]
        taker = Checkpointer(ws, state.run_id)  # type: ignore[arg-type]
        await taker.take(state, always=True)  # the first: its index seeded (bench_workspaces reports that)
        git_s, ours = [], []
        for n in range(steps):
            for git_first in ((True, False) if n % 2 == 0 else (False, True)):
                if git_first:
                    _touch(plain, n)
                    t = time.perf_counter()
                    _git(plain, "add", "-A")
                    _git(plain, "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-q", "-m", f"step {n}")
                    git_s.append(time.perf_counter() - t)
                else:
                    _touch(tree, n)
                    state.messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": "ok"})
                    t = time.perf_counter()
                    made = await taker.take(state, call_id=f"c{n}", tool="write_file")
                    ours.append(time.perf_counter() - t)
                    assert made is not None and made.files == 1
        print(_line("git add -A && git commit", git_s))
        print(_line("a checkpoint (own index, private ref)", ours))
        print(f"ratio p50 {statistics.median(ours) / statistics.median(git_s):.2f}x, "
              f"p99 {_p(ours, 0.99) / _p(git_s, 0.99):.2f}x (goal <= 1)")

        # Step 1,000 against step 10: a fresh taker (a new process) each time, 20 checkpoints.
        async def at_step(count: int) -> tuple[float, float]:
            last, _, _ = await Checkpointer(ws, state.run_id).last()  # type: ignore[arg-type]
            if last < count:
                commit = _git(repo, "rev-parse", ref_of(state.run_id, last)).strip()
                lines = "".join(f"create {ref_of(state.run_id, k)} {commit}\n" for k in range(last + 1, count + 1))
                _git(repo, "update-ref", "--stdin", stdin=lines)
            fresh = Checkpointer(ws, state.run_id)  # type: ignore[arg-type]
            times = []
            for i in range(20):
                _touch(tree, 5000 + count + i)
                t = time.perf_counter()
                await fresh.take(state)
                times.append(time.perf_counter() - t)
            return times[0], statistics.median(times[1:])

        steps_now = (await Checkpointer(ws, state.run_id).last())[0]  # type: ignore[arg-type]
        early = await at_step(max(10, steps_now))
        late = await at_step(1000)
        print(f"at step {max(10, steps_now)}: first of a process {early[0] * 1000:.1f} ms, next p50 {early[1] * 1000:.1f} ms; "
              f"at step 1,000: first {late[0] * 1000:.1f} ms, next p50 {late[1] * 1000:.1f} ms "
              f"(ratio {late[1] / early[1]:.2f}x, goal <= 2)")

        # Rewind and undo, on the file store, five times each.
        rewind_s, undo_s = [], []
        for i in range(5):
            _touch(tree, 9000 + i)
            held, handle = store.open(state.run_id)
            trace = handle.trace()

            async def save() -> None:
                await handle.asave(held)

            async def rewrite(start: int) -> None:
                await asyncio.to_thread(handle.rewrite, held, start)

            try:
                t = time.perf_counter()
                await rewinding.rewind(held, trace.write, save, rewrite, to=10, by="bench")
                rewind_s.append(time.perf_counter() - t)
                trace.close()
                records = list(store.read_trace(state.run_id))
                trace = handle.trace()
                t = time.perf_counter()
                await rewinding.undo(held, trace.write, save, rewrite, lambda: records, by="bench")
                undo_s.append(time.perf_counter() - t)
            finally:
                trace.close()
                handle.release()
        print(f"rewind to checkpoint 10: median {statistics.median(rewind_s) * 1000:.0f} ms; "
              f"undo: median {statistics.median(undo_s) * 1000:.0f} ms "
              f"({', '.join(f'{a * 1000:.0f}/{b * 1000:.0f}' for a, b in zip(rewind_s, undo_s))})")

        origin = store.load(state.run_id)
        t = time.perf_counter()
        new: RunState = await forking.fork(origin, 10, "fork-1", root / "workspaces")
        store.create(new)
        forked = time.perf_counter() - t
        from tether.vocab.cancel import CancelSignal
        from tether.workspaces import lifecycle

        held, handle = store.open("fork-1")
        trace = handle.trace()
        try:
            t = time.perf_counter()
            lifecycle.locate(held, root / "workspaces")
            await lifecycle.prepare(held, emit=trace.write, save=lambda: handle.asave(held), signal=CancelSignal())
            made = time.perf_counter() - t
        finally:
            trace.close()
            handle.release()
        print(f"fork at checkpoint 10: the new run {forked * 1000:.0f} ms, its worktree made when it first runs "
              f"{made * 1000:.0f} ms")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=FILES)
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args(argv)
    print(f"[host speed check: {host_speed_ms():.1f} ms]")
    asyncio.run(main_async(args.files, args.steps))


if __name__ == "__main__":
    main()
