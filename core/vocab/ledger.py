"""The idempotency ledger: what each write call meant to do, and whether it did.

A write tool records its *intent* under the call's key (``run_id:call_id``) before the
side effect and the *result* after it. On a retry the key settles what to do: ``done``
means return the recorded result and touch nothing; ``begun`` means the process died
between the side effect and its record, so the tool checks the world and finishes the
entry. That is how one call never performs a write twice, even across a crash.

The file is JSONL, one record per line, each appended with a single ``write`` on an
``O_APPEND`` descriptor. A crash can leave only the last line torn; reading skips a
line that does not parse, and the next append first ends the torn line so the new
record is never glued onto it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Status = Literal["begun", "done"]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    key: str
    status: Status
    intent: dict[str, Any]
    result: str | None = None


class Ledger:
    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync

    def begin(self, key: str, intent: dict[str, Any]) -> None:
        """Record what the call is about to do. Call before the side effect."""
        self._append({"key": key, "status": "begun", "intent": intent})

    def complete(self, key: str, result: str) -> None:
        """Record that the side effect happened and what the model was told."""
        self._append({"key": key, "status": "done", "result": result})

    def lookup(self, key: str) -> LedgerEntry | None:
        """The latest state of ``key``, or None if no write was ever begun under it."""
        entry: LedgerEntry | None = None
        for record in self._records():
            if record.get("key") != key:
                continue
            if record.get("status") == "begun":
                entry = LedgerEntry(key, "begun", dict(record.get("intent") or {}))
            elif record.get("status") == "done":
                intent = entry.intent if entry else {}
                entry = LedgerEntry(key, "done", intent, str(record.get("result", "")))
        return entry

    # The same, for tools on an event loop: a store that blocks does its I/O off the loop;
    # this one appends to a local file, inline.
    async def abegin(self, key: str, intent: dict[str, Any]) -> None:
        self.begin(key, intent)

    async def acomplete(self, key: str, result: str) -> None:
        self.complete(key, result)

    async def alookup(self, key: str) -> LedgerEntry | None:
        return self.lookup(key)

    def _records(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        records: list[dict[str, Any]] = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:  # a torn write: its side effect is settled from "begun"
                continue
            if isinstance(record, dict):
                records.append(record)
        return records

    def _append(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the run's folder, as the store makes it
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            os.write(fd, data)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
