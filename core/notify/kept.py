"""The words both notification storages keep (:mod:`tether.notify.storage` for the file
store, :mod:`tether.notify.pg_storage` for PostgreSQL): a spent link, a ledger state, and who
holds the sender's lease."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

Sent = str  # a ledger state: "sending" (intent recorded), "sent", "failed" (given up)


@dataclass(frozen=True, slots=True)
class Spent:
    """A link already used: when, and by whom when it was said."""

    at: float
    by: str | None


def whoami() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()}"
