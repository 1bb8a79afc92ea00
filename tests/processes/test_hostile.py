"""Hostile input, end to end: what a model, a provider, a file or a tampered run dir sends.

The unit-level refusals live next to their code (tests/unit/test_tools.py, test_workspace.py,
test_client.py, test_loopback.py, test_loop.py, test_persistence.py, test_tui.py; the
campaign lists them in tests/campaign/hostile.py). Here each case goes through a whole
run or the CLI, and checks what is left afterwards: the workspace, the transcript, the
trace, the saved state, and what an operator's terminal would print.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tether.models.client import ModelClient
from tether.harness import Harness, Outcome
from tether.vocab.state import Policies, StateError, Status
from tether.store.files.layout import JOURNAL_FILE, TRACE_FILE
from tether.store.files.store import RunStore
from tether.store.trace import read_trace
from tether.demo.agents import DEMO
from tests.endpoints import call, completion, scripted_app, turns

SECRET = "sk-hostile-SECRET-0123456789abcdef"
OUTSIDE = "OUTSIDE-MARKER: this text lives outside the workspace"
AUTO_DELETE = Policies(auto_approve=["delete_file"])


def client_for(app: Any, api_key: str | None = None, **kw: Any) -> ModelClient:
    return ModelClient("http://hostile/v1", api_key, transport=httpx.ASGITransport(app=app), **kw)


async def run_with(tmp: Path, app: Any, *, policies: Policies | None = None, api_key: str | None = None,
                   **client_kw: Any) -> Outcome:
    async with Harness(tmp / "runs", tmp / "ws", client=client_for(app, api_key, **client_kw),
                       api_key=api_key, agent_sets=(DEMO,)) as harness:
        return await harness.run(harness.new_run("plan", "q", policies=policies).run_id)


def run_files(tmp: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in (tmp / "runs").rglob("*") if p.is_file())


def results(out: Outcome) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in out.state.messages if m.get("role") == "tool"}


def tether(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tether.tui.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


# ---- paths a model sends, through the loop (delete_file auto-approved) ------------

@pytest.fixture
def surroundings(tmp_path: Path) -> Path:
    """A workspace ``ws`` with the sample, and things next to it worth stealing or deleting:
    a file, a sibling ``ws2`` whose name starts with the workspace's, a directory that a
    symlink inside the workspace points to, and a symlink to the outside file."""
    (tmp_path / "ws").mkdir()
    Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,))  # fills the sample
    (tmp_path / "outside.txt").write_text(OUTSIDE)
    (tmp_path / "ws2").mkdir()
    (tmp_path / "ws2" / "victim.txt").write_text(OUTSIDE)
    (tmp_path / "outdir").mkdir()
    (tmp_path / "outdir" / "victim.txt").write_text(OUTSIDE)
    (tmp_path / "ws" / "link.txt").symlink_to(tmp_path / "outside.txt")
    (tmp_path / "ws" / "linkdir").symlink_to(tmp_path / "outdir")
    return tmp_path


def _outside_files(tmp: Path) -> dict[str, str]:
    return {str(p.relative_to(tmp)): p.read_text() for p in tmp.rglob("*")
            if p.is_file() and "ws" != p.relative_to(tmp).parts[0] and "runs" != p.relative_to(tmp).parts[0]}


HOSTILE_PATHS = [
    pytest.param("../outside.txt", id="dotdot"),
    pytest.param("{tmp}/outside.txt", id="absolute"),
    pytest.param("../ws2/victim.txt", id="sibling-prefix-dir"),
    pytest.param("link.txt", id="symlink-leaving"),
    pytest.param("linkdir/victim.txt", id="file-under-symlinked-dir"),
    pytest.param("linkdir/new.txt", id="new-file-under-symlinked-dir"),
    pytest.param("notes.txt\x00../outside.txt", id="nul-byte"),
    pytest.param("a/" * 2100 + "notes.txt", id="very-long-path"),
]


@pytest.mark.parametrize("tool", ["read_file", "delete_file"])
@pytest.mark.parametrize("path", HOSTILE_PATHS)
async def test_hostile_path_from_the_model_is_refused_in_words(surroundings: Path, tool: str, path: str):
    tmp = surroundings
    before_outside, before_ws = _outside_files(tmp), sorted(os.listdir(tmp / "ws"))
    app = turns(completion(tool_calls=[call(tool, {"path": path.replace("{tmp}", str(tmp))}, "h")]),
                completion("done"))
    out = await run_with(tmp, app, policies=AUTO_DELETE)
    assert out.state.status is Status.COMPLETED
    assert results(out)["h"].startswith("Error: path refused: ")
    assert _outside_files(tmp) == before_outside and sorted(os.listdir(tmp / "ws")) == before_ws
    assert OUTSIDE not in run_files(tmp)  # nothing from outside reached the transcript or the trace


async def test_fifo_in_the_workspace_is_refused_without_hanging(tmp_path: Path):
    (tmp_path / "ws").mkdir()
    os.mkfifo(tmp_path / "ws" / "pipe.log")  # opening it for reading would block forever
    app = turns(completion(tool_calls=[call("read_file", {"path": "pipe.log"}, "f")]), completion("done"))
    out = await run_with(tmp_path, app)
    assert results(out)["f"] == "Error: pipe.log is not a regular file"


# ---- calls a model sends ----------------------------------------------------------

async def test_tool_name_with_control_characters_is_quoted_escaped(tmp_path: Path):
    app = turns(completion(tool_calls=[call("read_file\x1b[2J\r[red]", {}, "c")]), completion("done"))
    out = await run_with(tmp_path, app)
    text = results(out)["c"]
    assert text.startswith("Error: unknown tool ") and "\x1b" not in text and "\r" not in text


async def test_arguments_beyond_the_schema_are_refused(tmp_path: Path):
    app = turns(completion(tool_calls=[call("delete_file", {"path": "notes.txt", "force": True}, "c")]),
                completion("done"))
    out = await run_with(tmp_path, app, policies=AUTO_DELETE)
    assert "invalid arguments for delete_file" in results(out)["c"]
    assert (tmp_path / "ws" / "notes.txt").exists() and out.tool_runs == []


async def test_provider_reusing_a_call_id_across_turns_gets_both_writes_done(tmp_path: Path):
    """Two writes in two turns under one call id: the idempotency key (run id + call id)
    must not make the second one a replay of the first, or a refusal."""
    app = turns(completion(tool_calls=[call("delete_file", {"path": "notes.txt"}, "same")]),
                completion(tool_calls=[call("delete_file", {"path": "errors.log"}, "same")]),
                completion("done"))
    out = await run_with(tmp_path, app, policies=AUTO_DELETE)
    assert out.state.status is Status.COMPLETED
    assert not (tmp_path / "ws" / "notes.txt").exists()
    assert not (tmp_path / "ws" / "errors.log").exists(), [m.get("content") for m in out.state.messages[-3:]]


async def test_provider_sending_no_call_ids_gets_both_writes_done(tmp_path: Path):
    """Servers that omit tool-call ids (some local ones do) must not collide either."""
    def without_ids(reply: dict[str, Any]) -> dict[str, Any]:
        for c in reply["choices"][0]["message"]["tool_calls"] or ():
            del c["id"]
        return reply

    app = turns(without_ids(completion(tool_calls=[call("delete_file", {"path": "notes.txt"}, "x")])),
                without_ids(completion(tool_calls=[call("delete_file", {"path": "errors.log"}, "x")])),
                completion("done"))
    out = await run_with(tmp_path, app, policies=AUTO_DELETE)
    ids = [c["id"] for m in out.state.messages for c in m.get("tool_calls") or ()]
    assert len(set(ids)) == 2, ids
    assert not (tmp_path / "ws" / "notes.txt").exists() and not (tmp_path / "ws" / "errors.log").exists()


async def test_two_calls_sharing_an_id_in_one_reply_each_get_a_result(tmp_path: Path):
    """Whatever the harness decides about a call goes into the transcript: a second call
    hidden behind the first one's id must not vanish without a word."""
    app = turns(completion(tool_calls=[call("list_files", {}, "dup"), call("read_file", {"path": "notes.txt"}, "dup")]),
                completion("done"))
    out = await run_with(tmp_path, app)
    calls = out.state.messages[2]["tool_calls"]
    answered = [m for m in out.state.messages if m.get("role") == "tool"]
    assert len(answered) == len(calls) == 2
    assert len({c["id"] for c in calls}) == 2, "two results under one id cannot be told apart"
    assert {m["tool_call_id"] for m in answered} == {c["id"] for c in calls}


# ---- tool output: newlines, escapes and separators -------------------------------

NASTY_OUTPUT = "line\u2028sep\u2029para\x85nel\x1b[2J\x1b]52;c;aGk=\x07\r[bold red]x[/]\n"


async def _nasty_run(tmp_path: Path) -> Outcome:
    (tmp_path / "ws").mkdir()
    Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,))
    (tmp_path / "ws" / "notes.txt").write_text(NASTY_OUTPUT)
    app = turns(completion(tool_calls=[call("read_file", {"path": "notes.txt"}, "n")]), completion("done"))
    return await run_with(tmp_path, app)


async def test_tool_output_is_kept_verbatim_and_the_trace_has_no_raw_control_characters(tmp_path: Path):
    out = await _nasty_run(tmp_path)
    assert results(out)["n"] == NASTY_OUTPUT  # the model reads exactly what the file says
    raw = (tmp_path / "runs" / out.state.run_id / TRACE_FILE).read_bytes()
    assert b"\x1b" not in raw and b"\r" not in raw and b"\x07" not in raw  # `cat trace.jsonl` is safe
    assert all(json.loads(line) for line in raw.split(b"\n") if line)


async def test_trace_lines_survive_unicode_line_separators(tmp_path: Path):
    """U+2028, U+2029 and NEL are line breaks to ``str.splitlines`` (and to many log tools):
    written raw, one event reads as three broken lines."""
    out = await _nasty_run(tmp_path)
    text = (tmp_path / "runs" / out.state.run_id / TRACE_FILE).read_text(encoding="utf-8")
    assert [json.loads(line)["seq"] for line in text.splitlines()] == list(range(1, len(text.split("\n"))))


async def test_tether_show_does_not_replay_escape_sequences_to_the_terminal(tmp_path: Path):
    out = await _nasty_run(tmp_path)
    shown = tether("show", out.state.run_id, "--runs-dir", str(tmp_path / "runs"), "--workspace", str(tmp_path / "ws"))
    assert shown.returncode == 0
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout and "\r" not in shown.stdout


# ---- secrets -----------------------------------------------------------------------

def _failing(status: int, message: str) -> Starlette:
    async def fail(request: Request) -> Response:
        return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status_code=status)

    return Starlette(routes=[Route("/v1/chat/completions", fail, methods=["POST"])])


@pytest.mark.parametrize("status", [400, 401, 403])
async def test_api_key_in_a_4xx_error_body_reaches_neither_trace_nor_state(tmp_path: Path, status: int):
    out = await run_with(tmp_path, _failing(status, f"Incorrect API key provided: {SECRET}. Bearer {SECRET}"),
                         api_key=SECRET)
    assert out.state.status is Status.FAILED and "[redacted]" in out.state.error
    assert SECRET not in run_files(tmp_path) and SECRET not in out.state.error


async def test_api_key_in_5xx_bodies_is_redacted_from_every_retry_notice(tmp_path: Path):
    attempts = {"n": 0}

    def flaky(t: int, request: Request, body: dict) -> Any:
        return completion("done")

    inner = scripted_app(flaky)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        attempts["n"] += 1
        target = _failing(503, f"upstream rejected key {SECRET}") if attempts["n"] <= 2 else inner
        await target(scope, receive, send)

    out = await run_with(tmp_path, app, api_key=SECRET, backoff_base_s=0.001)
    assert out.state.status is Status.COMPLETED
    retries = [r for r in read_trace(tmp_path / "runs" / out.state.run_id / TRACE_FILE) if r["kind"] == "provider_retry"]
    assert len(retries) == 2 and all("[redacted]" in r["reason"] for r in retries)
    assert SECRET not in run_files(tmp_path)


async def test_credentials_in_the_base_url_are_not_saved(tmp_path: Path):
    """``http://user:KEY@host/v1`` is how some gateways take a key; the saved run must not hold it."""
    async with Harness(tmp_path / "runs", tmp_path / "ws", base_url=f"http://user:{SECRET}@127.0.0.1:9/v1",
                       client=client_for(turns(completion("done"))), agent_sets=(DEMO,)) as harness:
        await harness.run(harness.new_run("plan", "q").run_id)
    assert SECRET not in run_files(tmp_path)


# ---- a tampered or damaged run dir ---------------------------------------------------

async def _saved_run(tmp_path: Path) -> tuple[RunStore, str]:
    out = await run_with(tmp_path, turns(completion(tool_calls=[call("list_files", {}, "l")]), completion("done")))
    return RunStore(tmp_path / "runs"), out.state.run_id


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        pytest.param(lambda d: _edit_line(d, -1, b"[1, 2, 3]\n"), "corrupt journal", id="commit-not-an-object"),
        pytest.param(lambda d: _edit_commit(d, limits="lots"), "does not match the schema", id="state-wrong-types"),
        pytest.param(lambda d: _edit_commit(d, message_count=99), "the commit says 99",
                     id="commit-counts-more-messages"),
        pytest.param(lambda d: (d / JOURNAL_FILE).write_bytes(b""), "no committed state", id="journal-empty"),
        pytest.param(lambda d: _edit_line(d, 1, b"{not json\n"), "corrupt journal", id="committed-line-corrupt"),
    ],
)
async def test_damaged_run_dir_is_refused_in_words_and_left_alone(tmp_path: Path, damage: Any, words: str):
    store, run_id = await _saved_run(tmp_path)
    directory = store.run_dir(run_id)
    damage(directory)
    before = {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}
    with pytest.raises(StateError, match=words):
        store.load(run_id)
    resumed = tether("resume", run_id, "--runs-dir", str(tmp_path / "runs"), "--workspace", str(tmp_path / "ws"))
    assert resumed.returncode == 2 and words in resumed.stderr and "Traceback" not in resumed.stderr
    assert {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()} == before


def _edit_line(directory: Path, index: int, line: bytes) -> None:
    lines = (directory / JOURNAL_FILE).read_bytes().splitlines(keepends=True)
    lines[index] = line
    (directory / JOURNAL_FILE).write_bytes(b"".join(lines))


def _edit_commit(directory: Path, **fields: Any) -> None:
    """Change fields of the journal's last commit (the saved state)."""
    lines = (directory / JOURNAL_FILE).read_bytes().splitlines(keepends=True)
    record = json.loads(lines[-1])
    record["commit"].update(fields)
    lines[-1] = json.dumps(record).encode() + b"\n"
    (directory / JOURNAL_FILE).write_bytes(b"".join(lines))


async def test_starting_a_run_under_an_existing_id_leaves_it_untouched(tmp_path: Path):
    store, run_id = await _saved_run(tmp_path)
    before = (store.run_dir(run_id) / JOURNAL_FILE).read_bytes()
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as harness:
        with pytest.raises(StateError, match="already exists"):
            harness.new_run("plan", run_id=run_id)
    assert (store.run_dir(run_id) / JOURNAL_FILE).read_bytes() == before


# ---- the trace ----------------------------------------------------------------------

@pytest.mark.parametrize("damage", [b'{"kind": "turn", "run_id": "x", "seq": 9', b"garbage that is not json\n"],
                         ids=["torn-last-line", "garbage-last-line"])
async def test_a_damaged_trace_tail_is_cut_or_skipped_and_seq_continues(tmp_path: Path, damage: bytes):
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as harness:
        state = harness.new_run("runaway", limits=None)
        await harness.run(state.run_id, max_turns=1)
        trace = tmp_path / "runs" / state.run_id / TRACE_FILE
        last = max(r["seq"] for r in read_trace(trace))
        with open(trace, "ab") as f:
            f.write(damage)
        await harness.run(state.run_id, max_turns=2)
    records = list(read_trace(trace))
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert records[last]["kind"] == "run_started" and records[last]["resumed"] is True
    lines = trace.read_bytes().split(b"\n")
    assert all(json.loads(line) for line in lines if line and line != damage.rstrip(b"\n"))
