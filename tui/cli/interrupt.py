"""An async command's event loop, and Ctrl+C that reaches it wherever the signal lands.

asyncio.run's own SIGINT handler is a Python handler: it runs when the main thread next runs
Python. When the kernel hands the signal to another thread (asyncio's child watchers,
``to_thread``'s workers) while the loop sleeps in ``select`` until a far timer, nothing runs
it before that timer: ``tether agents`` with an agent that never answers went on for its
whole ``--timeout`` after a Ctrl+C (tests/acp/test_tether_agents.py). The loop's own signal handler writes to its wakeup
pipe from any thread, so the loop wakes and the command is cancelled at once.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any


def run_async(command: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run(command)``; a Ctrl+C cancels it and raises KeyboardInterrupt, and a
    second one raises it at once, as asyncio.run's do."""
    return asyncio.run(_interruptible(command))


async def _interruptible(command: Coroutine[Any, Any, Any]) -> Any:
    """Await ``command`` with SIGINT on the loop's own handler. A command that handles SIGINT
    itself (``watch``, ``serve``, ``notify``) puts its handler over this one."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    interrupted = False

    def interrupt() -> None:
        nonlocal interrupted
        if interrupted:  # a second Ctrl+C: out now, as asyncio.run's second one is
            raise KeyboardInterrupt
        interrupted = True
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
        handled = True
    except (ValueError, RuntimeError):  # not the main thread: main() called from a program's thread
        handled = False
    try:
        return await command
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
