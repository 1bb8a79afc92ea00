"""What a command prints: its standard output (which its reader may close) and a control
request's reply, each with the exit code it means."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from tether.vocab.text import clean
from tether.tui.cli.parser import USAGE_ERROR


class Output:
    """Standard output that its reader may close (``tether show ID | head -1``).

    A closed pipe ends the output quietly and the command goes on to its own status:
    a ``tether resume`` whose run completed still exits 0 after ``head`` has read enough,
    and a run is never cut short because nobody reads its summary. File descriptor 1 is
    pointed at /dev/null then, so that Python's flush at exit does not fail on it again.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.closed_by_reader = False
        self.on_close: list[Callable[[], None]] = []

    def write(self, text: str) -> int:
        if not self.closed_by_reader:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self.closed_by_reader = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        for callback in self.on_close:
            callback()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def emit_reply(args: argparse.Namespace, reply: Any) -> int:
    """A control request's answer in words; exit 0 when it was done, 1 when it is recorded for
    when the run is adopted, 2 when nothing could be done (and nothing changed)."""
    return emit_words(args, reply.ok, reply.words, reply.pending)


def emit_words(args: argparse.Namespace, ok: bool, words: str, pending: bool) -> int:
    """:func:`emit_reply`, given the reply's fields."""
    if getattr(args, "json", False):
        print(json.dumps({"ok": ok, "pending": pending, "words": words}))
    else:
        print(clean(words), file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1 if pending else USAGE_ERROR
