"""``tether provider``, ``lab`` and ``eval``: the scripted provider served over HTTP, the
experiments rerun against it, and the eval tasks graded against a model (the scripted
provider by default). The work is in :mod:`tether.demo`."""

from __future__ import annotations

import argparse

from tether.demo.acp import TASKS
from tether.demo import evaluate as evaluation
from tether.demo.lab import command
from tether.demo.provider.coding import ScriptedEndpoint, read_tasks
from tether.demo.provider.server import serve, serve_app
from tether.tui.cli.parser import UsageError


def provider(args: argparse.Namespace) -> int:
    """The scripted provider, or with ``--coding`` the coding agents' endpoint, until signalled."""
    # The scripted provider's own options, as given (by serve()'s names: its defaults are its own).
    scripted = {name: (flag, value) for name, flag, value in (
        ("latency_ms", "--latency-ms", args.latency_ms), ("fail_spec", "--fail", args.fail),
        ("retry_after", "--retry-after", args.retry_after)) if value is not None}
    if args.coding:
        if scripted:
            flag = next(iter(scripted.values()))[0]
            raise UsageError(f"{flag} is the scripted provider's: the coding endpoint (--coding) has none")

        tasks = read_tasks(args.tasks) if args.tasks is not None else TASKS
        workspace = args.workspace.resolve() if args.workspace is not None else None
        serve_app(ScriptedEndpoint(tasks, workspace).app(), args.host, args.port,
                  until_stdin_closes=args.until_stdin_closes)
        return 0
    for flag, value in (("--tasks", args.tasks), ("--workspace", args.workspace)):
        if value is not None:
            raise UsageError(f"{flag} goes with --coding (the coding agents' endpoint)")

    serve(args.host, args.port, until_stdin_closes=args.until_stdin_closes,
          **{name: value for name, (_, value) in scripted.items()})
    return 0


async def lab(args: argparse.Namespace) -> int:
    return await command(args)


async def evaluate(args: argparse.Namespace) -> int:
    return await evaluation.command(args)


COMMANDS = {"provider": provider, "lab": lab, "eval": evaluate}
