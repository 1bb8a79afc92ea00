"""Control requests (``tether.store.control``): the run's ``control.jsonl`` as the process that
runs it reads it (``read_from``, ``ControlRequest.from_dict``), the poke on its socket
(``ControlServer._serve``), and the answer a requester reads back (``deliver``).

The rule: any line is a request of a known kind with fields of the right types, or an
unreadable one that keeps the count (no unknown kind is ever taken for a decision); any poke
gets one answer in words and reaches the run only when it names it; any answer is a reply
or None ("no answer"), never an error."""

from __future__ import annotations

import asyncio
import json
import typing
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from tether.store.control import ControlReply, ControlRequest, Kind
from tether.store.files.control import read_from
from tether.store.files.layout import CONTROL_FILE
from tether.store.unix import ControlServer, deliver

from tests.fuzz.strategies import dumps, garbage_lines, json_values, objects_with, texts

KINDS = typing.get_args(Kind)

FIELDS = {"kind": st.sampled_from([*KINDS, "Approve", "explode", ""]), "id": texts, "text": texts,
          "call_id": texts, "by": texts, "ts": st.floats(), "option": texts, "silent": st.booleans(),
          "args": texts, "rule": texts, "scope": texts}
requests = objects_with(FIELDS)
control_lines = st.one_of(requests.map(dumps), garbage_lines,
                          st.builds(lambda kind, text: dumps({"kind": kind, "id": "x", "text": text}),
                                    st.sampled_from(KINDS), texts))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("run")


@given(st.lists(control_lines, max_size=6), st.booleans(), st.integers(0, 7))
def test_any_control_file_is_requests_of_known_kinds(run_dir: Path, lines: list[bytes], torn: bool, seen: int) -> None:
    data = b"".join(line + b"\n" for line in lines)
    if torn:
        data += b'{"kind": "stop", "id": "half'  # a request still being written: not read yet
    (run_dir / CONTROL_FILE).write_bytes(data)
    out = read_from(run_dir, seen)
    assert len(out) == max(0, len(lines) - seen)  # one request per complete line: the count stays right
    for request in out:
        assert request.kind in KINDS
        assert all(getattr(request, f) is None or isinstance(getattr(request, f), str)
                   for f in ("call_id", "option", "args", "rule", "scope"))
        assert isinstance(request.ts, float)


@given(requests)
def test_a_saved_request_is_read_as_it_says_or_refused(data: dict[str, Any]) -> None:
    try:
        request = ControlRequest.from_dict(data)
    except (ValueError, KeyError, TypeError):
        return
    assert request.kind == data["kind"] and request.kind in KINDS


class _Writer:
    """What ``_serve`` writes to: the bytes, and whether it was closed."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    async def wait_closed(self) -> None:
        pass


pokes = st.one_of(
    objects_with({"run_id": st.sampled_from(["r", "other"]), "request_id": texts}).map(dumps),
    garbage_lines,
    st.integers(64 * 1024 - 10, 200 * 1024).map(lambda n: b'{"run_id": "r", "request_id": "' + b"x" * n + b'"}'),
)


def recording_server() -> tuple[ControlServer, list[str]]:
    """A control server whose run ``r`` answers "done", and the request ids it was poked about."""
    server = ControlServer()
    poked: list[str] = []

    async def handler(request_id: str) -> ControlReply:
        poked.append(request_id)
        return ControlReply(True, "done")

    server.register("r", handler)
    return server, poked


@given(pokes, st.booleans())
def test_any_poke_gets_one_answer_in_words(poke: bytes, newline: bool) -> None:
    server, poked = recording_server()
    writer = _Writer()

    async def serve() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(poke + (b"\n" if newline else b""))
        reader.feed_eof()
        await asyncio.wait_for(server._serve(reader, writer), 30)  # type: ignore[arg-type]  # a hang fails

    asyncio.run(serve())
    assert writer.closed
    (line,) = bytes(writer.data).splitlines()
    reply = json.loads(line)
    assert isinstance(reply["ok"], bool) and reply["words"]
    try:
        asked = json.loads(poke)
        names_r = isinstance(asked, dict) and asked.get("run_id") == "r" and "request_id" in asked
    except (ValueError, RecursionError):
        names_r = False
    assert bool(poked) == (names_r and len(poke) < 64 * 1024)  # the run is reached only when named


answers = st.one_of(objects_with({"ok": json_values, "words": json_values, "pending": json_values,
                                  "gone": json_values}).map(dumps), garbage_lines)


@given(answers)
def test_any_answer_is_a_reply_or_none(answer: bytes) -> None:
    async def exchange() -> ControlReply | None:
        address = f"\0tether-fuzz-{uuid.uuid4().hex}"

        async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readline()
            writer.write(answer + b"\n")
            await writer.drain()
            writer.close()

        server = await asyncio.start_unix_server(answer_once, path=address, limit=1 << 20)
        try:
            return await deliver(address, "r", "x", timeout_s=30)
        finally:
            server.close()
            await server.wait_closed()

    reply = asyncio.run(exchange())
    assert reply is None or isinstance(reply, ControlReply)


# ---- bugs the campaign found, kept as regressions -----------------------------------------

@pytest.mark.parametrize("line", [
    {"kind": "explode", "id": "a"},  # an unknown kind was taken for a rejection by the run waiting for one
    {"kind": "approve", "id": "a", "call_id": ["c"]},  # a call id that is no string
    {"kind": "stop", "id": "a", "ts": 10**400},  # float(10**400): OverflowError, not ValueError
], ids=["unknown-kind", "list-call-id", "huge-ts"])
def test_found_control_lines_are_unreadable_not_decisions(tmp_path: Path, line: dict[str, Any]) -> None:
    (tmp_path / CONTROL_FILE).write_bytes(dumps(line) + b"\n" + b"[" * 50_000 + b"\n")
    first, deep = read_from(tmp_path, 0)
    assert (first.id, deep.id) == ("unreadable", "unreadable")


def test_a_poke_longer_than_the_reader_limit_is_answered() -> None:
    """Found: a line over 64 KiB made ``readline`` raise ValueError, which ``_serve`` did not
    catch: no answer, and a traceback in the log of the process running the run."""
    writer = _Writer()

    async def serve() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(b"x" * 100_000 + b"\n")
        reader.feed_eof()
        await ControlServer()._serve(reader, writer)  # type: ignore[arg-type]

    asyncio.run(serve())
    assert json.loads(bytes(writer.data)) == {"ok": False, "words": "a malformed control request", "pending": False,
                                              "gone": False}


def test_an_answer_longer_than_the_reader_limit_is_no_answer() -> None:
    """Found: ``deliver`` let the ValueError of an answer over 64 KiB escape (``tether stop``
    ended in a traceback); it is "no answer", as from a process that died."""
    async def exchange() -> ControlReply | None:
        address = f"\0tether-fuzz-{uuid.uuid4().hex}"

        async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readline()
            writer.write(b'{"ok": true, "words": "' + b"x" * 100_000 + b'"}\n')
            await writer.drain()
            writer.close()

        server = await asyncio.start_unix_server(answer_once, path=address)
        try:
            return await deliver(address, "r", "x", timeout_s=30)
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(exchange()) is None
