"""Child processes that end with the test (or bench) process that started them, however it
ends: a SIGKILLed pytest leaves no PostgreSQL server and no queue worker behind.

PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process. A
child (re)started from a short-lived thread (``asyncio.to_thread(server.restart)``: the
loop's executor ends with the test) would be signalled under the next test. So every such
child is forked by one thread, which lives as long as the process.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import signal
import subprocess
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1
_LAUNCHER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="child-launcher")


def dying_with_parent(sig: signal.Signals) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets ``sig`` when its parent ends."""
    def arm() -> None:  # in the child, before exec
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    return arm


def launch(args: list[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(args, **kwargs)`` from the one long-lived launching thread."""
    return _LAUNCHER.submit(subprocess.Popen, args, **kwargs).result()
