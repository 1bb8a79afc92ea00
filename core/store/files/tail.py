"""Following a run's files as they grow, reading only what was appended.

A run's journal and trace only grow (:mod:`tether.store.files.journal`, :mod:`tether.store.trace`), so a
reader in another process keeps a byte offset into each and, when told the file changed
(:mod:`tether.store.files.watch`), reads from there: the cost of a read is what was appended, not
the size of the run, and a read of a file that did not grow is one ``fstat``/``stat``.

* :class:`JournalTail` keeps a run's :class:`~tether.vocab.state.RunState` up to date. It
  applies each complete commit exactly as :func:`tether.store.files.journal.read_journal` replays one (the
  header replaced, the growing fields extended, the sticky fields carried forward), so its
  state always equals ``RunStore.load`` of the same bytes. Its offset stays at the end of
  the last commit it applied: messages after it are parsed again on the next read, until
  their commit arrives, so a save caught half-written (or a torn tail a crash left) is
  never half-applied. A journal that was replaced (``RunHandle.compact`` renames a new
  file over it: the descriptor the tail holds then has no links), cut back below the
  offset, or rewritten in place (the bytes before the offset are not the ones the last
  commit ended with, checked when the file grew) is read again from the start.
* :class:`TraceTail` yields the trace records (dicts) appended since its offset;
  :func:`tether.store.trace.event_from_record` turns one back into its
  :class:`~tether.vocab.events.Event`, so a consumer treats another process's events like its own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tether.vocab.state import RunState, StateError
from tether.store.files.journal import GROWING_FIELDS, STICKY_FIELDS
from tether.store.trace import dict_lines

_CHUNK = 1 << 20  # a long backlog is read a MiB at a time
_ANCHOR = 64


class JournalTail:
    """A run's state, kept current by reading only what its journal gained.

    ``read()`` returns whether :attr:`state` changed. :attr:`state` is None until the
    journal exists with a commit. The tail holds the journal open (so a replaced file is
    recognised by its descriptor, not by an inode number that could be reused); use it
    as a context manager, or :meth:`close` it."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.state: RunState | None = None
        self.resets = 0  # how many times the journal was read again from the start
        self._fd = -1
        self._reset()

    def _reset(self) -> None:
        self._offset = 0  # end of the last commit applied
        self._anchor = b""  # the bytes just before the offset, to recognise a journal rewritten in place
        self._scanned = 0  # the file's size when last read (a tail past the offset is read again)
        self._lines = 0  # lines up to the offset, for error messages
        self._messages: list[dict[str, Any]] = []
        self._grown: dict[str, list[Any]] = {f: [] for f in GROWING_FIELDS}
        self._sticky: dict[str, Any] = {}
        self._header: dict[str, Any] | None = None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "JournalTail":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        self.close()
        self._fd = fd
        return True

    def read(self) -> bool:
        """Apply the commits appended since the last read; True when the state changed."""
        if self._fd < 0 and not self._open():
            return False
        st = os.fstat(self._fd)
        restart = False
        if st.st_nlink == 0:  # replaced (compacted) or deleted: follow the name
            if not self._open():
                return False
            st = os.fstat(self._fd)
            restart = True
        elif st.st_size < self._offset:  # cut back below what was applied: read it again
            restart = True
        elif st.st_size == self._scanned and self._scanned == self._offset:
            return False  # did not grow: one fstat
        elif self._anchor and os.pread(self._fd, len(self._anchor), self._offset - len(self._anchor)) != self._anchor:
            restart = True  # rewritten in place: what the last commit ended with is not there
        if restart:
            before = self.state
            self._reset()
            self.resets += 1
        changed = self._consume(st.st_size)
        if restart:
            return self.state != before
        return changed

    def _consume(self, size: int) -> bool:
        applied = False
        pending: list[dict[str, Any]] = []
        position = self._offset
        lines = self._lines
        while position < size:
            data = os.pread(self._fd, min(size - position, _CHUNK), position)
            if not data:
                break
            end = data.rfind(b"\n")
            if end < 0:
                if len(data) < _CHUNK:
                    break  # a torn (or still being written) last line: wait for the rest
                data = _read_line(self._fd, position, size)  # one line longer than a chunk
                if data is None:
                    break
                end = len(data) - 1
            start = 0
            while start <= end:
                stop = data.index(b"\n", start)
                line = data[start:stop]
                start = stop + 1
                lines += 1
                try:
                    record = json.loads(line)
                    if "m" in record:
                        pending.append(record["m"])
                        continue
                    self._apply(record["commit"], pending, lines)
                except (ValueError, TypeError, KeyError, RecursionError) as exc:  # as tether.store._read
                    self._broken()
                    raise StateError(f"corrupt journal {self.path} at line {lines}: {exc}") from None
                pending = []
                applied = True
                self._offset = position + start
                self._lines = lines
            position += end + 1
        self._scanned = size
        if applied:
            self._anchor = os.pread(self._fd, min(self._offset, _ANCHOR), self._offset - min(self._offset, _ANCHOR))
            self._publish()
        return applied

    def _apply(self, commit: dict[str, Any], pending: list[dict[str, Any]], line: int) -> None:
        header = dict(commit)
        for name in GROWING_FIELDS:
            self._grown[name].extend(header.pop(name, ()))
        for name in STICKY_FIELDS:
            if name in header:
                self._sticky[name] = header[name]
            elif name in self._sticky:
                header[name] = self._sticky[name]
        self._messages.extend(pending)
        if header.get("message_count") != len(self._messages):
            count = header.get("message_count")
            self._broken()
            raise StateError(f"corrupt journal {self.path} at line {line}: "
                             f"{len(self._messages)} messages, the commit says {count}")
        self._header = header

    def _publish(self) -> None:
        assert self._header is not None
        header = {k: v for k, v in self._header.items() if k != "message_count"}
        grown = {name: list(values) for name, values in self._grown.items()}
        try:
            self.state = RunState.from_dict({**header, **grown, "messages": list(self._messages)})
        except StateError:
            self._broken()
            raise

    def _broken(self) -> None:
        """After an error the next read starts over (it raises again unless the file was fixed)."""
        self._reset()


def _read_line(fd: int, position: int, size: int) -> bytes | None:
    """The complete line starting at ``position`` (with its newline), or None if torn."""
    parts = []
    while position < size:
        data = os.pread(fd, min(size - position, _CHUNK), position)
        if not data:
            return None
        end = data.find(b"\n")
        if end >= 0:
            parts.append(data[: end + 1])
            return b"".join(parts)
        parts.append(data)
        position += len(data)
    return None


class TraceTail:
    """The records appended to a trace since the last read.

    The trace is only appended to (a torn last line is cut off by the next writer, never
    below a complete line), so the offset stays at the end of the last complete line. A
    file that shrank below it or was replaced is read again from the start, skipping the
    records already returned (by ``seq``)."""

    def __init__(self, path: Path | str, *, offset: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset
        self.last_seq = 0
        self._ino: tuple[int, int] | None = None

    def read(self) -> list[dict[str, Any]]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        ino = (st.st_dev, st.st_ino)
        if (self._ino is not None and ino != self._ino) or st.st_size < self.offset:
            self.offset = 0
        self._ino = ino
        if st.st_size <= self.offset:
            return []
        out: list[dict[str, Any]] = []
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                carry = b""
                while True:
                    data = f.read(_CHUNK)
                    if not data:
                        break
                    data = carry + data
                    end = data.rfind(b"\n")
                    if end < 0:
                        carry = data
                        continue
                    self._parse(data[: end + 1], out)
                    self.offset += end + 1
                    carry = data[end + 1:]
        except FileNotFoundError:
            return out
        return out

    def _parse(self, data: bytes, out: list[dict[str, Any]]) -> None:
        for record in dict_lines(data.split(b"\n")):
            seq = record.get("seq")
            if isinstance(seq, int):
                if seq <= self.last_seq:
                    continue  # already returned (the file was read again from the start)
                self.last_seq = seq
            out.append(record)

    def backlog(self, limit: int = 20, max_bytes: int = 1 << 20) -> list[dict[str, Any]]:
        """The last ``limit`` complete records, reading at most ``max_bytes`` from the end;
        the tail then follows from the end of the last complete line."""
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                size = st.st_size
                want = 8 * 1024
                while True:
                    start = max(0, size - min(want, max_bytes))
                    f.seek(start)
                    data = f.read(size - start)
                    end = data.rfind(b"\n")
                    complete = data[: end + 1]
                    lines = complete.split(b"\n")[:-1]
                    if start:
                        lines = lines[1:]  # the first line may be cut
                    if len(lines) >= limit or start == 0 or want >= max_bytes:
                        break
                    want *= 4
        except FileNotFoundError:
            return []
        self._ino = (st.st_dev, st.st_ino)
        self.offset = start + end + 1
        out = list(dict_lines(lines[-limit:] if limit > 0 else ()))
        for line in reversed(lines):  # what follows is new: anything up to the last seq was seen
            try:
                seq = json.loads(line).get("seq")
            except (ValueError, AttributeError, RecursionError):
                continue
            if isinstance(seq, int):
                self.last_seq = max(self.last_seq, seq)
                break
        return out
