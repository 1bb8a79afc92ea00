"""The poke that needs no event loop: a run's process told over its Unix socket that a
request waits for it (:mod:`tether.store.unix` is the socket's server and the async poke).
It uses the standard library alone: ``tether stop`` pokes with it before any event loop or
the store's dataclasses are imported (:mod:`tether.store.files.quickstop`)."""

from __future__ import annotations

import json
import socket
import time

from tether.store.operator import DELIVERY_TIMEOUT_S

MAX_LINE = 64 * 1024
"""The longest poke or answer read: longer is answered as malformed."""
Fields = tuple[bool, str, bool, bool]
"""A reply's ``ok``, ``words``, ``pending`` and ``gone`` (:class:`tether.store.control.ControlReply`)."""


def poke_line(run_id: str, request_id: str) -> bytes:
    return (json.dumps({"run_id": run_id, "request_id": request_id}) + "\n").encode()


def reply_fields(line: bytes) -> Fields | None:
    """The owner's answer, or None for one that is not a reply."""
    try:
        data = json.loads(line)
        return bool(data["ok"]), str(data["words"]), bool(data.get("pending")), bool(data.get("gone"))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def poke(address: str, run_id: str, request_id: str, timeout_s: float = DELIVERY_TIMEOUT_S) -> Fields | None:
    """:func:`tether.store.unix.deliver` without an event loop, for a command that has none yet (``tether stop``):
    the answer's fields, or None as there."""
    deadline = time.monotonic() + timeout_s  # in all, as deliver's: not per call
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as sock:
            sock.settimeout(timeout_s)
            sock.connect(address)
            sock.sendall(poke_line(run_id, request_id))
            line = b""
            while not line.endswith(b"\n") and len(line) <= MAX_LINE:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError  # an OSError: handled below as no answer
                sock.settimeout(left)
                chunk = sock.recv(4096)
                if not chunk:
                    break
                line += chunk
    except OSError:  # nobody listens there (it died), or no answer in time (socket.timeout is an OSError)
        return None
    return reply_fields(line)
