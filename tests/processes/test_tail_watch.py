"""Following runs from outside the process that runs them: incremental readers of the
journal and the trace, the store watcher (inotify, pushed), and ``tether watch``.

No timing assertions: every wait is bounded by a generous cap that fails the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from dataclasses import fields
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest

from tether.vocab import events as ev
from tether.vocab.events import Event
from tether.harness import Harness
from tether.vocab.state import RunState, Status
from tether.store.files.layout import JOURNAL_FILE, TRACE_FILE
from tether.store.files.store import RunStore
from tether.store.files.tail import JournalTail, TraceTail
from tether.store.trace import event_from_record
from tether.store.trace import TraceWriter
from tether.store.changes import JOURNAL, NEW, REMOVED, TRACE, RunChange
from tether.store.files.watch import follow_run, watch_runs
from tether.vocab.wording import format_record

from tests.support import place, wait_until

CAP_S = 60.0


def tether_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "tether.tui.cli", *args]


def stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


class Lines:
    """A subprocess's output, line by line, as it comes (read on a thread)."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream) -> None:
        for line in stream:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait_for(self, predicate, what: str, cap_s: float = CAP_S) -> str:
        deadline = time.monotonic() + cap_s
        with self._cond:
            while True:
                for line in self.lines:
                    if predicate(line):
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"gave up waiting for {what}; got {self.lines}")
                self._cond.wait(remaining)

    def finish(self) -> list[str]:
        self._thread.join(CAP_S)
        return self.lines


def os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


async def threads_back_to(baseline: int) -> None:
    """The watcher's threads (its worker, and notify's) end once it is closed."""
    assert not [t for t in threading.enumerate() if t.name.startswith("tether-watch")]

    async def settle() -> None:
        while os_threads() > baseline:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(settle(), CAP_S)


# ---- JournalTail ------------------------------------------------------------------------

async def test_journal_tail_equals_the_store_after_every_step_of_a_real_run(harness: Harness) -> None:
    state = harness.new_run("destructive")
    run_id = state.run_id
    tail = JournalTail(harness.store.run_dir(run_id) / JOURNAL_FILE)
    assert tail.read() is True
    assert tail.state == harness.store.load(run_id)
    changes: list[bool] = []

    def check(event: Event | None) -> None:  # a sink: called at each event, between the run's saves
        changes.append(tail.read())
        assert tail.state == harness.store.load(run_id)

    await harness.run(run_id, sinks=[check])  # stops for approval
    check(None)  # the last save follows the last event
    assert tail.state is not None and tail.state.status is Status.INTERRUPTED
    await harness.approve(run_id, "fine", sinks=[check])
    check(None)
    assert tail.state.status is Status.COMPLETED
    assert tail.state.approvals and tail.state.agent is not None  # sticky: written once, carried on
    assert len(tail.state.per_turn_prompt_tokens) == tail.state.turns  # growing: extended commit by commit
    assert sum(changes) >= 4 and not all(changes)
    assert tail.read() is False  # nothing new: nothing to do
    assert tail.resets == 0  # every step was read incrementally
    tail.close()


async def test_journal_tail_across_a_compaction_a_torn_tail_and_a_cut(harness: Harness, tmp_path: Path) -> None:
    state = harness.new_run("plan")
    await harness.run(state.run_id)
    run_id, store = state.run_id, harness.store
    journal = store.run_dir(run_id) / JOURNAL_FILE
    early = journal.read_bytes()
    with JournalTail(journal) as tail:
        tail.read()
        assert tail.state == store.load(run_id)

        state, handle = store.open(run_id)
        try:
            handle.compact(state)  # a new file renamed over the journal
            assert tail.read() is False  # the same state, read again from the new file
            assert tail.resets == 1 and tail.state == store.load(run_id)
            state.messages.append({"role": "user", "content": "one more"})
            state.turns += 1
            state.per_turn_prompt_tokens.append(7)
            handle.save(state)
            assert tail.read() is True and tail.resets == 1  # followed incrementally again
            assert tail.state == store.load(run_id)
        finally:
            handle.release()

        # A crash mid-save: a message, and half of the next line. Nothing is applied...
        before = tail.state
        with open(journal, "ab") as f:
            f.write(b'{"m":{"role":"assistant","content":"whole"}}\n{"m":{"role":"assistant","content":"hal')
        assert tail.read() is False and tail.state == before == store.load(run_id)
        # ...and the next owner cuts the torn tail off, then saves: the tail follows.
        state, handle = store.open(run_id)
        try:
            assert tail.read() is False and tail.state == store.load(run_id)
            state.messages.append({"role": "assistant", "content": "after the crash"})
            handle.save(state)
            assert tail.read() is True and tail.state == store.load(run_id)
            assert tail.state.messages[-1]["content"] == "after the crash"
        finally:
            handle.release()

        # A save seen half-written: its messages wait for their commit. (The save is made on a
        # copy of the run, to know its bytes; its commit leaves out the sticky agent.)
        copy = tmp_path / "copy" / run_id
        copy.mkdir(parents=True)
        shutil.copy(journal, copy / JOURNAL_FILE)
        state, handle = RunStore(copy.parent).open(run_id)
        try:
            state.messages.append({"role": "user", "content": "split"})
            handle.save(state)
        finally:
            handle.release()
        data = (copy / JOURNAL_FILE).read_bytes()[journal.stat().st_size:]
        assert b'"agent"' not in data
        with open(journal, "ab") as f:
            f.write(data[: len(data) // 2])
            f.flush()
            assert tail.read() is False
            f.write(data[len(data) // 2:])
        assert tail.read() is True
        assert tail.state == store.load(run_id) and tail.state.messages[-1]["content"] == "split"
        assert tail.state.agent is not None

        # Cut back below the offset (an older version written over it): read again from the start.
        resets = tail.resets
        journal.write_bytes(early[: early.index(b'{"commit"')] + early.split(b"\n{\"commit\"")[1].join(
            [b'{"commit"', b"\n"]).split(b"\n")[0] + b"\n")
        assert tail.read() is True
        assert tail.resets == resets + 1 and tail.state == store.load(run_id) and tail.state.turns == 0

        # Rewritten in place with something longer: what preceded the offset is gone.
        other = harness.new_run("runaway")
        await harness.run(other.run_id, max_turns=6)
        longer = (store.run_dir(other.run_id) / JOURNAL_FILE).read_bytes()
        assert len(longer) > journal.stat().st_size
        journal.write_bytes(longer)
        assert tail.read() is True
        assert tail.resets == resets + 2 and tail.state == store.load(run_id) and tail.state.turns == 6


def test_journal_tail_before_the_journal_exists(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    tail = JournalTail(tmp_path / "runs" / "r" / JOURNAL_FILE)
    assert tail.read() is False and tail.state is None
    store.create(RunState(run_id="r", model="plan", messages=[{"role": "user", "content": "hi"}]))
    assert tail.read() is True and tail.state == store.load("r")
    tail.close()


def test_lines_longer_than_a_read_chunk(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    big = "x" * (2_500_000 + 7)  # more than two 1 MiB chunks in one line
    store.create(RunState(run_id="r", model="plan", messages=[{"role": "user", "content": "hi"}]))
    with JournalTail(store.run_dir("r") / JOURNAL_FILE) as tail:
        tail.read()
        state, handle = store.open("r")
        try:
            state.messages.append({"role": "tool", "tool_call_id": "c", "content": big})
            handle.save(state)
        finally:
            handle.release()
        assert tail.read() is True and tail.state == store.load("r")
    trace = tmp_path / TRACE_FILE
    trace.write_text(json.dumps({"kind": "tool_result", "seq": 1, "preview": big}) + "\n"
                     + json.dumps({"kind": "turn", "seq": 2}) + "\n")
    assert [r["seq"] for r in TraceTail(trace).read()] == [1, 2]


# ---- TraceTail and events from records -------------------------------------------------------

def _sample(name: str, annotation: Any) -> Any:
    """A value of a field's type, with what a JSON line could mangle (controls, U+2028)."""
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(a for a in get_args(annotation) if a is not type(None))
    origin = get_origin(annotation) or annotation
    if origin is bool:
        return True
    if origin is int:
        return 7
    if origin is float:
        return 2.5
    if origin is str:
        return f"{name} \x1b[2J\u2028 \"quoted\""
    if origin is dict:
        return {"type": "approval", "callId": "c1", "nested": [1, "two", None]}
    if origin is list:
        return ["one", 2]
    raise AssertionError(f"no sample for {name}: {annotation!r}")


def _one_of_each(run_id: str) -> list[Event]:
    """An instance of every event class, every field set (base fields left to the writer)."""
    out = []
    for cls in sorted(_all_event_classes(), key=lambda c: c.kind):
        hints = get_type_hints(cls)
        values = {f.name: _sample(f.name, hints[f.name]) for f in fields(cls)
                  if f.name not in ("run_id", "seq", "ts")}
        out.append(cls(run_id=run_id, **values))
    return out


def _all_event_classes() -> set[type]:
    found, todo = set(), [Event]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.add(sub)
            todo.append(sub)
    return found


def test_every_event_class_round_trips_through_the_trace(tmp_path: Path) -> None:
    path = tmp_path / TRACE_FILE
    originals = _one_of_each("r1")
    assert {"run_started", "tool_progress", "run_stopped", "text_delta"} <= {e.kind for e in originals}
    tail = TraceTail(path)
    assert tail.read() == []  # no file yet
    writer = TraceWriter(path)
    try:
        for event in originals[:3]:
            writer.write(event)
        first = tail.read()
        for event in originals[3:]:
            writer.write(event)
        second = tail.read()
    finally:
        writer.close()
    assert tail.read() == []
    records = first + second
    assert [r["seq"] for r in records] == list(range(1, len(originals) + 1))
    back = [event_from_record(r) for r in records]
    assert back == originals  # the writer stamped seq and ts on the originals
    assert all(type(b) is type(o) for b, o in zip(back, originals))


def test_event_from_record_unknown_kinds_extra_keys_and_missing_fields() -> None:
    progress = {"kind": "tool_progress", "run_id": "r", "seq": 3, "ts": 1.0, "call_id": "c", "name": "scan",
                "label": "10%", "added_later": {"x": 1}}
    event = event_from_record(progress)
    assert event == ev.ToolProgress(run_id="r", seq=3, ts=1.0, call_id="c", name="scan", label="10%")
    assert event_from_record({"kind": "from_the_future", "run_id": "r"}) is None
    assert event_from_record({"kind": "tool_progress", "run_id": "r"}) is None  # lacks call_id, name, label
    assert event_from_record({"run_id": "r"}) is None


def test_trace_tail_waits_for_a_torn_line_and_backlog_then_follows(tmp_path: Path) -> None:
    path = tmp_path / TRACE_FILE
    lines = [json.dumps({"kind": "tool_progress", "run_id": "r", "seq": n, "ts": n, "call_id": "c", "name": "t",
                         "label": f"step {n}"}) + "\n" for n in range(1, 31)]
    path.write_text("".join(lines[:25]) + lines[25][:10])
    late = TraceTail(path)
    assert [r["seq"] for r in late.backlog(20)] == list(range(6, 26))
    assert late.read() == []  # the torn line waits
    with open(path, "a") as f:
        f.write(lines[25][10:] + "".join(lines[26:]))
    assert [r["seq"] for r in late.read()] == list(range(26, 31))
    early = TraceTail(path)
    assert [r["seq"] for r in early.read()] == list(range(1, 31))


def test_wording_is_terminal_safe_and_shared_with_the_console() -> None:
    from tether.tui.widgets import trace_view

    record = {"kind": "tool_start", "run_id": "r", "seq": 4, "ts": 0, "call_id": "c1", "name": "write_file",
              "args": '{"text": "\x1b]52;c;aGk=\x07 and \x1b[2J\nline two"}'}
    line = format_record(record)
    assert "\x1b" not in line and "\x07" not in line and "\n" not in line
    assert line.startswith("#4") and "tool_start" in line and "line two" in line
    assert trace_view.format_record is format_record  # the console words a line the same way


# ---- watch_runs ---------------------------------------------------------------------------

async def test_watch_runs_reports_a_new_run_and_its_events_from_another_process(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "old").mkdir()  # a run made before the watch began
    RunStore(runs).create(RunState(run_id="old", model="plan", messages=[{"role": "user", "content": "hi"}]))
    baseline = os_threads()
    ready, stop = asyncio.Event(), asyncio.Event()
    batches: list[list[RunChange]] = []
    journal, trace = JournalTail(runs / "w" / JOURNAL_FILE), TraceTail(runs / "w" / TRACE_FILE)
    records: list[dict] = []
    done = asyncio.Event()

    async def consume() -> None:
        async for batch in watch_runs(runs, ready=ready, stop_event=stop):
            batches.append(batch)
            for change in batch:
                if change.run_id == "w":
                    journal.read()
                    records.extend(trace.read())
            if any(r["kind"] == "run_stopped" for r in records) and journal.state is not None \
                    and journal.state.status is Status.COMPLETED:
                done.set()

    consumer = asyncio.create_task(consume())
    proc = None
    try:
        await asyncio.wait_for(ready.wait(), CAP_S)
        # Noise the watcher must filter out: the index, and temporary files.
        (runs / "index.sqlite").write_bytes(b"x")
        (runs / "index.sqlite-wal").write_bytes(b"x")
        (runs / "old" / ".journal.jsonl.99.tmp").write_bytes(b"x")
        proc = await asyncio.create_subprocess_exec(
            *tether_cmd("run", "slow", "--run-id", "w", *place(tmp_path)),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        await asyncio.wait_for(done.wait(), CAP_S)
        assert await asyncio.wait_for(proc.wait(), CAP_S) == 0
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        stop.set()
        await asyncio.wait_for(consumer, CAP_S)  # the stop event ends the iteration
    changes = [c for batch in batches for c in batch]
    assert {c.run_id for c in changes} == {"w"}  # nothing for the index, temp files, or the old run
    mine = [c.what for c in changes]
    assert sum(NEW in what for what in mine) == 1 and NEW in mine[0]
    assert any(TRACE in what for what in mine[1:]) and any(JOURNAL in what for what in mine[1:])
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))  # every line, once, in order
    assert [r["kind"] for r in records].count("tool_progress") >= 1
    assert journal.state == RunStore(runs).load("w")
    journal.close()
    await threads_back_to(baseline)


async def test_watch_runs_is_cancelled_cleanly(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    baseline = os_threads()
    ready = asyncio.Event()

    async def consume() -> None:
        async for _ in watch_runs(runs, ready=ready):
            pass

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(ready.wait(), CAP_S)
    assert runs.is_dir()  # made if missing, so a new store can be watched
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(consumer, CAP_S)
    await threads_back_to(baseline)


async def test_watching_named_runs_sees_one_appear_then_grow_then_go(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    ready = asyncio.Event()
    watcher = watch_runs(runs, run_ids=["later"], ready=ready)
    store = RunStore(runs)

    async def next_batch() -> list[RunChange]:
        return await asyncio.wait_for(anext(watcher), CAP_S)

    pending = asyncio.create_task(next_batch())  # starts the watcher
    try:
        await asyncio.wait_for(ready.wait(), CAP_S)
        store.create(RunState(run_id="other", model="plan", messages=[]))  # not named: not reported
        store.create(RunState(run_id="later", model="plan", messages=[]))
        seen: set[str] = set()

        async def until(what: str) -> None:
            nonlocal pending
            while what not in seen:
                batch = await pending
                assert [c.run_id for c in batch] == ["later"]
                seen.update(batch[0].what)
                pending = asyncio.create_task(next_batch())

        await until(NEW)
        with open(runs / "later" / TRACE_FILE, "a") as f:  # its directory is watched now
            f.write('{"kind":"run_started","seq":1}\n')
        await until(TRACE)
        for path in sorted((runs / "later").iterdir()):
            path.unlink()
        (runs / "later").rmdir()
        await until(REMOVED)
    finally:
        pending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pending
        await watcher.aclose()


async def test_out_of_inotify_watches_falls_back_to_polling(tmp_path: Path, monkeypatch, caplog) -> None:
    import tether.store.files.watch as watch

    real = watch.RustNotify

    def limited(paths, debug, force_polling, *rest):
        if not force_polling:
            raise OSError("OS file watch limit reached.")
        return real(paths, debug, force_polling, *rest)

    monkeypatch.setattr(watch, "RustNotify", limited)
    runs = tmp_path / "runs"
    ready = asyncio.Event()
    watcher = watch_runs(runs, ready=ready, poll_delay_ms=20)
    pending = asyncio.ensure_future(anext(watcher))
    try:
        await asyncio.wait_for(ready.wait(), CAP_S)
        RunStore(runs).create(RunState(run_id="r", model="plan", messages=[]))
        batch = await asyncio.wait_for(pending, CAP_S)
    finally:
        pending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pending
        await watcher.aclose()
    assert batch == [RunChange("r", frozenset({NEW, JOURNAL}))]
    assert "polling every 20 ms instead" in caplog.text and "max_user_watches" in caplog.text


# ---- tether watch -------------------------------------------------------------------------

async def test_follow_run_ends_on_an_orphan_but_not_on_a_quiet_live_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    store = RunStore(runs)
    line = json.dumps({"kind": "tool_progress", "run_id": "q", "seq": 1, "ts": 1.0, "call_id": "c", "name": "scan",
                       "label": "working"}) + "\n"
    store.create(RunState(run_id="q", model="plan", messages=[]))
    (runs / "q" / TRACE_FILE).write_text(line)

    # Held by a process that is quiet for longer than the check: the watch goes on...
    state, handle = store.open("q")
    out = io.StringIO()
    follow = asyncio.create_task(follow_run(runs, "q", out, orphan_check_s=0.05))
    try:
        async def backlog_shown() -> None:
            while "#1" not in out.getvalue():
                await asyncio.sleep(0.01)

        await asyncio.wait_for(backlog_shown(), CAP_S)
        await asyncio.sleep(0.3)  # several checks: the lock is held
        assert not follow.done()
        with open(runs / "q" / TRACE_FILE, "a") as f:  # ...until the run stops
            f.write(json.dumps({"kind": "run_stopped", "run_id": "q", "seq": 2, "ts": 2.0, "status": "completed",
                                "reason": "done", "turns": 1, "cost_usd": 0.0}) + "\n")
        stopped = await asyncio.wait_for(follow, CAP_S)
    finally:
        follow.cancel()
        handle.release()
    assert stopped is not None and stopped["seq"] == 2
    assert out.getvalue().splitlines()[-1].startswith("#2")

    # Nobody holds it (its process died without stopping it): the watch ends, saying so.
    store.create(RunState(run_id="dead", model="plan", messages=[]))
    (runs / "dead" / TRACE_FILE).write_text(line.replace('"q"', '"dead"'))
    out = io.StringIO()
    assert await asyncio.wait_for(follow_run(runs, "dead", out, orphan_check_s=0.05), CAP_S) is None
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("#1") and "dead is orphaned" in lines[-1] and "tether resume dead" in lines[-1]


def test_tether_watch_follows_a_run_in_another_process_until_it_stops(tmp_path: Path) -> None:
    where = place(tmp_path)
    journal = tmp_path / "runs" / "s" / JOURNAL_FILE
    run = subprocess.Popen(tether_cmd("run", "slow", "--run-id", "s", "--latency-ms", "500", *where),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watch = None
    try:
        wait_until(journal.exists, "the run to be created", CAP_S)
        watch = subprocess.Popen(tether_cmd("watch", "s", *where), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        out, err = watch.communicate(timeout=CAP_S * 2)
        assert watch.returncode == 0, err
        assert run.wait(timeout=CAP_S) == 0, run.stderr.read() if run.stderr else ""
    finally:
        stop_process(run)
        if watch is not None:
            stop_process(watch)
    lines = out.splitlines()
    kinds = [line.split()[2] for line in lines]
    assert kinds[0] == "run_started" and kinds[-1] == "run_stopped"
    assert "completed" in lines[-1]
    progress = [i for i, kind in enumerate(kinds) if kind == "tool_progress"]
    assert progress and 0 < progress[0] and progress[-1] < len(lines) - 1
    assert any("scanned 1200 of 1200 entries" in line for line in lines)
    seqs = [int(line.split()[0][1:]) for line in lines]
    assert seqs == list(range(1, len(lines) + 1))  # each line once, none missed


def test_tether_watch_all_shows_a_run_started_after_it_and_exits_on_sigint(tmp_path: Path) -> None:
    where = place(tmp_path)
    assert subprocess.run(tether_cmd("run", "plan", "--run-id", "first", *where), capture_output=True,
                          timeout=CAP_S * 2).returncode == 0
    watch = subprocess.Popen(tether_cmd("watch", "--all", *where), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        out, err = Lines(watch.stdout), Lines(watch.stderr)
        err.wait_for(lambda line: line.startswith("watching every run"), "the watch to begin")
        second = subprocess.run(tether_cmd("run", "plan", "--run-id", "second", *where), capture_output=True,
                                timeout=CAP_S * 2)
        assert second.returncode == 0
        out.wait_for(lambda line: line.startswith("second ") and "run_stopped" in line, "the second run's stop")
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=CAP_S) == 0
        lines, errors = out.finish(), err.finish()
    finally:
        stop_process(watch)
    assert lines[0].startswith("second ") and "run_started" in lines[0]
    assert all(line.startswith("second ") for line in lines)  # the first run had stopped: no context for it
    assert not any("Traceback" in line or "KeyboardInterrupt" in line for line in errors)


def test_tether_watch_a_stopped_run_the_newest_by_default_and_an_unknown_one(tmp_path: Path) -> None:
    where = place(tmp_path)
    subprocess.run(tether_cmd("run", "plan", "--run-id", "older", *where), capture_output=True, timeout=CAP_S * 2)
    waiting = subprocess.run(tether_cmd("run", "destructive", "--run-id", "d", *where), capture_output=True,
                             timeout=CAP_S * 2)
    assert waiting.returncode == 5  # stopped to wait for an approval
    result = subprocess.run(tether_cmd("watch", *where), capture_output=True, text=True, timeout=CAP_S * 2)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "approval_required" in lines[-3] and "run_stopped" in lines[-2]
    assert "tether approve d" in lines[-1] and "tether reject d" in lines[-1]
    short = subprocess.run(tether_cmd("watch", "older", "--lines", "2", *where), capture_output=True, text=True,
                           timeout=CAP_S * 2)
    assert short.returncode == 0 and len(short.stdout.splitlines()) == 2
    unknown = subprocess.run(tether_cmd("watch", "nope", *where), capture_output=True, text=True, timeout=CAP_S * 2)
    assert unknown.returncode == 2 and "no run nope" in unknown.stderr

