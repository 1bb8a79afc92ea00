"""``tether stop``: a Stop for a run. On the file store, a run whose process lives here is sent
its Stop with the standard library alone (:func:`tether.store.where.quick_stop`), which is why
it starts in a fraction of ``run``'s time (docs/performance.md, "Cold start"); any other run
takes the full path, through the store and the control channel (:mod:`tether.tui.cli.control`)."""

from __future__ import annotations

import argparse
from typing import Any

from tether.store.operator import operator_name
from tether.store.where import quick_stop
from tether.tui.cli import output

STOPPED = "stopped from the command line"


def stop(args: argparse.Namespace) -> Any:
    """Stop a run: sent at once to a process here that holds it, else through the store (no
    harness, no agent file)."""
    spec, runs_dir = getattr(args, "store", None), getattr(args, "runs_dir", None)
    sent = None
    if not (spec and runs_dir):  # both given: refused on the full path
        sent = quick_stop(spec or runs_dir, args.run_id, args.reason or STOPPED,
                          getattr(args, "who", None) or operator_name())
    if sent is not None and sent.answered:
        ok, words, pending, _ = sent.reply
        return output.emit_words(args, ok, words, pending)
    # lazy: the store, the control channel and an event loop, only when the quick Stop could not settle
    # it (tests/processes/test_cold_start.py, test_stop_of_a_live_run_sends_it_before_the_store_...)
    from tether.tui.cli import control

    return control.stop(args, STOPPED) if sent is None else control.settle(args, sent)


COMMANDS = {"stop": stop}
