"""The real ACP agents ``make agents`` installs into ``.agents/``, and their offline configs
(``tether.acp.demo``'s, which ``tether demo --acp`` uses too).

Each agent runs against a scripted chat-completions endpoint on loopback, with a private HOME
and XDG folders (nothing of the operator's is read or written) and every network feature off
(the measurements in ../shared/WAVE3.md say which). ``launch_*`` returns the command and the
environment for ``tether.acp``; the configs are written under ``home``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.acp.demo import (AGENTS_DIR, MODEL, NODE22, OPENCODE, QWEN_ENTRY, AgentLaunch, launch_opencode,
                             launch_qwen, missing)

__all__ = ["AGENTS_DIR", "MODEL", "NODE22", "OPENCODE", "QWEN_ENTRY", "REPO", "AgentLaunch", "launch_opencode",
           "launch_qwen", "missing", "require_agents"]

REPO = Path(__file__).resolve().parents[2]


def require_agents() -> None:
    """Skip the calling test with one loud reason when the agents are missing; fail in CI."""
    why = missing()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"the real ACP agents are required in CI: {why}", pytrace=False)
    pytest.skip(why)
