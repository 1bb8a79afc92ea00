"""Helpers the test modules share (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from textual import events, on
from textual.widgets import Input

from tether.tui.app import Shown, TetherApp

REPO = Path(__file__).resolve().parents[1]


def crashing(at: str, *args: str) -> subprocess.CompletedProcess:
    """``tether ARGS``, armed by the crash campaign's shim to exit hard at boundary ``at``
    (``name:k`` or ``k``; see tests/campaign/shim.py)."""
    return subprocess.run([sys.executable, "-m", "tests.campaign.shim", *args], capture_output=True, text=True,
                          env={**os.environ, "TETHER_CRASH_AT": at}, timeout=120, cwd=REPO)


class StillConsole(TetherApp):
    """The console as snapshot tests and the README's pictures need it: nothing on screen
    depends on the clock, the user or the host (no durations or times of day, decisions
    recorded as ``operator``, text cursors that do not blink). It also keeps the ``Shown``
    messages the app posts, as ``(what, run id)``, for tests of what reached the screen."""

    def __init__(self, **kw: Any) -> None:
        kw.setdefault("timings", False)
        kw.setdefault("operator", "operator")
        super().__init__(**kw)
        self.shown: list[tuple[str, str]] = []

    def on_shown(self, message: Shown) -> None:
        self.shown.append((message.what, message.run_id))

    @on(events.DescendantFocus)
    def _still_cursor(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, Input):
            event.widget.cursor_blink = False


def still_console(**kw: Any) -> StillConsole:
    return StillConsole(**kw)
