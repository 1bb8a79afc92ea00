"""Who acts on a run, and how long a request waits for its answer: what every requester
needs, kept apart from :mod:`tether.store.control` (whose dataclasses cost a command's start
a dataclass import) so that ``tether stop`` can send a Stop with these and the standard
library alone (:mod:`tether.store.files.quickstop`)."""

from __future__ import annotations

import getpass
import os
import socket

DELIVERY_TIMEOUT_S = 10.0
"""How long a requester waits for the run's process to answer before saying it did not."""


def operator_name() -> str:
    """Who is acting, when no ``--as NAME`` says otherwise: user@host."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"
