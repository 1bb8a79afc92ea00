"""Where ``make agents`` installs the real coding agents, and what every offline launch of one
shares: the command and environment (:class:`AgentLaunch`) and a private HOME with its XDG
folders (:func:`private_home`), so that nothing of the operator's is read or written.

Its own module so that :mod:`tether.demo.acp` (OpenCode, Qwen Code, the tour's agent file) and
:mod:`tether.demo.acp_agents` (Claude, Codex, Gemini CLI) both build on it, the first on the second.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["AGENTS_DIR", "AgentLaunch", "private_home"]

CHECKOUT = Path(__file__).resolve().parents[2]
AGENTS_DIR = CHECKOUT / ".agents"
"""Where ``make agents`` installs them (an ignored folder of the checkout)."""


@dataclass(frozen=True)
class AgentLaunch:
    """How to start one agent: its command (argv) and the environment to pass besides the default."""

    name: str
    command: list[str]
    env: dict[str, str]


def private_home(home: Path) -> dict[str, str]:
    """``HOME`` and the XDG folders, all under ``home`` (made here)."""
    xdg = {"XDG_CONFIG_HOME": home / ".config", "XDG_DATA_HOME": home / ".local" / "share",
           "XDG_CACHE_HOME": home / ".cache", "XDG_STATE_HOME": home / ".local" / "state"}
    for folder in xdg.values():
        folder.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), **{k: str(v) for k, v in xdg.items()}}
