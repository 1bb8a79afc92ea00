"""What the commands work on, made from their options: the run store, the agent file, and who
is acting. A command that runs a run here makes its harness with :mod:`tether.tui.cli.running`,
so that ``tether runs`` and a decision that a process takes load no harness."""

from __future__ import annotations

import argparse
from typing import Any

from tether.agents.configfile import find_config
from tether.store.operator import operator_name
from tether.store.protocol import call
from tether.store.spec import open_store
from tether.tui.cli.parser import UsageError


def store_of(args: argparse.Namespace) -> Any:
    """The command's run store (:func:`tether.store.spec.open_store`): ``--store``, else
    ``--runs-dir``, else ``$TETHER_STORE``, else ``$TETHER_HOME/runs``. Made once per command."""
    made = getattr(args, "_store", None)
    if made is not None:
        return made
    spec, runs_dir = getattr(args, "store", None), getattr(args, "runs_dir", None)
    if spec and runs_dir:
        raise UsageError("give --store or --runs-dir, not both")
    args._store = open_store(spec or runs_dir)
    return args._store


async def may_operate(args: argparse.Namespace, command: str) -> None:
    """Refuse, in words and before anything is changed, a command that changes runs on a
    store whose role may only watch them."""
    store = store_of(args)
    role = await call(store, store.read_only)
    if role is not None:
        raise UsageError(f"this store's role {role} may only watch: tether {command} needs a role that may "
                         f"change runs (the operator's); nothing was changed")


def who(args: argparse.Namespace) -> str:
    """Who is acting (``--as``), recorded with a Stop or a decision: by default user@host."""
    return getattr(args, "who", None) or operator_name()


async def account(args: argparse.Namespace) -> str:
    """Who the command is to its store, which no option changes (``--as`` is a name recorded
    beside it): the operating system's account, or the database role it connected as."""
    store = store_of(args)
    return await call(store, store.account)


def config(args: argparse.Namespace) -> Any:
    """The agent file in force, checked, or None (the demo agents only). The checker
    (pydantic) is imported only when there is a file to check."""
    path = find_config(getattr(args, "config", None))
    if path is None:
        return None
    # lazy: pydantic, only with an agent file to check; tether runs and a decision a process takes
    # load none (tests/processes/test_cold_start.py)
    from tether.agents.config import load_config

    return load_config(path)
