"""``tether console`` (the default command) and ``tether demo``: the full-screen console on
this terminal, the demo as an autopilot tour of it (:mod:`tether.tui.tour`)."""

from __future__ import annotations

import argparse


def console(args: argparse.Namespace) -> int:
    try:
        from tether.tui.launch import run_console
    except ImportError:
        print("tether: the console is not built yet. Commands: "
              "run, resume, approve, reject, runs, show, trace, provider (tether --help)")
        return 0
    return run_console(args)


def demo(args: argparse.Namespace) -> int:
    from tether.tui.tour import run_demo

    return run_demo(args)


COMMANDS = {"console": console, "demo": demo}
