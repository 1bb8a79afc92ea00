"""``tether console`` (and plain ``tether``): from the command line's arguments to a running
console, with every usage error said on stderr in one line before the screen opens.

Here the CLI chooses what the console offers, and the console knows none of it: the demo's
scenarios (:data:`tether.demo.agents.DEMO`, an agent set like any other) and, when no
``--base-url`` is given, the scripted provider they talk to, served from a child process. It
checks what was asked (the scenarios, the agent file, ``--agent``, the store), makes the
:class:`~tether.tui.state.options.ConsoleOptions` and runs the :class:`~tether.tui.app.TetherApp`.
``tether demo`` is :mod:`tether.tui.cli.demo`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import replace
from typing import Any

from tether.agents.config import Config, ConfigError, find_config, load_config
from tether.demo.agents import DEMO
from tether.demo.provider.server import provider_process
from tether.vocab.state import StateError
from tether.store.protocol import Store
from tether.tui.app import TetherApp
from tether.tui.state.options import ConsoleOptions
from tether.tui.state.text import one_line
from tether.store.spec import is_database, open_store


def run_console(args: Any = None) -> int:
    """Entry point of ``tether`` and ``tether console``; returns the exit code (2: a usage
    error, said on stderr in one line before the console opens)."""
    start = list(getattr(args, "start", None) or [])
    base_url = getattr(args, "base_url", None)
    model = getattr(args, "model", None) or (os.environ.get("LLM_MODEL") if base_url else None)
    if base_url and not model:
        return _usage_error("with --base-url, give --model NAME (or LLM_MODEL)")
    if not base_url:
        unknown = [s for s in start if s not in DEMO.agents()]
        if unknown:
            known = ", ".join(DEMO.agents())
            return _usage_error(f"unknown scenario {unknown[0]!r}; the scripted provider knows: {known}")
    try:
        path = find_config(getattr(args, "config", None))
        config = load_config(path) if path is not None else None
    except ConfigError as exc:
        return _usage_error(str(exc))
    agent = getattr(args, "agent", None)
    if agent:
        problem = _agent_problem(agent, config, base_url)
        if problem:
            return _usage_error(problem)
    spec, runs_dir = getattr(args, "store", None), getattr(args, "runs_dir", None)
    if spec and runs_dir:
        return _usage_error("give --store or --runs-dir, not both")
    spec = spec or (None if runs_dir else os.environ.get("TETHER_STORE") or None)  # as tether.tui.cli.context.store_of
    try:
        store = open_console_store(spec) if spec else None
    except (StateError, OSError, ValueError, ImportError) as exc:
        return _usage_error(str(exc))
    options = ConsoleOptions(runs_dir=getattr(args, "runs_dir", None), workspace=getattr(args, "workspace", None),
                             base_url=base_url, api_key=os.environ.get("LLM_API_KEY") if base_url else None,
                             model=model, start=tuple(start), config=config, agent=agent,
                             stream=False if getattr(args, "no_stream", False) else "auto",
                             operator=getattr(args, "who", None), otlp=getattr(args, "otlp", None), store=store,
                             agent_sets=(DEMO,))
    if base_url:
        return _exit_code(TetherApp(options))
    with contextlib.ExitStack() as stack:
        try:
            url: str | None = stack.enter_context(provider_process())
            notes: tuple[str, ...] = ()
        except (RuntimeError, OSError) as exc:  # no child process: the same provider, in this process
            url, notes = None, (f"the scripted provider runs inside the console ({one_line(exc, 200)}); "
                                "long runs will make the screen slower",)
        return _exit_code(TetherApp(replace(options, provider_url=url, notes=notes)))


def open_console_store(spec: str) -> Store:
    """The store ``spec`` names (a ``postgresql://`` URL or a directory), checked now, so
    that a store the console cannot reach is said before it opens (without the password)."""

    store = open_store(spec)
    if not is_database(spec):
        return store
    try:
        store.check()  # type: ignore[attr-defined]
    except BaseException:
        store.close()
        raise
    return store


def _usage_error(message: str) -> int:
    print(f"tether: error: {one_line(message, 2000)}", file=sys.stderr)
    return 2


def _agent_problem(name: str, config: Config | None, base_url: str | None) -> str | None:
    """Why ``--agent NAME`` cannot be preselected (None: it can): an agent of the agent file
    that builds, or a demo scenario (offered when the console is not at ``--base-url``)."""
    if config is not None and name in config.names:
        try:
            config.agent(name)
        except ConfigError as exc:
            return str(exc)
        return None
    if not base_url and name in DEMO.agents():
        return None
    if config is not None:
        known = f"the agents in {config.path}: {', '.join(config.names) or 'none'}"
    else:
        known = "there is no agent file (./tether.toml, --config FILE or $TETHER_CONFIG)"
    if not base_url:
        known += "; the demo agents: " + ", ".join(DEMO.agents())
    return f"unknown agent {name!r}; {known}"


def _exit_code(app: TetherApp) -> int:
    result = app.run()
    if isinstance(result, int):
        return result
    return app.return_code or 0


COMMANDS = {"console": run_console}
