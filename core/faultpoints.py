"""A test-only crash hook: exit hard at the k-th event boundary of this process.

``TETHER_CRASH_AT=k`` makes the process ``os._exit`` (no cleanup, no flush, like a
SIGKILL) when it reaches its k-th boundary: before and after each model reply is
saved, before and after each tool runs, before and after each save. The crash
campaign walks k = 1..N and resumes after each crash. ``TETHER_CRASH_AT=name:k``
crashes at the k-th boundary of that name instead (e.g. ``after_tool:1``), for
tests aimed at one gap. Unset, a boundary costs one comparison.
"""

from __future__ import annotations

import os
import sys

CRASH_EXIT_CODE = 86

_spec = os.environ.get("TETHER_CRASH_AT", "")
_crash_name, _, _crash_k = _spec.rpartition(":")
_crash_at = int(_crash_k or 0)
_count = 0


def boundary(name: str) -> None:
    global _count
    if not _crash_at or (_crash_name and name != _crash_name):
        return
    _count += 1
    if _count == _crash_at:
        sys.stderr.write(f"TETHER_CRASH_AT={_spec}: crashing at boundary {name}\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
