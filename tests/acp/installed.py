"""The real ACP agents ``make agents`` installs into ``.agents/``, and their offline configs
(``tether.demo.acp``'s, which ``tether demo --acp`` uses too).

Each agent runs against a scripted chat-completions endpoint on loopback, with a private HOME
and XDG folders (nothing of the operator's is read or written) and every network feature off
(``tether.demo.acp`` sets which). ``launch_*`` returns the command and the
environment for ``tether.acp``; the configs are written under ``home``. Claude Code is there too,
for its hooks (tests/integrations): ``require_claude`` finds it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tether.demo.acp import (AGENTS_DIR, MODEL, NODE22, OPENCODE, QWEN_ENTRY, AgentLaunch, launch_opencode,
                             launch_qwen, missing)

__all__ = ["AGENTS_DIR", "CLAUDE", "CLAUDE_VERSION", "MODEL", "NODE22", "OPENCODE", "QWEN_ENTRY", "REPO", "AgentLaunch",
           "launch_opencode", "launch_qwen", "missing", "require_agents", "require_claude", "require_new_agents"]

REPO = Path(__file__).resolve().parents[2]
CLAUDE_VERSION = "2.1.197"
"""The Claude Code the Makefile pins (``AGENT_PACKAGES``), the one measured for docs/integrations.md."""
_CLAUDE_PACKAGE = AGENTS_DIR / "node_modules" / "@anthropic-ai" / "claude-code"
CLAUDE = _CLAUDE_PACKAGE / "bin" / "claude.exe"
"""Claude Code's native binary (``.agents/node_modules/.bin/claude`` links to it)."""


def require_agents() -> None:
    """Skip the calling test with one loud reason when the agents are missing; fail in CI."""
    why = missing()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"the real ACP agents are required in CI: {why}", pytrace=False)
    pytest.skip(why)


def require_new_agents() -> None:
    """Skip the calling test with one loud reason when Claude's, Codex's or Gemini's ACP agent is
    missing; fail in CI."""
    from tether.demo.acp_agents import missing_new

    why = missing_new()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"the real ACP agents are required in CI: {why}", pytrace=False)
    pytest.skip(why)


def require_claude() -> Path:
    """The real Claude Code CLI, at the pinned version; else skip the calling test with one
    loud reason (fail in CI)."""
    why = _claude_missing()
    if why is None:
        return CLAUDE
    if os.environ.get("CI"):
        pytest.fail(f"the real Claude Code CLI is required in CI: {why}", pytrace=False)
    pytest.skip(why)


def _claude_missing() -> str | None:
    how = "run `make agents` in the checkout" + ("" if shutil.which("npm") else " (install npm first)")
    if not CLAUDE.exists():
        return f"the real Claude Code CLI is not installed (looked for {CLAUDE}): {how}"
    try:
        version = json.loads((_CLAUDE_PACKAGE / "package.json").read_text()).get("version")
    except (OSError, ValueError) as exc:
        return f"cannot read Claude Code's version ({exc}): {how}"
    if version != CLAUDE_VERSION:
        return f"Claude Code {version} is installed in {AGENTS_DIR}, not the pinned {CLAUDE_VERSION}: {how}"
    return None
