"""``make test`` runs the tests marked ``serial`` alone, after the parallel run, collecting only
the files the Makefile names (collecting the whole suite for 13 tests costs more than running
some of them): a serial test in another file would never run. This finds one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_serial_test_is_in_a_file_the_makefile_runs_serially() -> None:
    named = re.search(r"^SERIAL_TESTS = (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert named is not None, "the Makefile names no SERIAL_TESTS"
    files = {ROOT / f for f in named.group(1).split()}
    mark = re.compile(r"^\s*(@pytest\.mark\.serial|pytestmark\s*=.*\bserial\b)", re.MULTILINE)
    marked = {p for p in (ROOT / "tests").rglob("*.py") if mark.search(p.read_text())}
    assert marked, "no test is marked serial: the Makefile's serial run would run none"
    assert marked == files, f"marked serial: {sorted(str(p.relative_to(ROOT)) for p in marked)}"
