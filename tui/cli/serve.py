"""``tether serve``: aiohttp's server (:mod:`tether.web`), on an event loop of its own, until
it is told to stop. Its runs are made on the command's harness."""

from __future__ import annotations

import argparse

from tether.web.command import serve_command
from tether.tui.cli import context, running


def serve(args: argparse.Namespace) -> int:
    return serve_command(args, context.store_of(args), lambda: running.harness(args))


COMMANDS = {"serve": serve}
