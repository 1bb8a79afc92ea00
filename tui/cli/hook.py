"""``tether hook``: Claude Code's hooks (:mod:`tether.integrations.claude_code`), each one a
process that speaks their protocol on stdin and stdout."""

from __future__ import annotations

import argparse

from tether.integrations.claude_code import main as claude_code_hook


def hook(args: argparse.Namespace) -> int:
    return claude_code_hook(args.rest)


COMMANDS = {"hook": hook}
