"""The ``tether`` command.

Exit codes: 0 completed, 1 failed, 2 usage error (or a config error), 3 max_turns_exceeded,
4 budget_exceeded, 5 interrupted (an approval, a Stop, a stop condition), 6 interrupted by a
provider outage (``tether resume`` goes on once the endpoint is back).

:func:`main` parses the line (:mod:`tether.tui.cli.parser`, argparse alone), then imports the
one module of the command given, from the table below, and runs it. A command's start-up is
what it imports, so ``tether stop`` does not load the console, the harness, pydantic or aiohttp
(docs/performance.md, "Cold start"; tests/processes/test_cold_start.py holds it to that).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import types
from collections.abc import Sequence

from tether.lazy import without_httpx_cli
from tether.tui.cli.output import Output
from tether.tui.cli.parser import USAGE_ERROR, UsageError, build_parser

without_httpx_cli()  # tests/processes/test_cold_start.py holds every command to it

_MODULES = {
    "console": "console", "demo": "demo",
    "run": "run", "resume": "run",
    "stop": "stop", "approve": "control", "reject": "control",
    "runs": "runs", "show": "runs", "trace": "runs", "watch": "runs", "export-otel": "export",
    "diff": "workspaces", "workspaces": "workspaces", "discard": "workspaces", "merge": "workspaces",
    "checkpoints": "takeback", "rewind": "takeback", "fork": "takeback", "replay": "replay",
    "rules": "rules", "decisions": "decisions",
    "agents": "agents", "prices": "costs", "costs": "costs", "budgets": "costs",
    "provider": "lab", "lab": "lab", "eval": "lab",
    "serve": "serve", "notify": "notify", "acp": "acp_server", "hook": "hook", "worker": "workers",
    "submit": "workers",
}
"""Each command's module in this package: it is imported when that command runs, and holds it
in its ``COMMANDS``."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    named = argv[0] if argv and argv[0] in _MODULES else None  # only its parser is built
    args = build_parser(named).parse_args(argv)
    command = args.command or "console"
    if command in ("console", "demo", "acp", "hook"):  # a full-screen app, or a protocol on stdout
        return _main(args, command)
    stdout = sys.stdout
    sys.stdout = Output(stdout)
    try:
        return _main(args, command)
    finally:
        sys.stdout = stdout


def _main(args: argparse.Namespace, command: str) -> int:
    try:
        module = importlib.import_module(f"tether.tui.cli.{_MODULES[command]}")
        done = module.COMMANDS[command](args)
        if isinstance(done, types.CoroutineType):  # an async command: on an event loop of its own
            # lazy: asyncio, only for an async command: a quick tether stop needs no event loop
            # (tests/processes/test_cold_start.py)
            from tether.tui.cli.interrupt import run_async

            done = run_async(done)
        return done
    except Exception as exc:
        code = _refusal_code(exc)
        if code is None:
            raise
        print(f"tether: error: {exc}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        return 130
    finally:
        close = getattr(getattr(args, "_store", None), "close", None)
        if callable(close):  # a database store's sessions
            close()


def _refusal_code(exc: Exception) -> int | None:
    """The exit code of an error said in one line: 2 for a usage error (or a run in no state
    for the command), 1 for a store that could not save; None for a bug, which is raised.
    The two classes are imported here, when there is an error, so that ``tether stop --help``
    does not import the run's state or the store's protocol (and asyncio with it)."""
    # lazy: on an error alone (tests/processes/test_cold_start.py, the parser of any command)
    from tether.vocab.state import StateError
    from tether.store.protocol import SaveError

    if isinstance(exc, (UsageError, StateError, ValueError)):
        return USAGE_ERROR
    if isinstance(exc, SaveError):
        return 1
    return None
