"""``tether notify [--store …] [--config FILE] [--public-url URL]``: the sender where no web
server runs (``tether serve`` runs the same sender itself). Until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from urllib.parse import urlsplit

from tether.store.protocol import Store
from tether.notify.channels import load_channels
from tether.notify.sender import run_sender


async def notify_command(args: argparse.Namespace, store: Store) -> int:
    """Check the ``[notify.*]`` tables, then send until a signal; 0 when stopped by one."""
    public = args.public_url
    parts = urlsplit(public or "")
    if public is not None and (parts.scheme not in ("http", "https") or not parts.hostname):
        print(f"tether: error: --public-url {public!r} is not an http:// or https:// URL: give where tether serve "
              "is reached, such as https://tether.example.com", file=sys.stderr)
        return 2
    channels = load_channels(getattr(args, "config", None))  # a bad table: its words, before anything starts
    if not channels:
        print("tether: error: no [notify.NAME] tables in the agent file (--config, $TETHER_CONFIG or ./tether.toml): "
              "nothing to send; docs/notifications.md shows one", file=sys.stderr)
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("tether notify: %(message)s"))
    logger = logging.getLogger("tether.notify")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    try:
        await run_sender(store, public_url=args.public_url, stop=stop, channels=channels)
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)
        logger.removeHandler(handler)
    return 0
