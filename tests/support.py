"""Helpers the test modules share (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def crashing(at: str, *args: str) -> subprocess.CompletedProcess:
    """``tether ARGS``, armed by the crash campaign's shim to exit hard at boundary ``at``
    (``name:k`` or ``k``; see tests/campaign/shim.py)."""
    return subprocess.run([sys.executable, "-m", "tests.campaign.shim", *args], capture_output=True, text=True,
                          env={**os.environ, "TETHER_CRASH_AT": at}, timeout=120, cwd=REPO)
