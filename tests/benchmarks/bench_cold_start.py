"""Cold start: what ``tether COMMAND`` imports as a new process, and how long that takes.

Each command runs as a new process on a file store made for the purpose, under
``python -X importtime``; the figure is the sum of the cumulative times of the modules it
imported at the top level once the interpreter was up (after ``site`` and ``runpy``): what
the command itself costs to load. Beside it, the wall time of the whole process (its
interpreter start-up and its work included), and how many modules it loaded. Several
samples each, the median; the first of each is dropped (it warms the page cache).

The commands: ``stop RUN`` on a run waiting for an approval that no process holds (the full
path, which answers that there is nothing to stop); ``stop`` of a live run, one that a
``tether run slow`` process of its own holds for each sample (the quick path,
:mod:`tether.store.files.quickstop`); ``approve`` and ``reject`` on a completed run (refused
after the harness they would go on with the run in is loaded); ``approve`` of a run whose
process waits for the decision (``--wait-for-decision``: delivered, no harness); ``runs``, a
real ``run plan``, and the console's imports (``tether.tui.app``, what ``tether console``
loads before its first frame; without a terminal here).

``--before DIR`` measures a checkout of a commit from before the restructure too (its CLI is
``tether.cli``, run with ``PYTHONPATH=DIR``), interleaved sample by sample with this tree.

Bytecode: this runs its children without ``PYTHONDONTWRITEBYTECODE``, as an installed
``tether`` runs (a wheel's install compiles it); with it, every process would compile
Tether's modules from source.

Run: ``.venv/bin/python -m tests.benchmarks.bench_cold_start [--samples N] [--before DIR]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.benchmarks.peers import scratch_dir

SAMPLES = 7
LIVE = "{live}"
"""In a case's line: a run that a process of its own holds, started for each sample
(:data:`LIVE_RUNS`)."""
LIVE_RUNS = {"stop": ["run", "slow"], "approve": ["run", "destructive", "--wait-for-decision"]}
HEAVY = ("textual", "pydantic", "jsonschema", "httpx", "opentelemetry", "mcp", "psycopg", "dbos", "aiohttp")
"""The packages the commands that only ask or stop must not load (tests/processes/test_cold_start.py)."""

CASES: list[tuple[str, list[str]]] = [
    ("stop", ["stop", "waiting"]),  # nothing to stop: the full path says so
    ("stop, a live run", ["stop", LIVE]),  # the quick path: its process runs here
    ("approve", ["approve", "done"]),  # nobody holds it: the harness is built to decide here
    ("approve, a process waits", ["approve", LIVE]),  # delivered to the process that waits
    ("reject", ["reject", "done"]),
    ("runs", ["runs"]),
    ("run", ["run", "plan"]),  # a run id per sample is added
    ("console", []),  # its imports, by -c
]


@dataclass(frozen=True)
class Tree:
    """One checkout's ``tether``: the module its CLI is, and the PYTHONPATH that finds it."""

    label: str
    cli: str
    pythonpath: str | None = None

    def env(self, home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["TETHER_HOME"] = str(home)
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        return env

    def argv(self, name: str, args: list[str], sample: int) -> list[str]:
        if name == "console":
            app = "tether.tui.app"
            return [sys.executable, "-X", "importtime", "-c", f"import {self.cli}, {app}"]
        if name == "run":
            args = [*args, "--run-id", f"cold-{sample}"]
        return [sys.executable, "-X", "importtime", "-m", self.cli, *args]


AFTER = Tree("after", "tether.tui.cli")


@dataclass
class Sample:
    import_ms: float
    wall_ms: float
    modules: int
    heavy: frozenset[str]


def parse_importtime(stderr: str) -> tuple[float, int, set[str]]:
    """The command's imports (ms) from ``-X importtime``: the top-level modules after the
    interpreter's own start-up (``site``, and ``runpy`` for ``-m``); how many modules that
    is; which of :data:`HEAVY` it loaded."""
    rows: list[tuple[str, int, int]] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        rows.append((name.strip(), int(cumulative), depth))
    start = max((i for i, (name, _, depth) in enumerate(rows) if depth == 0 and name in ("site", "runpy")),
                default=-1)
    mine = rows[start + 1:]
    heavy = {h for name, _, _ in mine for h in HEAVY if name == h or name.startswith(h + ".")}
    return sum(c for _, c, depth in mine if depth == 0) / 1000, len(mine), heavy


def _prepare(tree: Tree, home: Path) -> None:
    """A store with a run waiting for an approval and a completed one."""
    env = tree.env(home)
    for args, code in ((["run", "destructive", "--run-id", "waiting"], 5), (["run", "plan", "--run-id", "done"], 0)):
        done = subprocess.run([sys.executable, "-m", tree.cli, *args], env=env, capture_output=True, text=True,
                              timeout=300)
        if done.returncode != code:
            raise RuntimeError(f"{tree.label}: tether {' '.join(args)} exited {done.returncode}: {done.stderr}")


@contextlib.contextmanager
def _live(tree: Tree, home: Path, args: list[str], run_id: str) -> Iterator[None]:
    """``tether ARGS --run-id RUN_ID`` in a process of its own, once it holds the run and
    waits (a Stop finds it in its tool; a decision finds it waiting); ended afterwards."""
    from tests.support import takes_requests

    proc = subprocess.Popen([sys.executable, "-m", tree.cli, *args, "--run-id", run_id], env=tree.env(home),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    waits = "--wait-for-decision" in args
    try:
        deadline = time.monotonic() + 120
        while not takes_requests(home / "runs", run_id, waits=waits):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{tree.label}: tether {' '.join(args)} did not hold its run (exit {proc.poll()})")
            time.sleep(0.01)
        time.sleep(0.05)  # well into the tool, or the wait
        yield
    finally:
        if proc.poll() is None:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _sample(tree: Tree, home: Path, name: str, args: list[str], i: int) -> Sample:
    live = contextlib.nullcontext()
    if LIVE in args:
        run_id = f"live-{name.split(',')[0]}-{i}"
        live = _live(tree, home, LIVE_RUNS[args[0]], run_id)
        args = [run_id if a == LIVE else a for a in args]
    with live:
        started = time.perf_counter()
        done = subprocess.run(tree.argv(name, args, i), env=tree.env(home), capture_output=True, text=True,
                              timeout=300)
        wall = (time.perf_counter() - started) * 1000
    if done.returncode not in (0, 1, 2, 5) or "Traceback" in done.stderr:
        raise RuntimeError(f"{tree.label} {name}: exit {done.returncode}: {done.stderr[-2000:]}")
    ms, modules, heavy = parse_importtime(done.stderr)
    return Sample(ms, wall, modules, frozenset(heavy))


def measure(trees: list[Tree], samples: int = SAMPLES) -> dict[tuple[str, str], list[Sample]]:
    """Every command of every tree, interleaved: sample i of each before sample i + 1."""
    out: dict[tuple[str, str], list[Sample]] = {}
    with scratch_dir("cold-start") as tmp:
        homes = {t.label: Path(tmp) / t.label for t in trees}
        for tree in trees:
            _prepare(tree, homes[tree.label])
        for i in range(samples + 1):
            for name, args in CASES:
                for tree in trees:
                    sample = _sample(tree, homes[tree.label], name, args, i)
                    if i > 0:
                        out.setdefault((tree.label, name), []).append(sample)
    return out


def table(results: dict[tuple[str, str], list[Sample]], trees: list[Tree]) -> str:
    head = "| command | " + " | ".join(f"imports, {t.label} (ms) | wall, {t.label} (ms) | modules, {t.label}"
                                        for t in trees) + " | heavy packages loaded |"
    lines = [head, "|" + "---|" * (2 + 3 * len(trees))]
    for name, _ in CASES:
        cells = []
        heavy: set[str] = set()
        for tree in trees:
            got = results[(tree.label, name)]
            cells += [f"{statistics.median(s.import_ms for s in got):.0f}",
                      f"{statistics.median(s.wall_ms for s in got):.0f}",
                      f"{statistics.median(s.modules for s in got):.0f}"]
            if tree is trees[-1]:
                heavy = set().union(*(s.heavy for s in got))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {', '.join(sorted(heavy)) or 'none'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="a checkout from before the restructure (DIR/tether/cli.py), measured too")
    args = parser.parse_args(argv)
    trees = ([Tree("before", "tether.cli", str(args.before))] if args.before else []) + [AFTER]
    results = measure(trees, args.samples)
    print(f"Cold start of each command as a new process, median of {args.samples} samples "
          f"(imports: -X importtime, the command's top-level modules; wall: the whole process; "
          f"heavy: of {', '.join(HEAVY)}, in the last tree):")
    print(table(results, trees))


if __name__ == "__main__":
    main()
