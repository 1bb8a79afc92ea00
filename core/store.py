"""Runs on disk: a directory per run, written so that every step costs the same.

Layout of ``<runs_dir>/<run_id>/``:

* ``state.json``: the run without its transcript (:meth:`RunState.header`) plus
  ``message_count``; replaced atomically (write a temp file, ``os.replace``) after
  every step, so a crash leaves the old header or the new one, never a torn one.
* ``messages.jsonl``: the transcript, one message per line, append-only. Only the
  first ``message_count`` lines are committed; lines past that (a crash between the
  append and the header) are dropped when the run is next opened.
* ``trace.jsonl``: the event trace (:mod:`core.trace`).
* ``ledger.jsonl``: the idempotency ledger of the run's writes (:mod:`core.ledger`).
* ``lock``: held by the one process running the run.

Rewriting the whole transcript each turn would make a long run quadratic; here a
step writes only its new messages and a header whose size does not depend on the
transcript's length.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import filelock

from core.state import RunState, StateError

STATE_FILE = "state.json"
MESSAGES_FILE = "messages.jsonl"
TRACE_FILE = "trace.jsonl"
LEDGER_FILE = "ledger.jsonl"
LOCK_FILE = "lock"


class SaveError(Exception):
    """A save failed (disk full, I/O error). The previous saved state is intact."""


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class RunStore:
    """All runs under one directory."""

    def __init__(self, runs_dir: Path | str) -> None:
        self.root = Path(runs_dir)

    def run_dir(self, run_id: str) -> Path:
        if not run_id or "/" in run_id or run_id in (".", "..") or "\0" in run_id:
            raise StateError(f"invalid run id {run_id!r}")
        return self.root / run_id

    def exists(self, run_id: str) -> bool:
        return (self.run_dir(run_id) / STATE_FILE).exists()

    def run_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.parent.name for p in self.root.glob(f"*/{STATE_FILE}"))

    def load(self, run_id: str) -> RunState:
        """Read a run without taking its lock (for listing and showing)."""
        state, _ = _read(self.run_dir(run_id))
        return state

    def load_all(self) -> tuple[list[RunState], dict[str, str]]:
        """Every readable run, and the reason each unreadable one was skipped."""
        states, problems = [], {}
        for run_id in self.run_ids():
            try:
                states.append(self.load(run_id))
            except StateError as exc:
                problems[run_id] = str(exc)
        states.sort(key=lambda s: s.created_at)
        return states, problems

    def create(self, state: RunState) -> "RunHandle":
        directory = self.run_dir(state.run_id)
        if (directory / STATE_FILE).exists():
            raise StateError(f"run {state.run_id} already exists")
        directory.mkdir(parents=True, exist_ok=True)
        handle = RunHandle(directory, state.run_id, committed=0)
        handle.acquire()
        handle.save_now(state)
        return handle

    def open(self, run_id: str) -> tuple[RunState, "RunHandle"]:
        """Lock a run for this process and load it; the second process gets a clear error."""
        directory = self.run_dir(run_id)
        if not (directory / STATE_FILE).exists():
            raise StateError(f"no run {run_id} in {self.root}")
        handle = RunHandle(directory, run_id, committed=0)
        handle.acquire()
        try:
            state, committed_bytes = _read(directory)
        except BaseException:
            handle.release()
            raise
        handle.adopt(len(state.messages), committed_bytes)
        return state, handle


class RunHandle:
    """One process's exclusive hold on a run directory, and its saves."""

    def __init__(self, directory: Path, run_id: str, committed: int) -> None:
        self.directory = directory
        self.run_id = run_id
        self._committed = committed
        self._lock = filelock.FileLock(str(directory / LOCK_FILE), timeout=0)

    @property
    def trace_path(self) -> Path:
        return self.directory / TRACE_FILE

    @property
    def ledger_path(self) -> Path:
        return self.directory / LEDGER_FILE

    def acquire(self) -> None:
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise StateError(
                f"run {self.run_id} is already being run by another process (lock {self.directory / LOCK_FILE})"
            ) from None

    def release(self) -> None:
        self._lock.release()

    def adopt(self, committed_messages: int, committed_bytes: int) -> None:
        """Drop transcript lines written after the last committed header."""
        self._committed = committed_messages
        path = self.directory / MESSAGES_FILE
        if path.exists() and path.stat().st_size != committed_bytes:
            with open(path, "r+b") as f:
                f.truncate(committed_bytes)

    async def save(self, state: RunState) -> None:
        await asyncio.to_thread(self.save_now, state)

    def save_now(self, state: RunState) -> None:
        """Append new messages, then replace the header; either both land or the old state stands."""
        new = state.messages[self._committed :]
        header = state.header()
        header["message_count"] = len(state.messages)
        tmp = self.directory / f".{STATE_FILE}.{os.getpid()}.tmp"
        try:
            if new:
                with open(self.directory / MESSAGES_FILE, "a", encoding="utf-8") as f:
                    f.write("".join(_dumps(m) + "\n" for m in new))
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(_dumps(header))
            os.replace(tmp, self.directory / STATE_FILE)
        except OSError as exc:
            with suppress(OSError):
                tmp.unlink()
            raise SaveError(f"could not save run {self.run_id}: {exc.strerror or exc}") from exc
        self._committed = len(state.messages)


def _read(directory: Path) -> tuple[RunState, int]:
    """Load a run: the header, then exactly the committed transcript lines."""
    state_path = directory / STATE_FILE
    try:
        raw = state_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StateError(f"no saved state at {state_path}") from None
    try:
        header = json.loads(raw)
        if not isinstance(header, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise StateError(f"corrupt state file {state_path}: {exc}") from None
    count = header.pop("message_count", None)
    if not isinstance(count, int) or count < 0:
        raise StateError(f"corrupt state file {state_path}: message_count missing")
    messages, committed_bytes = _read_messages(directory / MESSAGES_FILE, count)
    state = RunState.from_dict({**header, "messages": messages})
    return state, committed_bytes


def _read_messages(path: Path, count: int) -> tuple[list[dict[str, Any]], int]:
    messages: list[dict[str, Any]] = []
    offset = 0
    if count:
        try:
            with open(path, "rb") as f:
                for line in _lines(f, count):
                    try:
                        messages.append(json.loads(line))
                    except ValueError as exc:
                        raise StateError(f"corrupt transcript {path} at message {len(messages) + 1}: {exc}") from None
                    offset += len(line)
        except FileNotFoundError:
            raise StateError(f"transcript {path} is missing") from None
    if len(messages) != count:
        raise StateError(f"transcript {path} has {len(messages)} of {count} committed messages")
    return messages, offset


def _lines(f: Any, limit: int) -> Iterator[bytes]:
    for n, line in enumerate(f):
        if n >= limit or not line.endswith(b"\n"):
            return
        yield line
