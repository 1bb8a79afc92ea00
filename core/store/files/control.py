"""The file store's control channel: each run's requests in its ``control.jsonl``.

A request (:class:`tether.store.control.ControlRequest`) is appended to the run's file before
its owner is poked (:mod:`tether.store.unix`), so it is never lost: a request for a run whose
process died is there when the run is adopted. Each is one line, written in one ``write``
with ``O_APPEND``, so concurrent requesters never interleave; a reader takes the complete
lines only, and counts an unreadable one (so the count of handled requests stays right).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from tether.store.control import ControlRequest
from tether.store.files.layout import CONTROL_FILE
from tether.store.files.quickstop import append_fields


def append(run_dir: Path, request: ControlRequest) -> None:
    """Append ``request`` in one write (O_APPEND: concurrent requesters never interleave)."""
    append_fields(run_dir, asdict(request))


def read_from(run_dir: Path, seen: int) -> list[ControlRequest]:
    """The requests after the first ``seen`` (complete, parseable lines only)."""
    try:
        raw = (run_dir / CONTROL_FILE).read_bytes()
    except FileNotFoundError:
        return []
    out: list[ControlRequest] = []
    for line in raw.split(b"\n")[:-1][seen:]:  # the part after the last newline is still being written
        try:
            out.append(ControlRequest.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nested too deep for json
            out.append(ControlRequest(kind="stop", text="", id="unreadable", by="?"))  # keeps the count right
    return out
