"""Runs on disk: one append-only journal per run, so every step costs the same.

Layout of ``<runs_dir>/<run_id>/``:

* ``journal.jsonl``: the run. Two kinds of line: ``{"m": message}`` adds a message to
  the transcript; ``{"commit": header}`` makes everything before it the saved state.
  The header is the run without its transcript (:meth:`RunState.header`), its
  ``message_count``, and, for the list fields that only grow, just the entries added
  since the previous commit. A save is a single ``write`` of its new messages and its
  commit line. Loading keeps the last complete commit; anything after it (a crash
  mid-write leaves at most a torn tail) is cut off before the next write.
* ``trace.jsonl``: the event trace (:mod:`tether.trace`).
* ``ledger.jsonl``: the idempotency ledger of the run's writes (:mod:`tether.ledger`).

The process running a run holds an exclusive ``flock`` on the journal's descriptor,
the one its saves append through: one system call, released by the kernel when the
process ends however it ends, and no lock file to create or clean up.

Rewriting the state each step would make a long run quadratic; here a step writes
its new messages and a header whose size does not grow with the run. A save is one
append to the page cache (microseconds, less than a hop to a worker thread), so it is
made inline; durability against a crashed *process* comes from the single write and
the commit rule, not from fsync (a power cut may lose the last steps, never tear one).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from pathlib import Path
from typing import Any

from tether.state import RunState, StateError

JOURNAL_FILE = "journal.jsonl"
TRACE_FILE = "trace.jsonl"
LEDGER_FILE = "ledger.jsonl"
# Header fields that only grow: a commit carries what was appended since the last one.
GROWING_FIELDS = ("per_turn_prompt_tokens", "estimated_turns")
# Header fields that seldom change: a commit carries them only when they did (a run's
# agent reference is written at creation and when its MCP tools are first listed).
STICKY_FIELDS = ("agent",)


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
        return (self.run_dir(run_id) / JOURNAL_FILE).exists()

    def run_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.parent.name for p in self.root.glob(f"*/{JOURNAL_FILE}"))

    def load(self, run_id: str) -> RunState:
        """Read a run without taking its lock (for listing and showing)."""
        return _read(self.run_dir(run_id) / JOURNAL_FILE)[0]

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

    def create(self, state: RunState) -> None:
        """Save a new run. Its journal appears complete (first commit included) or not at
        all: a crash mid-create leaves nothing to trip over, and of two processes creating
        one id, the second gets "already exists" instead of truncating the first's run.
        Running it is :meth:`open`'s business, like any saved run."""
        directory = self.run_dir(state.run_id)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{JOURNAL_FILE}.{os.getpid()}.new"
        tmp.write_bytes(_commit_bytes(state.messages, _header(state)))
        try:
            os.link(tmp, directory / JOURNAL_FILE)
        except FileExistsError:
            raise StateError(f"run {state.run_id} already exists") from None
        finally:
            tmp.unlink()

    def open(self, run_id: str) -> tuple[RunState, RunHandle]:
        """Lock a run for this process and load it; the second process gets a clear error."""
        directory = self.run_dir(run_id)
        handle = RunHandle(directory, run_id)
        handle.acquire()
        try:
            state, committed_bytes = _read(directory / JOURNAL_FILE)
            handle.attach(state, committed_bytes)
        except BaseException:
            handle.release()
            raise
        return state, handle


class RunHandle:
    """One process's exclusive hold on a run directory, and its saves."""

    def __init__(self, directory: Path, run_id: str) -> None:
        self.directory = directory
        self.run_id = run_id
        self._fd = -1
        self._messages = 0
        self._grown = dict.fromkeys(GROWING_FIELDS, 0)
        self._sticky: dict[str, Any] = {}

    @property
    def trace_path(self) -> Path:
        return self.directory / TRACE_FILE

    @property
    def ledger_path(self) -> Path:
        return self.directory / LEDGER_FILE

    def acquire(self) -> None:
        """Open the journal for appending and lock it; a run someone else holds is refused."""
        path = self.directory / JOURNAL_FILE
        try:
            fd = os.open(path, os.O_WRONLY)
        except FileNotFoundError:
            raise StateError(f"no run {self.run_id} in {self.directory.parent}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StateError(f"run {self.run_id} is already being run by another process "
                             f"(it holds the lock on {path})") from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Closing the descriptor drops the lock."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def attach(self, state: RunState, committed_bytes: int) -> None:
        """Start appending after the last commit, cutting off anything a crash left past it."""
        if os.fstat(self._fd).st_size != committed_bytes:
            os.ftruncate(self._fd, committed_bytes)
        os.lseek(self._fd, committed_bytes, os.SEEK_SET)
        self._messages = len(state.messages) if committed_bytes else 0
        self._grown = {f: len(getattr(state, f)) if committed_bytes else 0 for f in GROWING_FIELDS}
        self._sticky = {f: state.header()[f] for f in STICKY_FIELDS} if committed_bytes else {}

    def save(self, state: RunState) -> None:
        """Commit the state: its new messages and a header, in one write."""
        header = _header(state, since=self._grown)
        sticky = {f: header[f] for f in STICKY_FIELDS}
        for name in STICKY_FIELDS:
            if name in self._sticky and self._sticky[name] == header[name]:
                del header[name]
        data = _commit_bytes(state.messages[self._messages:], header)
        start = os.lseek(self._fd, 0, os.SEEK_CUR)
        try:
            self._append(data)
        except OSError as exc:
            # Cut back to the last commit, so the next save does not follow a torn line.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
                os.lseek(self._fd, start, os.SEEK_SET)
            raise SaveError(f"could not save run {self.run_id}: {exc.strerror or exc}") from exc
        self._messages = len(state.messages)
        self._grown = {f: len(getattr(state, f)) for f in GROWING_FIELDS}
        self._sticky = sticky

    def _append(self, data: bytes) -> None:
        written = os.write(self._fd, data)
        if written != len(data):
            raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")

    def compact(self, state: RunState) -> None:
        """Rewrite the journal as the state alone (one commit), atomically. The new file is
        locked before it replaces the old one, so the run is never unheld in between."""
        tmp = self.directory / f".{JOURNAL_FILE}.{os.getpid()}.tmp"
        data = _commit_bytes(state.messages, _header(state))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a file no one else knows yet
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, "short write while compacting")
            os.replace(tmp, self.directory / JOURNAL_FILE)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        os.close(self._fd)
        self._fd = fd
        self.attach(state, len(data))


def _header(state: RunState, since: dict[str, int] | None = None) -> dict[str, Any]:
    return {**state.header(since), "message_count": len(state.messages)}


def _commit_bytes(messages: list[dict[str, Any]], header: dict[str, Any]) -> bytes:
    """Journal lines for ``messages`` followed by the commit of ``header``."""
    lines = [_dumps({"m": m}) for m in messages]
    lines.append(_dumps({"commit": header}))
    return ("\n".join(lines) + "\n").encode()


def _read(path: Path) -> tuple[RunState, int]:
    """Replay a journal up to its last complete commit; return the state and where it ends."""
    messages: list[dict[str, Any]] = []
    uncommitted: list[dict[str, Any]] = []
    grown: dict[str, list[Any]] = {f: [] for f in GROWING_FIELDS}
    header: dict[str, Any] | None = None
    sticky: dict[str, Any] = {}
    committed_bytes = offset = 0
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise StateError(f"no saved run at {path}") from None
    with f:
        for number, line in enumerate(f, 1):
            offset += len(line)
            if not line.endswith(b"\n"):
                break  # a torn tail: the write a crash interrupted
            try:
                record = json.loads(line)
                if "m" in record:
                    uncommitted.append(record["m"])
                    continue
                header = dict(record["commit"])
                for name in GROWING_FIELDS:
                    grown[name].extend(header.pop(name, ()))
                for name in STICKY_FIELDS:
                    if name in header:
                        sticky[name] = header[name]
                    elif name in sticky:
                        header[name] = sticky[name]
            except (ValueError, TypeError, KeyError) as exc:
                raise StateError(f"corrupt journal {path} at line {number}: {exc}") from None
            messages.extend(uncommitted)
            uncommitted.clear()
            committed_bytes = offset
            if header.get("message_count") != len(messages):
                raise StateError(f"corrupt journal {path} at line {number}: "
                                 f"{len(messages)} messages, the commit says {header.get('message_count')}")
    if header is None:
        raise StateError(f"corrupt journal {path}: no committed state")
    del header["message_count"]
    return RunState.from_dict({**header, **grown, "messages": messages}), committed_bytes
