"""Who acts on a run, and how long a request waits for its answer: what every requester
needs, kept apart from :mod:`tether.store.control` (whose dataclasses cost a command's start
a dataclass import) so that ``tether stop`` can send a Stop with these and the standard
library alone (:mod:`tether.store.files.quickstop`)."""

from __future__ import annotations

import getpass
import os
import pwd
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tether.vocab.state import RunState

DELIVERY_TIMEOUT_S = 10.0
"""How long a requester waits for the run's process to answer before saying it did not."""


def operator_name() -> str:
    """Who is acting, when no ``--as NAME`` says otherwise: user@host."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def os_account() -> str:
    """The operating system's account this process runs as, read from its user id (never
    from ``$USER`` or ``$LOGNAME``, which anyone may set): who a decision on the file store
    is (:mod:`tether.vocab.people`)."""
    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a user id with no name (a container's): the id itself is the account
        return f"uid {uid}"


def mark_starter(state: RunState, account: str) -> None:
    """Who starts a new run, written into it by the store's ``create``: ``account`` (the
    store's :meth:`~tether.store.protocol.Store.account`) unless its maker named one, and the
    name beside it (``--as NAME``; by default user@host). ``tether costs --by operator``
    groups by the account: one account is one person, whatever name it gives."""
    if state.operator is None:
        state.operator = account
    if state.operator_name is None:
        state.operator_name = operator_name()
