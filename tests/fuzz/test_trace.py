"""The trace's readers on torn and garbage lines: ``tether.store.trace.read_trace`` (``tether
trace``, the report), the writer's recovery of ``seq`` from the tail it finds
(``TraceWriter``, when a run is resumed), ``tether.store.files.tail.TraceTail`` and ``tether.store.trace.tail_records`` (the
console), and ``event_from_record`` (another process's events back into events).

The rule: any bytes in ``trace.jsonl`` are read without an error (what cannot be read is
skipped), a resumed run goes on writing after the last complete line with a larger ``seq``,
and a complete line is never cut off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from tether.vocab.events import RunStopped
from tether.store.files.tail import TraceTail
from tether.store.trace import event_from_record, tail_records
from tether.store.trace import TraceWriter, read_trace

from tests.fuzz.strategies import dumps, garbage_lines, json_values, objects_with, texts

KINDS = ["turn", "tool_start", "tool_result", "run_stopped", "approval_required", "approval_decision",
         "tool_progress", "provider_retry", "run_started", "nonsense"]


def good_line(seq: int) -> bytes:
    return dumps({"seq": seq, "ts": 1.0, "kind": "run_stopped", "run_id": "r", "status": "completed"})


records = objects_with({"seq": st.integers(-5, 50), "kind": st.sampled_from(KINDS), "run_id": texts})
trace_lines = st.one_of(garbage_lines, records.map(dumps), st.integers(1, 40).map(good_line))
traces = st.tuples(st.lists(trace_lines, max_size=8), st.booleans()).map(
    lambda t: b"".join(line + b"\n" for line in t[0])[: None if t[1] else -1])  # maybe torn at the end


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trace")


@given(traces)
def test_every_reader_reads_any_trace_without_an_error(scratch: Path, data: bytes) -> None:
    path = scratch / "trace.jsonl"
    path.write_bytes(data)
    complete = data[: data.rfind(b"\n") + 1]
    read = list(read_trace(path))
    assert all(isinstance(r, dict) for r in read)
    assert len(read) <= complete.count(b"\n")
    tail = TraceTail(path)
    followed = tail.read()
    assert all(isinstance(r, dict) for r in followed)
    assert tail.offset == len(complete)
    assert all(isinstance(r, dict) for r in TraceTail(path).backlog(limit=5))
    assert all(isinstance(r, dict) for r in tail_records(path))
    for record in read:
        event = event_from_record(record)
        assert event is None or event.kind == record.get("kind")


@given(traces)
def test_a_resumed_writer_goes_on_after_the_last_complete_line(scratch: Path, data: bytes) -> None:
    path = scratch / "resumed.jsonl"
    path.write_bytes(data)
    complete = data[: data.rfind(b"\n") + 1]
    writer = TraceWriter(path)
    try:
        last = writer.last_seq
        assert isinstance(last, int)
        writer.write(RunStopped(run_id="r", status="completed", reason="", turns=1, cost_usd=0.0))
    finally:
        writer.close()
    after = path.read_bytes()
    assert after.startswith(complete)  # the torn tail is cut off, no complete line is
    written = json.loads(after[len(complete):])
    assert written["seq"] == last + 1


@given(objects_with({"kind": st.sampled_from(KINDS), "run_id": texts, "seq": json_values, "turn": json_values,
                     "status": json_values, "call_id": texts}))
def test_any_record_is_an_event_or_none(record: dict) -> None:
    event = event_from_record(record)
    assert event is None or event.kind == record["kind"]


# ---- bugs the campaign found, kept as regressions -----------------------------------------

@pytest.mark.parametrize("tail", [
    b'{"seq": 1e999}\n',  # int(inf): OverflowError, not ValueError
    b'{"seq": "7"}\n' + b"[" * 70_000 + b"\n",  # the tail has no readable line: the whole file is read
    b'{"seq": 3}\n{"seq": "x"}\n' + b"x" * 70_000 + b"\n",  # ... and seq of several types: max() fails
    b'{"seq": 2}\n' + b"[" * 5_000 + b"]" * 5_000 + b"\n",  # too deep: RecursionError
], ids=["seq-infinite", "seq-string-far", "seq-mixed-far", "deep-line"])
def test_found_trace_tails_are_read(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(good_line(1) + b"\n" + tail)
    list(read_trace(path))
    TraceTail(path).read()
    writer = TraceWriter(path)
    writer.write(RunStopped(run_id="r", status="completed", reason="", turns=1, cost_usd=0.0))
    writer.close()
    assert writer.last_seq >= 2


def test_a_torn_line_longer_than_the_window_is_cut_off_whole(tmp_path: Path) -> None:
    """Found: the writer looked for the last newline in the last 64 KiB only, and cut a torn
    line longer than that in its middle; the next event was then glued to the rest of it (one
    unreadable line), and its ``seq`` was lost to every reader."""
    path = tmp_path / "trace.jsonl"
    complete = good_line(1) + b"\n" + good_line(2) + b"\n"
    path.write_bytes(complete + b'{"seq": 3, "kind": "tool_result", "preview": "' + b"x" * 100_000)
    writer = TraceWriter(path)
    writer.write(RunStopped(run_id="r", status="completed", reason="", turns=1, cost_usd=0.0))
    writer.close()
    assert path.read_bytes().startswith(complete)
    assert [r["seq"] for r in read_trace(path)] == [1, 2, 3]
