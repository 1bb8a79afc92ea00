"""The fault campaign under pytest: each provider or disk fault injected under a whole run.

The cases, and what each asserts, are in tests/campaign/faults.py; ``make campaign``
prints the same cases as a table (fault class → handled how → result).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.campaign.faults import CASES, FaultCase


@pytest.mark.parametrize("fault", CASES, ids=[c.fault for c in CASES])
def test_fault_is_handled(fault: FaultCase, tmp_path: Path) -> None:
    assert fault.check(tmp_path)
