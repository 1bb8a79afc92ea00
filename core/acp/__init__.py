"""ACP agents (OpenCode, Qwen Code, Claude Code and Codex through Zed's adapters, Gemini CLI…)
driven from Tether's side of the Agent Client Protocol, on the ``acp`` package.

``AcpSession`` runs one agent process and session; ``probe`` runs ``initialize`` only. What the
agent does arrives as the small events of ``tether.acp.events``; permission requests are
``PermissionRequest`` objects someone outside decides.
"""

from tether.acp.client import AcpSession
from tether.acp.errors import AcpError, AgentDied, AgentProtocolError, AgentStartError
from tether.acp.events import AgentInfo
from tether.acp.permissions import PermissionOption, PermissionRequest
from tether.acp.probe import probe

__all__ = [
    "AcpError", "AcpSession", "AgentDied", "AgentInfo", "AgentProtocolError", "AgentStartError",
    "PermissionOption", "PermissionRequest", "probe",
]
