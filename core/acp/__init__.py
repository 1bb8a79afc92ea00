"""ACP agents (OpenCode, Qwen Code, Claude Code and Codex through Zed's adapters, Gemini CLI…)
driven from Tether's side of the Agent Client Protocol, on the ``acp`` package.

``AcpSession`` runs one agent process and session; ``probe`` runs ``initialize`` only. What the
agent does arrives as the small events of ``tether.acp.events``; permission requests are
``PermissionRequest`` objects someone outside decides.

The names below are imported when first used: the ``acp`` package's schema takes a few hundred
milliseconds to import, and ``tether agents`` with every answer kept (``tether.acp.probe_cache``)
or a module that needs only the errors must not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.lazy import lazy_names

# Not lazy: the submodule's name is the function's, and importing the submodule would set the
# package's attribute to the module. probe.py imports the client only when it asks an agent.
from tether.acp.probe import probe

__all__ = [
    "AcpError", "AcpSession", "AgentDied", "AgentInfo", "AgentProtocolError", "AgentStartError",
    "PermissionOption", "PermissionRequest", "probe",
]

_WHERE = {
    "AcpSession": "tether.acp.client",
    **dict.fromkeys(["AcpError", "AgentDied", "AgentProtocolError", "AgentStartError"], "tether.acp.errors"),
    "AgentInfo": "tether.acp.events",
    **dict.fromkeys(["PermissionOption", "PermissionRequest"], "tether.acp.permissions"),
}


__getattr__, __dir__ = lazy_names(globals(), _WHERE)


if TYPE_CHECKING:
    from tether.acp.client import AcpSession
    from tether.acp.errors import AcpError, AgentDied, AgentProtocolError, AgentStartError
    from tether.acp.events import AgentInfo
    from tether.acp.permissions import PermissionOption, PermissionRequest
