"""The scripted provider on loopback, with a request counter per campaign cell.

The provider keeps no count of the requests it answers, and the crash campaign needs
one per crash point to show that no model turn was paid twice. Each cell talks to its
own path prefix (``http://127.0.0.1:PORT/<tag>/v1``); the middleware counts the POSTs
under that tag and strips the prefix, so one server serves every cell of a parallel
campaign, and ``tether resume`` finds the same prefix in the run's saved base URL.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import uvicorn

Scope = dict[str, Any]


class CountingApp:
    """ASGI middleware: ``/<tag>/v1/...`` → ``/v1/...``, counting POSTs per tag."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            tag, _, rest = scope["path"].lstrip("/").partition("/")
            if rest.startswith("v1"):
                if scope["method"] == "POST":
                    with self._lock:
                        self.requests[tag] += 1
                scope = {**scope, "path": "/" + rest, "raw_path": ("/" + rest).encode()}
        await self.app(scope, receive, send)


@contextlib.contextmanager
def serving(app: Any, startup_cap_s: float = 30.0) -> Iterator[str]:
    """Serve ``app`` on a free loopback port from a thread; yield ``http://127.0.0.1:PORT``.

    A thread, not the caller's event loop, because the campaign driver blocks on
    subprocesses. The server always stops on exit (uvicorn leaves signals alone off the
    main thread, so Ctrl+C still reaches the driver).
    """
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="campaign-provider", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + startup_cap_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the campaign provider did not start listening")
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
