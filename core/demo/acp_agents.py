"""Claude, Codex and Gemini CLI as ACP agents, offline, as ``make agents`` installs them into
``.agents/`` (the pins are the Makefile's ``AGENT_PACKAGES``; how each runs offline and its traps, as measured
with those pins, are in docs/acp.md, "Claude, Codex and Gemini CLI").

Each runs against the coding endpoint (``tether provider --coding``: ``ROOT`` is its URL
without ``/v1``), with a private HOME and state folders, and every update check, telemetry
and analytics off:
- Claude (npm ``@zed-industries/claude-agent-acp``, which bundles Claude Code) speaks Anthropic
  Messages at ``ANTHROPIC_BASE_URL``;
- Codex (npm ``@zed-industries/codex-acp``, a Rust binary) speaks only the Responses API, to a
  provider its ``CODEX_HOME/config.toml`` declares; it needs a known model slug (else it warns
  and offers no ``apply_patch``), and its sandbox helper named on PATH when its home is under
  /tmp (links ``codex-linux-sandbox`` and ``apply_patch`` to the binary);
- Gemini CLI (npm ``@google/gemini-cli``, ``gemini --acp``) speaks ``streamGenerateContent`` at
  ``GOOGLE_GEMINI_BASE_URL``. It cannot create a new file through the client's ``fs/*``, so it
  runs with ``fs = false`` (it writes itself).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tether.demo.agent_homes import AGENTS_DIR, AgentLaunch, private_home

__all__ = ["CLAUDE_ACP", "CODEX_ACP", "CODEX_MODEL", "GEMINI", "launch_claude", "launch_codex", "launch_gemini",
           "missing_new"]

_MODULES = AGENTS_DIR / "node_modules"
CLAUDE_ACP = _MODULES / "@zed-industries" / "claude-agent-acp" / "dist" / "index.js"
CODEX_ACP = _MODULES / "@zed-industries" / "codex-acp-linux-x64" / "bin" / "codex-acp"
GEMINI = _MODULES / "@google" / "gemini-cli" / "bundle" / "gemini.js"
CODEX_MODEL = "gpt-5.4"
"""A model slug Codex knows (its metadata gives it ``apply_patch``); the endpoint takes any."""
GEMINI_MODEL = "gemini-2.5-flash"
_KEY = "sk-scripted-offline"  # the endpoint takes any key


def missing_new() -> str | None:
    """Why Claude's, Codex's or Gemini's ACP agent cannot run here, in one line, or None."""
    absent = [p for p in (CLAUDE_ACP, CODEX_ACP, GEMINI) if not p.exists()]
    if not absent:
        return None
    where = ", ".join(str(p.relative_to(AGENTS_DIR)) for p in absent)
    return f"Claude's, Codex's or Gemini's ACP agent is not installed (looked in {AGENTS_DIR} for {where}): " \
           "run `make agents` in the checkout (needs npm)"


def _node() -> str:
    return "node"


def launch_claude(home: Path, root: str) -> AgentLaunch:
    env = private_home(home) | {
        "ANTHROPIC_BASE_URL": root, "ANTHROPIC_API_KEY": _KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CONFIG_DIR": str(home / ".claude")}
    return AgentLaunch("claude", [_node(), str(CLAUDE_ACP)], env)


def launch_codex(home: Path, root: str, model: str = CODEX_MODEL) -> AgentLaunch:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{model}"\nmodel_provider = "mock"\ncheck_for_update_on_startup = false\n\n'
        f'[model_providers.mock]\nname = "scripted"\nbase_url = "{root}/v1"\nwire_api = "responses"\n'
        'env_key = "MOCK_KEY"\n\n[analytics]\nenabled = false\n')
    tools = home / "bin"
    tools.mkdir(parents=True, exist_ok=True)
    for name in ("codex-linux-sandbox", "apply_patch"):
        link = tools / name
        if not link.exists():
            link.symlink_to(CODEX_ACP)
    env = private_home(home) | {"CODEX_HOME": str(codex_home), "MOCK_KEY": _KEY,
                                 "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"}
    return AgentLaunch("codex", [str(CODEX_ACP)], env)


def launch_gemini(home: Path, root: str, model: str = GEMINI_MODEL) -> AgentLaunch:
    env = private_home(home)
    settings = {"general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False},
                "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                "security": {"auth": {"selectedType": "gemini-api-key"}}, "model": {"name": model}}
    folder = home / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings, indent=2))
    env |= {"GOOGLE_GEMINI_BASE_URL": root, "GEMINI_API_KEY": _KEY, "GEMINI_CLI_NO_RELAUNCH": "true"}
    return AgentLaunch("gemini", [_node(), str(GEMINI), "--acp", "--model", model], env)
