"""The run API's cost per reported event, against the library's own loop (issue 29).

A program on another framework reports each model call and each tool call into its run
(:mod:`tether.run.tracked`). What that costs the program, per event, on the file store:

* **reported**: ``harness.track`` a run and report N turns, each a tool call started, its
  result, and the model call's usage (three events, each saved as Tether saves its own
  steps). The figure is the wall time per event.
* **baseline, in this process**: Tether's own loop running the ``runaway`` scenario for N
  turns against the in-process scripted provider (each turn: a model call, a tool call and
  its result, saved the same way), per event of its trace.

Both write the same store with the same saves, so the ratio says what the run API adds over
the loop's own bookkeeping. No timing is asserted; docs/performance.md has a run's figures.

Run: ``.venv/bin/python -m tests.benchmarks --only tracked`` or
``.venv/bin/python -m tests.benchmarks.bench_tracked [--turns N] [--trials N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from tether.harness import Harness
from tether.vocab.state import Limits
from tether.store.trace import read_trace
from tether.demo.agents import DEMO


async def reported(root: Path, turns: int) -> float:
    """Seconds per reported event over ``turns`` turns of three events each."""
    async with Harness(root / "runs", root / "ws", agent_sets=(DEMO,)) as harness:
        started = time.perf_counter()
        async with harness.track("bench", "report", limits=Limits(max_turns=None)) as run:
            for turn in range(turns):
                call_id = f"c{turn}"
                await run.tool_started(call_id, "list_files", {})
                await run.tool_finished(call_id, "access.log errors.log notes.txt")
                await run.usage(800 + turn, 40)
        elapsed = time.perf_counter() - started
    return elapsed / (turns * 3)


async def looped(root: Path, turns: int) -> float:
    """Seconds per traced event of Tether's own loop over ``turns`` turns of ``runaway``."""
    async with Harness(root / "runs", root / "ws", agent_sets=(DEMO,)) as harness:
        state = harness.new_run("runaway", limits=Limits(max_turns=turns))
        started = time.perf_counter()
        await harness.run(state.run_id)
        elapsed = time.perf_counter() - started
        events = sum(1 for _ in read_trace(root / "runs" / state.run_id / "trace.jsonl"))
    return elapsed / events


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_tracked")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args(argv)
    mine, theirs = [], []
    for _ in range(args.trials):
        with tempfile.TemporaryDirectory() as tmp:
            theirs.append(asyncio.run(looped(Path(tmp) / "loop", args.turns)))
            mine.append(asyncio.run(reported(Path(tmp) / "api", args.turns)))
    api, loop = statistics.median(mine), statistics.median(theirs)
    print(f"run API, per reported event ({args.turns} turns x 3 events, median of {args.trials}): "
          f"{api * 1e6:,.0f} us")
    print(f"Tether's own loop, per traced event (runaway, {args.turns} turns): {loop * 1e6:,.0f} us")
    print(f"ratio, run API / loop: {api / loop:.2f}x")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
