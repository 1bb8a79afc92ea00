"""Coverage-guided targets: each parser of outside input as one function of bytes, for
atheris (libFuzzer, in Python) to drive, or hypothesis when atheris is not installed.

A target raises (an assertion, or the parser's own unexpected exception) when the input
breaks the rule: every input is read, or refused in words, and changes nothing it should not.
``python -m tests.fuzz`` runs each in a process of its own for a set time; one target alone:
``python -m tests.fuzz.targets NAME --seconds N``. Each target's ``setup`` imports what it
fuzzes, so that atheris instruments exactly the ``tether`` modules it loads."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

One = Callable[[bytes], None]


@dataclass(frozen=True)
class Target:
    name: str
    parser: str  # what it reads, for the table
    setup: Callable[[Path], tuple[One, list[bytes]]]  # in a scratch folder: the function, and seed inputs


TARGETS: dict[str, Target] = {}


def target(name: str, parser: str) -> Callable[[Callable[[Path], tuple[One, list[bytes]]]], Any]:
    def register(setup: Callable[[Path], tuple[One, list[bytes]]]) -> Any:
        TARGETS[name] = Target(name, parser, setup)
        return setup
    return register


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


# ---- the journal and the trace ---------------------------------------------------------------

@target("journal", "run journal: tether.store.files.journal.read_journal and tether.store.files.tail.JournalTail")
def _journal(scratch: Path) -> tuple[One, list[bytes]]:
    from tether.vocab.state import StateError, Status
    from tether.store.files.journal import read_journal as _read
    from tether.store.files.tail import JournalTail

    from tests.fuzz.test_journal import journal_of

    path = scratch / "journal.jsonl"

    def plain(state: Any) -> Any:
        """The state, but for the times a commit without them gets from the clock as it is read."""
        return None if state is None else {k: v for k, v in state.to_dict().items()
                                           if k not in ("created_at", "updated_at")}

    def one(data: bytes) -> None:
        path.write_bytes(data)
        try:
            loaded: Any = plain(_read(path)[0])
        except StateError:
            loaded = None
        with JournalTail(path) as tail:
            try:
                tail.read()
                followed = plain(tail.state)
            except StateError:
                followed = None
        assert loaded == followed, "the loader and the console's tail read the same bytes differently"

    seeds = [journal_of([([{"role": "user", "content": "hi"}], 3, Status.RUNNING, "a"),
                         ([{"role": "assistant", "content": None}], 4, Status.COMPLETED, None)])[0], b""]
    return one, seeds


@target("trace", "trace: read_trace, TraceWriter's recovery, TraceTail, tail_records, event_from_record")
def _trace(scratch: Path) -> tuple[One, list[bytes]]:
    from tether.vocab.events import RunStopped
    from tether.store.files.tail import TraceTail
    from tether.store.trace import event_from_record, tail_records
    from tether.store.trace import TraceWriter, read_trace

    path = scratch / "trace.jsonl"

    def one(data: bytes) -> None:
        path.write_bytes(data)
        for record in read_trace(path):
            event_from_record(record)
        TraceTail(path).read()
        TraceTail(path).backlog(limit=3)
        tail_records(path)
        complete = data[: data.rfind(b"\n") + 1]
        writer = TraceWriter(path)
        try:
            writer.write(RunStopped(run_id="r", status="completed", reason="", turns=1, cost_usd=0.0))
        finally:
            writer.close()
        after = path.read_bytes()
        assert after.startswith(complete), "a complete line was cut off"
        assert json.loads(after[len(complete):])["seq"] == writer.last_seq

    seeds = [b'{"seq":1,"kind":"run_started","run_id":"r"}\n{"seq":2,"kind":"run_stopped","run_id":"r","status":'
             b'"completed","reason":"","turns":1,"cost_usd":0.0}\n{"seq":3,"ki']
    return one, seeds


# ---- the agent file --------------------------------------------------------------------------

_IMPORTABLE = {"json", "os", "tether"}  # what a fuzzed reference may import (never antigravity)


@target("agent_file", "agent file: load_config, Config.agent, mcp_server, load_channels")
def _agent_file(scratch: Path) -> tuple[One, list[bytes]]:
    import importlib

    from tether.agents import agent as agents
    from tether.agents.config import ConfigError, load_config
    from tether.notify import load_channels

    def guarded_import(name: str, package: str | None = None) -> Any:
        if name.split(".")[0] not in _IMPORTABLE:
            raise ModuleNotFoundError(f"No module named {name!r} (not importable while fuzzing)", name=name)
        return importlib.import_module(name, package)

    guard = type("Guard", (), {"import_module": staticmethod(guarded_import)})
    path = scratch / "tether.toml"

    def one(data: bytes) -> None:
        # Guarded only while this input is read: the tests that share the process (pytest
        # runs the targets beside everything else) import their own modules by reference.
        agents.importlib = guard  # type: ignore[attr-defined]
        try:
            _read_agent_file(data)
        finally:
            agents.importlib = importlib  # type: ignore[attr-defined]

    def _read_agent_file(data: bytes) -> None:
        path.write_bytes(data)
        try:
            config = load_config(path)
            for name in config.names:
                try:
                    config.agent(name)
                except ConfigError:
                    pass
            for name in config.data.mcp:
                try:
                    config.mcp_server(name, where="fuzz")
                except ConfigError:
                    pass
        except ConfigError:
            pass
        try:
            load_channels(path)
        except ConfigError:
            pass

    seeds = [b'[agents.a]\nmodel = "m"\ntools = ["tether:read_file"]\nworkspace = "."\nmcp = ["s"]\n'
             b'decision_deadline = "10m"\n[mcp.s]\ncommand = "python"\nargs = ["-m", "x"]\n'
             b'[pricing.m]\ninput_per_million = 1.0\noutput_per_million = 2.0\n'
             b'[notify.phone]\nkind = "ntfy"\nurl = "https://ntfy.sh/topic"\nlinks = "bearer"\n',
             b'[agents.b]\nacp = ["./agent", "acp"]\nenv = {A = "${HOME}"}\ncancel_grace_s = 2.5\n']
    return one, seeds


# ---- tool arguments ----------------------------------------------------------------------------

@target("tool_args", "tool arguments: RunLoop._parse_args, check_args, FunctionTool._bind")
def _tool_args(scratch: Path) -> tuple[One, list[bytes]]:
    from tether.agents.tools.function import FunctionTool

    from tests.fuzz.test_tool_args import TOOLS, context, parse

    names = sorted(TOOLS)

    def one(data: bytes) -> None:
        if not data:
            return
        name = names[data[0] % len(names)]
        args, problem = parse(name, data[1:].decode("utf-8", "replace"))
        assert (problem is None) == bool(problem is None and isinstance(args, dict))
        tool = TOOLS[name]
        if problem is None and isinstance(tool, FunctionTool):
            tool._bind(args, context())  # the check and the call agree

    seeds = [b"\x00" + json.dumps({"n": 1, "name": "x"}).encode(),
             b"\x01" + json.dumps({"colour": "red", "where": {"street": "s"}, "points": [{"x": 1, "y": 2}]}).encode(),
             b"\x02" + json.dumps({"count": 3, "more": [1], "k": "v"}).encode(), b"\x05{\"path\": \"a.txt\"}"]
    return one, seeds


# ---- control requests ------------------------------------------------------------------------

@target("control", "control requests: control.jsonl (read_from) and the poke on the socket (_serve)")
def _control(scratch: Path) -> tuple[One, list[bytes]]:
    from tether.store.control import Kind
    from tether.store.files.control import read_from
    from tether.store.files.layout import CONTROL_FILE

    from tests.fuzz.test_control import _Writer, recording_server

    kinds = typing.get_args(Kind)
    server, _ = recording_server()
    loop = asyncio.new_event_loop()

    def one(data: bytes) -> None:
        (scratch / CONTROL_FILE).write_bytes(data)
        requests = read_from(scratch, 0)
        assert len(requests) == data.count(b"\n")
        assert all(r.kind in kinds for r in requests)
        reader = asyncio.StreamReader(loop=loop)
        reader.feed_data(data)
        reader.feed_eof()
        writer = _Writer()
        loop.run_until_complete(asyncio.wait_for(server._serve(reader, writer), 30))  # type: ignore[arg-type]
        reply = json.loads(bytes(writer.data))
        assert reply["words"]

    seeds = [b'{"kind":"stop","id":"a","text":"enough","by":"ana@host","ts":1.5}\n{"run_id":"r","request_id":"a"}\n',
             b'{"run_id": "r", "request_id": "x"}\n']
    return one, seeds


# ---- the provider's request parser -----------------------------------------------------------

@target("provider", "scripted provider: chat-completions and Messages request bodies, through the app")
def _provider(scratch: Path) -> tuple[One, list[bytes]]:
    import httpx

    from tether.demo.provider.app import RequestError, _parse_request, create_app

    app = create_app()
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://provider")

    def one(data: bytes) -> None:
        try:
            _parse_request(data)
        except RequestError:
            pass
        path = "/v1/messages" if data[:1] == b"M" else "/v1/chat/completions"
        body = data[1:] if data[:1] == b"M" else data
        response = loop.run_until_complete(asyncio.wait_for(client.post(path, content=body), 30))
        assert response.status_code in (200, 400, 404), (response.status_code, response.text[:200])

    seeds = [json.dumps({"model": "plan", "messages": [{"role": "user", "content": "go"}], "stream": True,
                         "stream_options": {"include_usage": True}, "max_tokens": 20}).encode(),
             json.dumps({"model": "destructive", "messages": [
                 {"role": "user", "content": "x"},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "c", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "c", "content": "a.txt"}]}).encode(),
             b"M" + json.dumps({"model": "plan", "max_tokens": 5, "system": "s", "messages": [
                 {"role": "user", "content": [{"type": "text", "text": "go"}]}]}).encode()]
    return one, seeds


# ---- ACP frames --------------------------------------------------------------------------------

@target("acp_frames", "ACP frames: CheckedTransport under acp's connection")
def _acp(scratch: Path) -> tuple[One, list[bytes]]:
    from tests.fuzz.test_acp_frames import _through

    loop = asyncio.new_event_loop()

    def one(data: bytes) -> None:
        got, seen, _ = loop.run_until_complete(_through(data.split(b"\n")[:50]))
        assert not isinstance(got, ConnectionError), "the connection was dropped"
        assert "probe" in seen, "a good message after the frames did not arrive"

    seeds = [b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}}\n'
             b'{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"path":"/x"}}\n'
             b'{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"no"}}']
    return one, seeds


# ---- notification links ----------------------------------------------------------------------

@target("links", "notification links: read_link and spend_link on any token, and on signed payloads")
def _links(scratch: Path) -> tuple[One, list[bytes]]:
    from tether.notify.links import LinkRefused, _b64, _sign, issue_link, read_link, spend_link
    from tether.notify.storage import storage_for
    from tether.store.files.store import RunStore

    store = RunStore(scratch / "runs")
    key = storage_for(store).key()

    def one(data: bytes) -> None:
        token = data.decode("utf-8", "surrogateescape")
        for check in (read_link, spend_link):
            try:
                check(store, token)
            except LinkRefused:
                pass
        body = _b64(data)
        try:
            read_link(store, f"{body}.{_sign(key, body)}")
        except LinkRefused:
            pass

    issued = issue_link(store, run_id="r", call_id="c", args_hash="h", action="approve")
    seeds = [issued.encode(), json.dumps({"r": "r", "c": "c", "h": "h", "a": "reject", "i": 1.0, "e": 9e9, "b": 1,
                                          "n": "x"}).encode()]
    return one, seeds


# ---- web forms ---------------------------------------------------------------------------------

_CONTENT_TYPES = ["application/x-www-form-urlencoded", "multipart/form-data; boundary=b", "multipart/form-data",
                  "text/plain", ""]
_PATHS = ["/decide", "/login", "/runs/{run}/stop", "/l/x.y", "/logout"]


@target("web_forms", "web forms: POST bodies to /login, /decide, /runs/ID/stop, /l/TOKEN, as an operator")
def _web(scratch: Path) -> tuple[One, list[bytes]]:
    from argon2 import PasswordHasher

    from tether.store.files.store import RunStore
    from tether.web import users

    from tests.web.conftest import csrf_of, logged_in, serving

    users._HASHER = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)  # type: ignore[attr-defined]
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    serving_ = serving(RunStore(scratch / "runs"), scratch)
    served = loop.run_until_complete(serving_.__anext__())
    ana = loop.run_until_complete(logged_in(served, "ana"))
    csrf = loop.run_until_complete(csrf_of(ana))
    current = [loop.run_until_complete(served.waiting_run())]  # a run that waits for a decision

    async def post(path: str, body: bytes, content_type: str) -> tuple[int, str]:
        headers = {"X-CSRF-Token": csrf, **({"Content-Type": content_type} if content_type else {})}
        async with ana.post(path, data=body, headers=headers, allow_redirects=False) as response:
            return response.status, await response.text(errors="replace")

    def one(data: bytes) -> None:
        from tether.vocab.state import NeedsApproval

        if len(data) < 2:
            return
        run_id = current[0]
        path = _PATHS[data[0] % len(_PATHS)].format(run=run_id)
        if path == "/logout":
            return  # it would end the session every other input uses
        body = data[2:].replace(b"RUN", run_id.encode())
        status, text = loop.run_until_complete(asyncio.wait_for(post(path, body, _CONTENT_TYPES[data[1] % 5]), 60))
        assert status < 500, (status, text[:300])
        if not isinstance(served.store.load(run_id).interruption, NeedsApproval):
            assert status < 300, f"run {run_id} changed, yet the answer was {status}: {text[:300]}"
            loop.run_until_complete(served.settled())
            current[0] = loop.run_until_complete(served.waiting_run())

    seeds = [b"\x00\x00run=RUN&call=call_1_0&verdict=reject&hash=x&reason=no",
             b"\x00\x01--b\r\nContent-Disposition: form-data; name=\"run\"\r\n\r\nRUN\r\n--b--\r\n",
             b"\x02\x00reason=stop", b"\x01\x00name=ana&password=x&csrf=y&next=//evil"]
    return one, seeds


# ---- running one target ------------------------------------------------------------------------

def _atheris(one: One, seeds: list[bytes], seconds: float, artifacts: Path) -> int:
    """libFuzzer's loop (exits the process): inputs, coverage and any crash go to stderr."""
    import atheris

    corpus = artifacts / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(seeds):
        (corpus / f"seed-{i}").write_bytes(seed)

    def guarded(data: bytes) -> None:
        one(data)

    atheris.Setup([sys.argv[0], f"-max_total_time={int(seconds)}", "-timeout=60", "-rss_limit_mb=3072",
                   "-max_len=65536", f"-artifact_prefix={artifacts}/", "-print_final_stats=1", str(corpus)],
                  guarded)
    atheris.Fuzz()
    return 0


class _TimeUp(Exception):
    pass


def _hypothesis(one: One, seeds: list[bytes], seconds: float) -> int:
    """The fallback without atheris: hypothesis drawing bytes (seeds, mutated seeds, any bytes)
    until the time is up, with no coverage to steer it."""
    from hypothesis import HealthCheck, Phase, given, settings, strategies as st

    deadline = time.monotonic() + seconds
    count = 0

    def mutated(seed_and_edits: tuple[bytes, list[tuple[int, bytes]]]) -> bytes:
        data, edits = seed_and_edits
        for at, chunk in edits:
            at %= len(data) + 1
            data = data[:at] + chunk + data[at + len(chunk) // 2:]
        return data

    inputs = st.one_of(st.sampled_from(seeds), st.binary(max_size=4096),
                       st.tuples(st.sampled_from(seeds), st.lists(st.tuples(st.integers(0, 1 << 16),
                                                                            st.binary(max_size=16)), max_size=4)
                                 ).map(mutated))

    @settings(max_examples=10**9, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(inputs)
    def run(data: bytes) -> None:
        nonlocal count
        if time.monotonic() > deadline:
            raise _TimeUp
        count += 1
        one(data)

    try:
        run()
    except _TimeUp:
        pass
    print(f"Done {count} runs in {int(seconds)} second(s)", file=sys.stderr, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(TARGETS))
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--engine", choices=["atheris", "hypothesis"], default="atheris")
    parser.add_argument("--artifacts", type=Path,
                        help="where a crashing input is written (default: a temporary folder)")
    args = parser.parse_args(argv)
    artifacts = args.artifacts or Path(tempfile.mkdtemp(prefix=f"tether-fuzz-{args.name}-"))
    artifacts.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"tether-fuzz-{args.name}-scratch-"))
    os.environ.setdefault("TETHER_HOME", str(scratch / "home"))
    try:
        if args.engine == "atheris":
            import atheris

            with atheris.instrument_imports(include=["tether"]):
                one, seeds = TARGETS[args.name].setup(scratch)
            return _atheris(one, seeds, args.seconds, artifacts)
        one, seeds = TARGETS[args.name].setup(scratch)
        return _hypothesis(one, seeds, args.seconds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
