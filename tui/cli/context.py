"""What the commands work on, made from their options: the run store, the agent file, the
harness, the run's Stop signal, and who is acting. Each is imported only by the command that
makes it, so that ``tether stop`` loads no harness and no agent file."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from tether.vocab.cancel import CancelSignal
from tether.store.protocol import call
from tether.tui.cli.parser import UsageError


def store_of(args: argparse.Namespace) -> Any:
    """The command's run store (:func:`tether.store.spec.open_store`): ``--store``, else
    ``--runs-dir``, else ``$TETHER_STORE``, else ``$TETHER_HOME/runs``. Made once per command."""
    from tether.store.spec import open_store

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
    from tether.store.control import operator_name

    return getattr(args, "who", None) or operator_name()


async def account(args: argparse.Namespace) -> str:
    """Who the command is to its store, which no option changes (``--as`` is a name recorded
    beside it): the operating system's account, or the database role it connected as."""
    store = store_of(args)
    return await call(store, store.account)


def config(args: argparse.Namespace) -> Any:
    """The agent file in force, checked, or None (the demo agents only). The checker
    (pydantic) is imported only when there is a file to check."""
    from tether.agents.configfile import find_config

    path = find_config(getattr(args, "config", None))
    if path is None:
        return None
    from tether.agents.config import load_config

    return load_config(path)


def harness(args: argparse.Namespace, **kw: Any) -> Any:
    """The harness of a command, exporting its runs' spans when OpenTelemetry is configured
    (``--otlp URL`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``): the exporter is imported only then."""
    from tether.demo.agents import DEMO
    from tether.harness import Harness

    made = Harness(workspace=getattr(args, "workspace", None), config=config(args), store=store_of(args),
                   agent_sets=(DEMO,), operator_name=getattr(args, "who", None), **kw)
    otlp = getattr(args, "otlp", None)
    if otlp or _otel_configured():
        from tether.observe.otel.settings import CLI_EXPORT_TIMEOUT
        from tether.observe.otel.sink import otel_sink_from_env

        sink = otel_sink_from_env(otlp, on_dropped=made.note_dropped, state_of=made.live.get,
                                  secrets=made.secrets(), timeout=CLI_EXPORT_TIMEOUT)
        if sink is not None:
            made.sinks.append(sink)
    return made


def harness_for(args: argparse.Namespace) -> Any:
    """A harness on the run's runs dir; the run's agent is rebuilt from what the run saved."""
    return harness(args, api_key=os.environ.get("LLM_API_KEY"))


def _otel_configured() -> bool:
    return any(os.environ.get(name) for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


async def stop_signal(args: argparse.Namespace) -> CancelSignal:
    """The run's Stop signal. With --cancel-after it fires that long after the run starts:
    the rank file is loaded first, so start-up does not eat into the time."""
    from tether.models.tokens import encoding

    signal = CancelSignal()
    seconds = getattr(args, "cancel_after", None)
    if seconds is not None:
        await asyncio.to_thread(encoding)
        asyncio.get_running_loop().call_later(seconds, signal.cancel, f"cancelled after {seconds:g} s (--cancel-after)")
    return signal


def waiting(args: argparse.Namespace) -> float | None:
    """How long the process waits at an approval (``--wait-for-decision``), or None: it exits 5."""
    return args.decision_timeout if getattr(args, "wait_for_decision", False) else None

