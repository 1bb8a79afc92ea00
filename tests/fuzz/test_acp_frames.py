"""ACP frames: the lines an ACP agent writes to Tether (``tether.acp.transport.CheckedTransport``
under ``acp``'s connection, as ``AcpSession`` runs them), and the lines an editor writes to
Tether serving ACP (``tether acp``: ``tether.acp.server.serve``).

The rule: a line that is not a JSON-RPC message is skipped and counted (and after too many
in a row the session ends, in words); no line ends the connection otherwise, nor leaves a
request waiting for ever: after any lines, the next good message still arrives."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from acp.connection import Connection
from hypothesis import given, strategies as st

from tether.acp.transport import CheckedTransport, _json_rpc

from tests.fuzz.strategies import deep, dumps, garbage_lines, json_values, objects_with, texts

ids = st.one_of(st.integers(0, 3), texts, st.none(), json_values)
frames = st.one_of(
    garbage_lines,
    objects_with({"jsonrpc": st.just("2.0"), "id": ids, "result": json_values}).map(dumps),
    objects_with({"jsonrpc": st.just("2.0"), "id": ids, "error": objects_with(
        {"code": st.integers(-32700, 0), "message": texts, "data": json_values})}).map(dumps),
    objects_with({"jsonrpc": st.just("2.0"), "id": ids, "method": st.one_of(
        st.sampled_from(["session/update", "fs/read_text_file", "session/request_permission", "x"]), json_values),
        "params": json_values}).map(dumps),
)


class _Writer:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass

    async def wait_closed(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False


@given(st.one_of(garbage_lines, frames))
def test_a_frame_is_a_json_rpc_message_or_skipped(line: bytes) -> None:
    message = _json_rpc(line)
    assert message is None or isinstance(message, dict)


async def _through(lines: list[bytes]) -> tuple[Any, list[str], CheckedTransport]:
    """A connection as an ACP session has one: a request of Tether's is pending (id 0), the
    agent writes ``lines``, then answers the request; returns what the request got and the
    methods the handler saw after the lines (the last is the agent's ``probe`` notification)."""
    seen: list[str] = []

    async def handler(method: str, params: Any, notification: bool) -> Any:
        seen.append(method)
        return None

    reader = asyncio.StreamReader()
    bad: list[int] = []
    transport = CheckedTransport(reader, _Writer(), on_bad=lambda n, sample: bad.append(n),  # type: ignore[arg-type]
                                 max_consecutive=1_000)
    conn = Connection(handler, transport)
    asked = asyncio.ensure_future(conn.send_request("initialize", {}))
    await asyncio.sleep(0)
    for line in lines:
        reader.feed_data(line + b"\n")
    reader.feed_data(dumps({"jsonrpc": "2.0", "method": "probe", "params": {}}) + b"\n")
    reader.feed_data(dumps({"jsonrpc": "2.0", "id": 0, "result": {"answered": True}}) + b"\n")
    try:
        got: Any = await asyncio.wait_for(asked, 30)  # a hang fails
    except Exception as exc:  # an error answer from the agent (a RequestError) is an answer too
        got = exc
    for _ in range(50):  # the probe's handler runs as a task of its own
        if "probe" in seen:
            break
        await asyncio.sleep(0)
    reader.feed_eof()
    await conn.close()
    return got, seen, transport


@given(st.lists(frames, max_size=6))
def test_after_any_frames_the_connection_still_answers(lines: list[bytes]) -> None:
    got, seen, transport = asyncio.run(_through(lines))
    assert not isinstance(got, ConnectionError), got  # the connection was not dropped
    assert "probe" in seen
    assert transport.bad_frames <= len(lines)


# ---- bugs the campaign found, kept as regressions -----------------------------------------

FOUND = {
    "deep": deep(50_000),  # RecursionError out of the frame check: the receive loop died
    "response-id-object": b'{"jsonrpc": "2.0", "id": {}, "result": 1}',  # unhashable id: TypeError in the connection
    "response-id-list": b'{"jsonrpc": "2.0", "id": [0], "error": {"code": 1, "message": "x"}}',
    "error-not-object": b'{"jsonrpc": "2.0", "id": 0, "error": "no"}',  # error_obj.get: AttributeError
    "method-not-string": b'{"jsonrpc": "2.0", "id": 5, "method": 7, "result": 1}',
}


@pytest.mark.parametrize("line", FOUND.values(), ids=FOUND.keys())
def test_found_frames_are_skipped_and_counted(line: bytes) -> None:
    assert _json_rpc(line) is None
    got, seen, transport = asyncio.run(_through([line]))
    assert got == {"answered": True} and "probe" in seen and transport.bad_frames == 1


class _StreamWriter(_Writer, asyncio.StreamWriter):
    """What ``serve`` writes the protocol to: the bytes (``acp`` wants an asyncio StreamWriter;
    ``_Writer``'s methods and ``__init__`` come first, so no transport is needed)."""

    def __del__(self) -> None:
        pass


@pytest.mark.parametrize("line", [b"[1, 2]", b'"text"', b"7", b"null", deep(50_000),
                                  b'{"jsonrpc": "2.0", "id": {}, "result": 1}'],
                         ids=["array", "string", "number", "null", "deep", "unhashable-id"])
def test_an_editor_line_that_is_no_message_does_not_end_tether_acp(tmp_path: Path, line: bytes,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Found: ``tether acp`` read the editor through ``acp``'s own framing, which hands any
    JSON to the connection: a line that was JSON but no object (``[1, 2]``) ended the serving.
    It now reads through the same checked transport as the agents Tether runs."""
    from tether.acp.server import serve
    from tether.demo.agents import DEMO

    async def session() -> bytes:
        reader = asyncio.StreamReader()
        writer = _StreamWriter()
        reader.feed_data(line + b"\n")
        reader.feed_data(dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": {"protocolVersion": 1}}) + b"\n")
        served = asyncio.create_task(serve(None, tmp_path / "runs", workspace=tmp_path / "ws", stdin=reader,
                                           stdout=writer, agent_sets=[DEMO]))
        for _ in range(300):
            if b'"id":1' in writer.data or served.done():
                break
            await asyncio.sleep(0.05)
        reader.feed_eof()
        await asyncio.wait_for(served, 30)
        return bytes(writer.data)

    with caplog.at_level(logging.ERROR):
        out = asyncio.run(session())
    answers = [json.loads(x) for x in out.splitlines()]
    assert any(a.get("id") == 1 and "result" in a for a in answers), out[:500]
