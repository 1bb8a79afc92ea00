"""``make bench`` loads every benchmark before it runs the first, so a name one of them imports
that a change took away breaks all of ``make bench`` (bench_store imported
``tether.observe.report.recorded`` for a stop after it had gone). This loads them as
``make bench`` does, and holds the sections docs/performance.md names to those it runs."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs" / "performance.md"


def test_make_bench_loads_and_the_docs_name_its_sections() -> None:
    bench = importlib.import_module("tests.benchmarks.__main__")  # its work is under __main__: not run here
    sections = [key for key, _, run in bench.BENCHES if callable(run)]
    assert len(sections) == len(bench.BENCHES) == len(set(sections))
    said = DOCS.read_text().split("runs some\n(", 1)[1].split(")", 1)[0]
    assert re.findall(r"`([a-z-]+)`", said) == sections
