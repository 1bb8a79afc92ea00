"""``tether worker`` and ``tether submit``: queue workers, and runs queued for them, on DBOS
over the PostgreSQL store (:mod:`tether.workers`, the ``[workers]`` extra). DBOS launches
outside an event loop: these two are called as they are."""

from __future__ import annotations

import argparse

from tether.demo.agents import DEMO
from tether.workers.commands import submit_command, worker_command


def worker(args: argparse.Namespace) -> int:
    return worker_command(args, agent_sets=(DEMO,))


def submit(args: argparse.Namespace) -> int:
    return submit_command(args, agent_sets=(DEMO,))


COMMANDS = {"worker": worker, "submit": submit}
