"""``tether demo`` for real: on a terminal, the tour plays every step, quits by itself and
leaves nothing behind (the scripted provider's child process included), and its runs were
kept out of the operator's runs folder."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

from tether.tui.cli.tour import STEPS

from tests.support import REPO, Terminal, processes_with


@pytest.mark.serial  # the captions are read from what the terminal was sent, which a loaded machine coalesces
def test_tether_demo_plays_every_step_then_quits_clean(tmp_path: Path) -> None:
    token = uuid.uuid4().hex  # marks every process of the demo, the provider child's too
    home = tmp_path / "home"
    env = {**os.environ, "TERM": "xterm-256color", "TETHER_HOME": str(home), "MCP_TEST_TOKEN": token}
    # A pace a loaded machine still paints each caption in (the suite runs on four workers).
    term = Terminal([sys.executable, "-m", "tether.tui.cli", "demo", "--pace", "0.3", "--latency-ms", "0"],
                    cwd=REPO, env=env, size=(150, 42))
    try:
        code = term.wait_exit()
        shown = term.text()
        assert code == 0, shown[-3000:]
        for step in STEPS:
            assert step.caption in shown, step.name
        assert processes_with(token) == {}
        assert not (home / "runs").exists()  # the tour's runs were in a folder of its own, removed
    finally:
        term.close()
