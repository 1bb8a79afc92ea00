"""``python -m tests.campaign.shim ARGS``: the ``tether`` CLI with crash boundaries armed.

The product's boundaries (:mod:`tether.vocab.faultpoints`) do nothing. This wrapper installs
the campaign's hook before running the CLI:

* ``TETHER_CRASH_AT=k`` makes the process ``os._exit`` (no cleanup, no flush, like a
  SIGKILL) at its k-th boundary; ``TETHER_CRASH_AT=name:k`` at the k-th boundary of that
  name (e.g. ``after_tool:1``), for tests aimed at one gap.
* ``TETHER_BOUNDARY_LOG=FILE`` appends each boundary's name to FILE first, so the
  campaign knows how many boundaries a flow passes (its N) and where a crashed process
  died (the log's last line): a crash between a model reply arriving and its save is the
  one window where resuming asks the model again.
"""

from __future__ import annotations

import os
import sys

from tether.vocab import faultpoints

CRASH_EXIT_CODE = 86


def crash_hook(spec: str, log: str | None = None):
    """The hook ``TETHER_CRASH_AT=spec`` and ``TETHER_BOUNDARY_LOG=log`` describe."""
    name, _, k = spec.rpartition(":")
    crash_at = int(k or 0)
    count = 0

    def hook(boundary: str) -> None:
        nonlocal count
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(boundary + "\n")
        if not crash_at or (name and boundary != name):
            return
        count += 1
        if count == crash_at:
            sys.stderr.write(f"TETHER_CRASH_AT={spec}: crashing at boundary {boundary}\n")
            sys.stderr.flush()
            os._exit(CRASH_EXIT_CODE)

    return hook


def arm() -> None:
    """Install the hook the environment asks for (nothing when it asks for none)."""
    spec, log = os.environ.get("TETHER_CRASH_AT", ""), os.environ.get("TETHER_BOUNDARY_LOG")
    if spec or log:
        faultpoints.install(crash_hook(spec, log))


if __name__ == "__main__":
    arm()
    from tether.tui.cli import main

    sys.exit(main(sys.argv[1:]))
