"""The commands that hand the process over to a part of Tether that runs until it is told to
stop, or that speaks another program's protocol: ``serve`` (:mod:`tether.web`), ``notify``
(:mod:`tether.notify`), ``acp`` (:mod:`tether.acp`), ``hook`` (:mod:`tether.integrations`),
``worker`` and ``submit`` (:mod:`tether.workers`)."""

from __future__ import annotations

import argparse

from tether.tui.cli import context


def serve(args: argparse.Namespace) -> int:
    """aiohttp's server, on an event loop of its own."""
    # lazy: the web server (aiohttp) loads for tether serve alone (each command here, its own stack)
    from tether.web.command import serve_command

    return serve_command(args, context.store_of(args), lambda: context.harness(args))


async def notify(args: argparse.Namespace) -> int:
    # lazy: the notification channels load for tether notify alone (each command here, its own stack)
    from tether.notify.command import notify_command

    return await notify_command(args, context.store_of(args))


def acp(args: argparse.Namespace) -> int:
    """An ACP agent on stdio, the demo's agents beside the agent file's."""
    # lazy: the ACP server (the acp package) loads for tether acp alone (each command here, its own stack)
    from tether.acp.server import main as serve_acp
    from tether.demo.agents import DEMO

    return serve_acp(args, agent_sets=(DEMO,))


def hook(args: argparse.Namespace) -> int:
    # lazy: the Claude Code hook loads for tether hook alone (each command here, its own stack)
    from tether.integrations.claude_code import main as claude_code_hook

    return claude_code_hook(args.rest)


# DBOS launches outside an event loop: these two are called as they are.

def worker(args: argparse.Namespace) -> int:
    # lazy: DBOS (the [workers] extra) loads for tether worker alone (each command here, its own stack)
    from tether.demo.agents import DEMO
    from tether.workers.commands import worker_command

    return worker_command(args, agent_sets=(DEMO,))


def submit(args: argparse.Namespace) -> int:
    # lazy: DBOS (the [workers] extra) loads for tether submit alone (each command here, its own stack)
    from tether.demo.agents import DEMO
    from tether.workers.commands import submit_command

    return submit_command(args, agent_sets=(DEMO,))


COMMANDS = {"serve": serve, "notify": notify, "acp": acp, "hook": hook, "worker": worker, "submit": submit}
