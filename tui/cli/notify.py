"""``tether notify``: the notification channels (:mod:`tether.notify`), sent what the store's
runs wait for until the command is told to stop."""

from __future__ import annotations

import argparse

from tether.notify.command import notify_command
from tether.tui.cli import context


async def notify(args: argparse.Namespace) -> int:
    return await notify_command(args, context.store_of(args))


COMMANDS = {"notify": notify}
