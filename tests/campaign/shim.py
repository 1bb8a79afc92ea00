"""``python -m tests.campaign.shim ARGS``: the ``tether`` CLI with every fault boundary logged.

The crash campaign must know which boundaries a process passes (to find N, and to tell
whether a crash fell between a model reply arriving and its save, the one window where
resuming re-asks the model). ``tether.faultpoints`` keeps no such log, so this wrapper
appends each boundary's name to ``$TETHER_BOUNDARY_LOG`` before the real hook runs;
the log's last line is therefore the boundary a crashed process died at.
"""

from __future__ import annotations

import os
import sys

from tether import faultpoints

_LOG = os.environ.get("TETHER_BOUNDARY_LOG")
_hook = faultpoints.boundary


def _logged(name: str) -> None:
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as f:
            f.write(name + "\n")
    _hook(name)


faultpoints.boundary = _logged

if __name__ == "__main__":
    from tether.cli import main

    sys.exit(main(sys.argv[1:]))
