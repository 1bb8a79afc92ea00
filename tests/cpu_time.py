"""CPU time per test, for finding what makes ``make test`` slow on a loaded 2-core host.

Wall-clock durations say little there (a test waits for the CPU as long as it runs), so this
plugin records, per test, the CPU seconds of the test's process (every thread) and of the
children it reaped meanwhile (``tether`` processes, agents, Chromium, the local model's
server: a child's own reaped children are in its figure): one JSON line a test, in
``$CPU_TIME_DIR/cpu-WORKER.jsonl`` (``/tmp`` by default; one file per xdist worker).
A child reaped later (a server a fixture of the module or session keeps) is counted in the
test that was running when it was reaped.

    .venv/bin/python -m pytest -p tests.cpu_time -n 4 -m "not serial"
    .venv/bin/python -m tests.cpu_time [DIR] [N]     # the N files with the most CPU, with totals
"""

from __future__ import annotations

import collections
import glob
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

_out: Any = None


def _cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _folder() -> str:
    return os.environ.get("CPU_TIME_DIR", "/tmp")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _out
    if _out is None:
        _out = open(f"{_folder()}/cpu-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl", "a")
    own0, kids0 = _cpu()
    wall0 = time.monotonic()
    yield
    own1, kids1 = _cpu()
    _out.write(json.dumps({"id": item.nodeid, "self": round(own1 - own0, 3), "kids": round(kids1 - kids0, 3),
                           "wall": round(time.monotonic() - wall0, 3)}) + "\n")
    _out.flush()


def summary(folder: str, top: int = 40) -> str:
    per: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for path in glob.glob(f"{folder}/cpu-*.jsonl"):
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                counts = per[row["id"].split("::")[0]]
                counts[0] += 1
                counts[1] += row["self"]
                counts[2] += row["kids"]
                counts[3] += row["wall"]
    total = [sum(c[i] for c in per.values()) for i in range(4)]
    lines = [f"{int(total[0])} tests: {total[1] + total[2]:.0f} CPU-s ({total[1]:.0f} in pytest, "
             f"{total[2]:.0f} in children), {total[3]:.0f} s of test wall time",
             "   CPU-s     self    children    wall-s  tests  file"]
    for name, c in sorted(per.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:top]:
        lines.append(f"{c[1] + c[2]:8.1f} {c[1]:8.1f} {c[2]:11.1f} {c[3]:9.1f} {int(c[0]):6d}  {name}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(sys.argv[1] if len(sys.argv) > 1 else _folder(), int(sys.argv[2]) if len(sys.argv) > 2 else 40))
