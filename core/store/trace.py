"""The JSONL trace: one event per line, ``seq`` increasing across every process.

Each event is written the moment it is emitted, as one ``write`` on an append-only
descriptor: a process killed mid-run leaves every event it emitted, and at worst a
torn last line, which the next writer cuts off before appending. ``seq`` resumes
from the last complete line, so a run that spans three processes reads as one.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.vocab.records import field_names

if TYPE_CHECKING:
    from tether.vocab.events import Event

_TAIL_BYTES = 64 * 1024


class TraceWriter:
    def __init__(self, path: Path, secrets: tuple[str, ...] = ()) -> None:
        self.path = path
        self._secrets = tuple(s for s in secrets if s)
        self._seq = _recover_tail(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # transcripts are private

    @property
    def last_seq(self) -> int:
        return self._seq

    def write(self, event: Event) -> None:
        self._seq += 1
        os.write(self._fd, (stamped_line(event, self._seq, self._secrets) + "\n").encode())

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def stamped_line(event: Event, seq: int, secrets: tuple[str, ...]) -> str:
    """Give ``event`` its ``seq`` and the time, and encode it as one trace line with the
    ``secrets`` redacted: what every store's trace writer records."""
    event.seq = seq
    event.ts = time.time()
    # ASCII-only: U+2028, U+2029 and NEL inside a string would split the line for readers
    # that honour Unicode line breaks.
    line = json.dumps(event.record(), separators=(",", ":"), default=str)
    for secret in secrets:
        if secret in line:
            line = line.replace(secret, "[redacted]")
    return line


def _recover_tail(path: Path) -> int:
    """Last complete line's seq; a torn last line is truncated away."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(path, "r+b") as f:
        start = max(0, size - _TAIL_BYTES)
        f.seek(start)
        tail = f.read()
        if not tail.endswith(b"\n"):
            cut = tail.rfind(b"\n")
            while cut < 0 and start > 0:  # a torn line longer than the window: its start is further back
                step = min(start, _TAIL_BYTES)
                start -= step
                f.seek(start)
                tail = f.read(step) + tail
                cut = tail.rfind(b"\n", 0, step)
            keep = start + cut + 1 if cut >= 0 else start
            f.truncate(keep)
            tail = tail[: cut + 1] if cut >= 0 else b""
        for line in reversed(tail.splitlines()):
            try:
                seq = _seq(json.loads(line))
            except (ValueError, RecursionError):  # RecursionError: nested too deep for json
                continue
            if seq is not None:
                return seq
    # A tail with no readable line: fall back to reading the whole file.
    return max((seq for r in read_trace(path) if (seq := _seq(r)) is not None), default=0)


def _seq(record: Any) -> int | None:
    """A record's ``seq`` as an int, or None when it has none that is a finite number."""
    try:
        return int(record["seq"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return None


def read_trace(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete, parseable line of a trace (a torn last line is skipped)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        for line in f:
            if not line.endswith(b"\n"):
                return
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(record, dict):
                yield record


# ---- reading a trace file back ------------------------------------------------------

def tail_records(path: Path, limit: int = 1000, max_bytes: int = 512 * 1024) -> list[dict[str, Any]]:
    """The last ``limit`` complete records of a trace file, reading at most ``max_bytes``."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            start = max(0, size - max_bytes)
            f.seek(start)
            data = f.read()
    except OSError:
        return []
    lines = data.split(b"\n")
    if start:
        lines = lines[1:]  # the first line may be cut
    return list(deque(dict_lines(lines), maxlen=limit))


def dict_lines(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The lines that parse as JSON objects (blank, torn and foreign lines are skipped)."""
    for line in lines:
        if not line:
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested too deep for json
            continue
        if isinstance(record, dict):
            yield record


# ---- records back into events ------------------------------------------------------

_CLASSES: dict[str, type[Event]] = {}


def _event_classes() -> dict[str, type[Event]]:
    # lazy: the events' thirty dataclasses are the largest import a listing would make (tether
    # decisions: test_cold_start), and a listing writes no event and reads none back as an object
    from tether.vocab.events import Event

    found: dict[str, type[Event]] = {}
    todo = list(Event.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        found.setdefault(cls.kind, cls)
    return found


def event_from_record(record: dict[str, Any]) -> Event | None:
    """The event a trace record was written from: the class of its ``kind`` with the
    fields it has (extra keys ignored). None for an unknown kind or a record that lacks a
    field the class needs."""
    kind = record.get("kind")
    if not isinstance(kind, str):
        return None
    cls = _CLASSES.get(kind)
    if cls is None:
        _CLASSES.update(_event_classes())  # classes defined since the last look
        cls = _CLASSES.get(kind)
        if cls is None:
            return None
    try:
        return cls(**{name: record[name] for name in field_names(cls) if name in record})
    except TypeError:
        return None
