"""The journal's readers (``tether.store.files.journal.read_journal``, what ``load`` and ``open``
replay, and ``tether.store.files.tail.JournalTail``, what the console follows) on torn, garbage
and almost-right lines.

The rule: a journal of any bytes loads (the state of its last complete commit) or is refused
with a :class:`StateError` in words, by both readers alike; a state that loads can be listed
(its summary row) without an error; a torn tail never changes what loads."""

from __future__ import annotations

import copy
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from tether.vocab.state import SCHEMA_VERSION, AgentRef, Limits, RunState, StateError, Status
from tether.store.files.journal import STICKY_FIELDS, commit_bytes as _commit_bytes, header_of as _header
from tether.store.files.journal import read_journal as _read
from tether.store.files.store import RunStore
from tether.store.files.tail import JournalTail

from tests.fuzz.strategies import deep, dumps, examples, garbage_lines, json_values, texts

messages = st.one_of(
    st.fixed_dictionaries({"role": st.just("user"), "content": texts}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": st.one_of(st.none(), texts)}),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": texts, "content": texts}),
)
steps = st.lists(st.tuples(st.lists(messages, max_size=3), st.integers(0, 5000), st.sampled_from(list(Status)),
                           st.sampled_from([None, "triage", "coder"]),
                           # fields a commit carries only when they changed (STICKY_FIELDS), back and forth
                           st.sampled_from([None, "boom"]), st.sampled_from([5, 20]),
                           st.sampled_from([None, "/tmp/ws-a", "/tmp/ws-b"])), min_size=1, max_size=5)


def journal_of(run_steps: list[tuple[Any, ...]]) -> tuple[bytes, list[tuple[int, dict[str, Any]]]]:
    """The journal a run saved step by step (as ``RunStore.create`` then ``RunHandle.save``
    write it), and after each commit: where it ends and the state saved there."""
    state = RunState(run_id="fuzz", model="m", created_at=1.0, updated_at=1.0)
    data = b""
    commits: list[tuple[int, dict[str, Any]]] = []
    grown: dict[str, int] | None = None
    sticky: dict[str, Any] = {}
    written = 0
    for step in run_steps:  # the examples below give the first four; the rest keep the defaults
        new, tokens, status, agent, error, max_turns, workspace = (*step, None, 20, None)[:7]
        state.messages.extend(copy.deepcopy(new))
        state.error, state.limits, state.workspace = error, Limits(max_turns=max_turns), workspace
        state.turns += 1
        state.prompt_tokens += tokens
        state.per_turn_prompt_tokens.append(tokens)
        state.status = status
        state.agent = AgentRef(agent, "config", "f" * 8) if agent else None
        header = _header(state, since=grown)
        now = {f: header[f] for f in STICKY_FIELDS}
        for name in STICKY_FIELDS:
            if grown is not None and name in sticky and sticky[name] == header[name]:
                del header[name]
        data += _commit_bytes(state.messages[written:], header)
        written, sticky = len(state.messages), now
        grown = {"per_turn_prompt_tokens": len(state.per_turn_prompt_tokens),
                 "estimated_turns": len(state.estimated_turns)}
        commits.append((len(data), json.loads(json.dumps(state.to_dict()))))
    return data, commits


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("journal")


_runs = itertools.count()


def read_both(root: Path, data: bytes, *, listing: bool = False) -> tuple[Any, Any]:
    """The journal ``data`` as a run of a store under ``root``: loaded (``RunStore.load``,
    which replays it with ``_read``) and followed by a fresh JournalTail, each a state dict or
    the StateError. With ``listing``, a run that loads is listed too (``tether runs``: its row
    in the index), and one that does not is left out of the listing, with its reason."""
    shutil.rmtree(root, ignore_errors=True)
    store = RunStore(root)
    run_id = f"run{next(_runs)}"
    path = root / run_id / "journal.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    try:
        state, end = _read(path)
        loaded: Any = (state.to_dict(), end)
        store.load(run_id)
    except StateError as exc:
        loaded = exc
    if listing:
        problems: dict[str, str] = {}
        listed = store.summaries(problems=problems)
        assert len(listed) == (0 if isinstance(loaded, StateError) else 1)
        assert (run_id in problems) == isinstance(loaded, StateError)
    with JournalTail(path) as tail:
        try:
            tail.read()
            followed: Any = tail.state.to_dict() if tail.state is not None else None
        except StateError as exc:
            followed = exc
    assert path.read_bytes() == data  # reading never writes: a refused journal is left for the operator
    return loaded, followed


def agree(loaded: Any, followed: Any) -> None:
    if isinstance(loaded, StateError):
        # No commit at all: the tail has no state yet (it waits for one), the loader says so.
        assert isinstance(followed, StateError) or (followed is None and "no committed state" in str(loaded))
    else:
        assert not isinstance(followed, StateError), followed
        assert followed == loaded[0]


@given(steps, st.data())
def test_a_torn_tail_loads_the_last_complete_commit(scratch: Path, run_steps, data) -> None:
    journal, commits = journal_of(run_steps)
    cut = data.draw(st.integers(0, len(journal)), label="cut")
    loaded, followed = read_both(scratch / "runs", journal[:cut])
    done = [c for c in commits if c[0] <= cut]
    if not done:
        assert isinstance(loaded, StateError) and "no committed state" in str(loaded)
        assert followed is None
        return
    end, expected = done[-1]
    assert loaded == (expected, end)
    assert followed == expected


@given(steps, st.data())
def test_a_garbage_line_anywhere_loads_or_is_refused_in_words(scratch: Path, run_steps, data) -> None:
    journal, _ = journal_of(run_steps)
    lines = journal.splitlines(keepends=True)
    at = data.draw(st.integers(0, len(lines)), label="at")
    line = data.draw(garbage_lines, label="garbage")
    torn = data.draw(st.booleans(), label="torn")  # the garbage is the last line, without its newline
    if torn:
        damaged = b"".join(lines) + line
    else:
        damaged = b"".join(lines[:at]) + line + b"\n" + b"".join(lines[at:])
    agree(*read_both(scratch / "runs", damaged))


header_fields = st.sampled_from(["version", "message_count", "status", "limits", "pricing", "policies", "approvals",
                                 "interruption", "agent", "per_turn_prompt_tokens", "estimated_turns", "failed_calls",
                                 "intents", "turns", "run_id", "created_at", "children"])


@examples(20)  # each example lists the run too (an SQLite index)
@given(steps, st.data())
def test_an_almost_right_commit_loads_or_is_refused_in_words(scratch: Path, run_steps, data) -> None:
    """A commit line whose header is right but for one field (of any JSON value), or a message
    line whose message is any JSON value: what a tampered or foreign journal holds."""
    journal, _ = journal_of(run_steps)
    lines = journal.splitlines(keepends=True)
    at = data.draw(st.integers(0, len(lines) - 1), label="line")
    record = json.loads(lines[at])
    if "commit" in record:
        for _ in range(data.draw(st.integers(1, 3), label="fields")):
            record["commit"][data.draw(header_fields, label="field")] = data.draw(json_values, label="value")
    else:
        record["m"] = data.draw(json_values, label="message")
    lines[at] = dumps(record) + b"\n"
    agree(*read_both(scratch / "runs", b"".join(lines), listing=True))


@given(steps, st.lists(st.integers(1, 400), max_size=8))
def test_the_tail_fed_in_pieces_ends_where_the_loader_does(scratch: Path, run_steps, pieces) -> None:
    """A journal written piece by piece (a save caught half-written, many times over) as the
    console follows it: after every piece the tail's state is the loader's of the same bytes."""
    journal, _ = journal_of(run_steps)
    path = scratch / "growing.jsonl"  # beside the runs dir read_both clears
    path.write_bytes(b"")
    with JournalTail(path) as tail:
        position = 0
        for size in [*pieces, len(journal)]:
            chunk = journal[position:position + size]
            position += len(chunk)
            with open(path, "ab") as f:
                f.write(chunk)
            tail.read()
            try:
                expected = _read(path)[0].to_dict()
            except StateError:
                expected = None
            assert (tail.state.to_dict() if tail.state is not None else None) == expected


# ---- bugs the campaign found, kept as regressions -----------------------------------------

@pytest.mark.parametrize("line", [
    deep(50_000),  # RecursionError in json.loads, not a ValueError
    b'{"m": ' + deep(5_000) + b"}",
    dumps({"commit": {"version": SCHEMA_VERSION, "message_count": 0, "policies": []}}),  # AttributeError
    dumps({"commit": {"version": SCHEMA_VERSION, "message_count": 0, "limits": []}}),  # TypeError, refused already
    dumps({"m": 5}) + b"\n" + dumps({"commit": {"version": SCHEMA_VERSION, "message_count": 1}}),  # not a message
], ids=["deep-array", "deep-message", "policies-list", "limits-list", "message-number"])
def test_found_journal_lines_are_refused_in_words(tmp_path: Path, line: bytes) -> None:
    journal, _ = journal_of([([{"role": "user", "content": "hi"}], 1, Status.RUNNING, None)])
    loaded, followed = read_both(tmp_path / "runs", journal + line + b"\n", listing=True)
    assert isinstance(loaded, StateError) and isinstance(followed, StateError)
    assert "journal" in str(loaded) or "schema" in str(loaded)


@pytest.mark.parametrize(("field", "value"), [("run_id", True), ("run_id", None), ("run_id", []), ("turns", 10**30),
                                              ("created_at", 10**400), ("created_at", "yesterday")])
def test_a_commit_whose_id_count_or_time_cannot_be_listed_is_refused_in_words(scratch: Path, field: str,
                                                                               value: Any) -> None:
    """Found by the property above: such a journal crashed ``tether runs`` (an id that is not
    text, a count or a time past SQLite's 64 bits) instead of being left out with its reason."""
    journal, _ = journal_of([([], 0, Status.RUNNING, None)])
    lines = journal.splitlines(keepends=True)
    record = json.loads(lines[0])
    record["commit"][field] = value
    loaded, followed = read_both(scratch / "runs", dumps(record) + b"\n" + b"".join(lines[1:]), listing=True)
    assert isinstance(loaded, StateError) and field in str(loaded) and isinstance(followed, StateError)
