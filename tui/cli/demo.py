"""``tether demo``: an autopilot tour of the console (:mod:`tether.tui.cli.tour`) on the
scripted provider; with ``--acp``, four real coding agents under it; with ``--merge``, the
tour of contained runs (:mod:`tether.tui.cli.demo_merge`).

A command of the CLI, so it may know the demo, which the console does not: it gives the
console the demo's scenarios (:data:`tether.demo.agents.DEMO`) and serves their provider.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Any

from tether.agents.config import load_config
from tether.demo.acp import TASKS, missing, seed_workspace, write_agent_file
from tether.demo.acp_agents import missing_new
from tether.demo.agents import DEMO
from tether.demo.provider.coding import endpoint_process
from tether.demo.provider.server import provider_process
from tether.tui.app import TetherApp
from tether.tui.cli.demo_merge import run_merge_demo
from tether.tui.cli.tour import ACP_AGENTS, AcpTour, Tour
from tether.tui.state.options import ConsoleOptions


def run_demo(args: Any) -> int:
    """``tether demo`` (``args`` as the CLI parsed them): the tour on a console of its own,
    over the scripted provider (in a child process, as ``tether`` runs it) and, unless
    ``--runs-dir`` says where, a temporary runs folder, so the tour's runs do not join the
    operator's. With ``--acp``, :class:`AcpTour` (see :func:`run_acp_demo`)."""
    if getattr(args, "acp", False):
        return run_acp_demo(args)
    if getattr(args, "merge", False):
        return run_merge_demo(args)
    tour = Tour(args.pace, stay=args.stay)
    with contextlib.ExitStack() as stack:
        runs_dir, workspace = args.runs_dir, None  # None: the harness's default workspace
        if runs_dir is None:
            home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tether-demo-")))
            runs_dir, workspace = home / "runs", home / "workspace"
        try:
            url: str | None = stack.enter_context(provider_process(latency_ms=args.latency_ms))
        except (RuntimeError, OSError):  # no child process: the same provider, in this process
            url = None
        app = TetherApp(ConsoleOptions(runs_dir=runs_dir, workspace=workspace, provider_url=url,
                                       latency_ms=args.latency_ms, grace_s=0.5, operator="the demo",
                                       agent_sets=(DEMO,)))
        app.run(auto_pilot=tour)
    return app.return_code or 0


def run_acp_demo(args: Any) -> int:
    """``tether demo --acp``: :class:`AcpTour` on a console of its own, the agents at the scripted
    endpoint (a child process), in a small project of a temporary folder. Without the agents,
    one line that says how to get them, and exit 2."""
    why = missing() or missing_new()
    if why is not None:
        print(f"tether demo --acp: {why}", file=sys.stderr)
        return 2
    tour = AcpTour(args.pace, stay=args.stay)
    with contextlib.ExitStack() as stack:
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tether-demo-")))
        workspace = seed_workspace(home / "project")
        url = stack.enter_context(endpoint_process(tasks=TASKS, workspace=workspace))
        config = load_config(write_agent_file(home / "tether.toml", base_url=url, home=home / "agents",
                                              workspace=workspace, agents=ACP_AGENTS))
        app = TetherApp(ConsoleOptions(runs_dir=args.runs_dir or home / "runs", workspace=home / "workspace",
                                       config=config, grace_s=0.5, operator="the demo", agent_sets=(DEMO,)))
        app.run(auto_pilot=tour)
    return app.return_code or 0


COMMANDS = {"demo": run_demo}
