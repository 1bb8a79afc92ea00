"""``tether stop`` without the store: a Stop sent to a run's live process as soon as the
interpreter is up.

A Stop is worth most early, so the command's start-up is part of how fast it works. The full
path (:func:`tether.store.operate.request`) opens the store, replays the run's journal and
starts an event loop before the request leaves, and those imports are most of the command's
time (docs/performance.md, "Cold start"). When the run's process is alive on this host (it
holds the journal's lock, and its ``owner.json`` names its control socket), the full path
would append the request and poke the socket without looking at anything else; this module
does exactly that with the standard library alone: :func:`append_fields` and
:func:`tether.store.poke.poke`. Every other case (no such run, a run that has stopped, an
orphan, a store that is not this one) is left to the full path, which says what is the
matter in words.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

from tether.store.files.layout import CONTROL_FILE, JOURNAL_FILE, run_id_problem
from tether.store.files.lock import lock_held, owner_record
from tether.store.operator import DELIVERY_TIMEOUT_S
from tether.store.private import open_private
from tether.store.poke import Fields, poke


class Sent(NamedTuple):
    """A Stop appended to the run's channel, and the owner's answer to the poke (a tuple:
    importing the dataclass machinery is a large part of a command's start)."""

    request: dict[str, Any]
    """The request's fields, as :class:`tether.store.control.ControlRequest` saves them."""
    owner: dict[str, Any]
    """The run's ``owner.json`` when it was sent (:func:`tether.store.files.lock.owner_record`)."""
    reply: Fields | None
    """The owner's answer (ok, words, pending, gone), or None: it did not answer."""

    @property
    def answered(self) -> bool:
        """The process answered for the run; otherwise it let go of the run or did not answer,
        and what the run is now is for the full path to say."""
        return self.reply is not None and not self.reply[3]


def stop_request(reason: str, by: str) -> dict[str, Any]:
    """A Stop's fields, as :class:`tether.store.control.ControlRequest` has them (its id the
    same twelve hex digits)."""
    return {"kind": "stop", "text": reason, "call_id": None, "by": by, "id": os.urandom(6).hex(), "ts": time.time(),
            "option": None, "silent": False, "args": None, "rule": None, "scope": None, "account": None,
            "unchecked": False}


def stop_live(root: Path, run_id: str, reason: str, by: str, timeout_s: float = DELIVERY_TIMEOUT_S) -> Sent | None:
    """Send a Stop to the process that holds ``run_id`` in the file store at ``root``: None,
    with nothing written, unless a live process on this host holds it and listens."""
    if run_id_problem(run_id) is not None:
        return None  # the full path refuses it in words
    directory = root / run_id
    try:
        if not lock_held(directory / JOURNAL_FILE):
            return None
        owner = owner_record(directory)
    except OSError:
        return None
    address = owner.get("control") if owner is not None else None
    if not (isinstance(address, str) and address.startswith("\0")):  # not a socket on this host
        return None
    request = stop_request(reason, by)
    append_fields(directory, request)
    return Sent(request, owner, poke(address, run_id, request["id"], timeout_s))


def append_fields(run_dir: Path, fields: dict[str, Any]) -> None:
    """Append a request to the run's ``control.jsonl`` given as its fields (as
    :func:`tether.store.files.control.append` saves one), creating the file of the store's
    mode (private, or its group's in a shared store): what ``tether stop`` writes before the
    request's dataclass is imported."""
    data = (json.dumps(fields, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    fd = open_private(run_dir / CONTROL_FILE, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
