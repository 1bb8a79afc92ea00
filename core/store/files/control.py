"""The file store's control channel: each run's requests in its ``control.jsonl``.

A request (:class:`tether.store.control.ControlRequest`) is appended to the run's file before
its owner is poked (:mod:`tether.store.unix`), so it is never lost: a request for a run whose
process died is there when the run is adopted. Each is one line, written in one ``write``
with ``O_APPEND``, so concurrent requesters never interleave; a reader takes the complete
lines only, and counts an unreadable one (so the count of handled requests stays right).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.store.private import open_private
from tether.store.files.layout import CONTROL_FILE

if TYPE_CHECKING:
    from tether.store.control import ControlRequest


def append(run_dir: Path, request: ControlRequest) -> None:
    """Append ``request`` in one write (O_APPEND: concurrent requesters never interleave)."""
    from dataclasses import asdict

    append_fields(run_dir, asdict(request))


def append_fields(run_dir: Path, fields: dict[str, Any]) -> None:
    """Append a request given as its fields (as :func:`append` saves one), creating the file
    of the store's mode (private, or its group's in a shared store): what ``tether stop``
    writes before the request's dataclass is imported."""
    data = (json.dumps(fields, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    fd = open_private(run_dir / CONTROL_FILE, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_from(run_dir: Path, seen: int) -> list[ControlRequest]:
    """The requests after the first ``seen`` (complete, parseable lines only)."""
    from tether.store.control import ControlRequest

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
