"""The file store's :class:`tether.store.feed.StoreFeed`: inotify, and tails of the journals
and traces (:mod:`tether.store.feed` says what a feed is)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.store.feed import Listing
from tether.store.files.layout import JOURNAL_FILE, TRACE_FILE
from tether.store.files.tail import JournalTail, TraceTail
from tether.store.files.watch import RunWatcher

if TYPE_CHECKING:
    from tether.store.owner import Owner
    from tether.store.protocol import Store
    from tether.store.summary import RunSummary
    from tether.vocab.state import RunState


class FileFeed:
    """The file store: inotify, and tails of the journals and traces (see the module)."""

    blocking = False

    def __init__(self, store: Store, root: Path) -> None:
        self.store = store
        self.root = root
        self.where = str(root)
        self.journals: dict[str, JournalTail] = {}
        self.traces: dict[str, TraceTail] = {}
        self.trace_sizes: dict[str, int] = {}  # each listed run's trace size when listed

    def listing(self) -> Listing:
        problems: dict[str, str] = {}
        summaries = self.store.summaries(problems=problems)
        root = self.root
        for summary in summaries:
            try:
                size = os.stat(root / summary.run_id / TRACE_FILE).st_size
            except OSError:
                size = 0
            self.trace_sizes.setdefault(summary.run_id, size)
        return summaries, problems

    def changes(self) -> RunWatcher:
        return RunWatcher(self.root)

    def follow(self, rid: str) -> RunState | None:
        tail = self.journals.get(rid)
        if tail is None:
            tail = self.journals[rid] = JournalTail(self.root / rid / JOURNAL_FILE)
        return tail.state if tail.read() else None

    def following(self, rid: str) -> bool:
        return rid in self.journals

    def followed(self) -> list[str]:
        return list(self.journals)

    def unfollow(self, rid: str) -> None:
        tail = self.journals.pop(rid, None)
        if tail is not None:
            tail.close()

    def current(self, rid: str) -> RunState:
        tail = self.journals.get(rid)
        if tail is not None and tail.state is not None:
            return tail.state
        return self.store.load(rid)

    def summary(self, rid: str) -> RunSummary:
        return self.store.summary(rid)

    def owner(self, rid: str) -> Owner | None:
        return self.store.owner(rid)

    def owners(self, rids: Iterable[str]) -> dict[str, Owner | None]:
        return {rid: self.store.owner(rid) for rid in rids}

    def new_trace(self, rid: str) -> list[dict[str, Any]]:
        trace = self.traces.get(rid)
        if trace is None:
            trace = self.traces[rid] = TraceTail(self.root / rid / TRACE_FILE,
                                                 offset=self.trace_sizes.get(rid, 0))
        return trace.read()

    def trace_seen(self, rid: str, seq: int) -> None:
        try:
            size = os.stat(self.root / rid / TRACE_FILE).st_size
        except OSError:
            size = 0
        self.traces[rid] = TraceTail(self.root / rid / TRACE_FILE, offset=size)
        self.trace_sizes[rid] = size

    def history(self, rid: str) -> list[dict[str, Any]]:
        return []  # the trace view reads the run's trace file itself (Store.trace_file)

    def close(self) -> None:
        for tail in self.journals.values():
            tail.close()
        self.journals.clear()
