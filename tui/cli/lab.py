"""``tether provider``, ``lab`` and ``eval``: the scripted provider served over HTTP, the
experiments rerun against it, and the eval tasks graded against a model (the scripted
provider by default). The work is in :mod:`tether.demo`."""

from __future__ import annotations

import argparse


def provider(args: argparse.Namespace) -> int:
    from tether.demo.provider.server import serve

    serve(args.host, args.port, args.latency_ms, args.fail, args.retry_after, args.until_stdin_closes)
    return 0


async def lab(args: argparse.Namespace) -> int:
    from tether.demo.lab import command

    return await command(args)


async def evaluate(args: argparse.Namespace) -> int:
    from tether.demo.evaluate import command

    return await command(args)


COMMANDS = {"provider": provider, "lab": lab, "eval": evaluate}
