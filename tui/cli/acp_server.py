"""``tether acp``: Tether as an ACP agent on stdio (:mod:`tether.acp.server`), the demo's
agents beside the agent file's."""

from __future__ import annotations

import argparse

from tether.acp.server import main as serve_acp
from tether.demo.agents import DEMO


def acp(args: argparse.Namespace) -> int:
    return serve_acp(args, agent_sets=(DEMO,))


COMMANDS = {"acp": acp}
