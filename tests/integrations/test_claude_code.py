"""Claude Code under Tether (issue 29, item 4): the real CLI (``make agents`` pins it), headless
and offline, against the scripted provider's Anthropic Messages endpoint on loopback.

- the endpoint speaks what Claude Code parses (a probe: two Bash calls and an answer);
Without the CLI (no npm) the real-CLI tests skip with one reason; with ``CI`` set they fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tether.provider.anthropic import COMMANDS_DONE, COMMANDS_MODEL, COMMANDS_REFUSED, ReceivedRequest
from tether.provider.app import create_app
from tether.provider.server import running_app
from tests.acp import agents
from tests.acp.procs import alive_in

CAP_S = 120.0
"""A generous cap on one Claude Code session (it takes about a second): a hang fails, never waits."""


@dataclass
class Session:
    """One ``claude -p`` run: what it printed (stream-json) and what the endpoint received."""

    code: int
    lines: list[dict]
    stderr: str
    received: list[ReceivedRequest] = field(default_factory=list)

    @property
    def result(self) -> dict:
        return next((line for line in self.lines if line.get("type") == "result"), {})

    @property
    def session_id(self) -> str | None:
        return self.result.get("session_id")


@dataclass
class Place:
    """A project folder and a private HOME, beside an endpoint that records every request."""

    project: Path
    home: Path
    received: list[ReceivedRequest]
    base_url: str = ""


@pytest.fixture
async def place(tmp_path: Path) -> AsyncIterator[Place]:
    agents.require_claude()
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    received: list[ReceivedRequest] = []
    here = Place(project, home, received)
    async with running_app(create_app(record=received.append)) as url:
        here.base_url = url.removesuffix("/v1")
        yield here
    assert alive_in(project) == {}, "a process of the session was left behind"


def claude_env(place: Place, **extra: str) -> dict[str, str]:
    """Offline, headless, nothing of the operator's read or written (../shared/WAVE3.md)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(place.home), "LANG": "C.UTF-8",
           "ANTHROPIC_BASE_URL": place.base_url, "ANTHROPIC_API_KEY": "sk-scripted-offline",
           "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return {**env, **extra}


async def run_claude(place: Place, prompt: str, *args: str, env: dict[str, str] | None = None) -> Session:
    """``claude -p PROMPT --output-format stream-json --verbose`` in the project, its whole process
    group killed if it outlives the cap."""
    command = [str(agents.CLAUDE), "-p", prompt, "--output-format", "stream-json", "--verbose",
               "--model", COMMANDS_MODEL, *args]
    proc = await asyncio.create_subprocess_exec(*command, cwd=place.project, env=env or claude_env(place),
                                                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CAP_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
    lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    return Session(proc.returncode, lines, err.decode(errors="replace"), list(place.received))


def carries(request: ReceivedRequest, words: str) -> bool:
    """Whether ``words`` are in a ``tool_result`` of the request's last user message: what the
    model reads after a call was decided."""
    last = next(m for m in reversed(request.body["messages"]) if m.get("role") == "user")
    blocks = last["content"] if isinstance(last["content"], list) else []
    return any(words in json.dumps(b.get("content")) for b in blocks if b.get("type") == "tool_result")


# ---- the endpoint, without Claude Code ----------------------------------------------------


def commands_request(*messages: dict, stream: bool = False) -> dict:
    first = {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                         {"type": "text", "text": "Please.\nRun:\necho hi > out.txt\nls"}]}
    return {"model": COMMANDS_MODEL, "max_tokens": 1000, "stream": stream, "system": [{"type": "text", "text": "S"}],
            "tools": [{"name": "Bash", "description": "runs a command", "input_schema": {"type": "object"}}],
            "messages": [first, *messages]}


def tool_use(i: int, command: str) -> dict:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_scripted_{i:02d}", "name": "Bash",
                                              "input": {"command": command}}]}


def tool_result(i: int, content: str, error: bool = False) -> dict:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_scripted_{i:02d}",
                                         "content": content, "is_error": error}]}


async def test_the_messages_endpoint_scripts_claude_codes_bash_calls():
    received: list[ReceivedRequest] = []
    app = create_app(record=received.append)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://scripted") as client:
        assert (await client.head("/")).status_code == 200
        assert (await client.get("/")).json()["error"]["message"] == "Not Found: GET /"  # as it always was
        first = (await client.post("/v1/messages?beta=true", json=commands_request(),
                                   headers={"x-claude-code-session-id": "s-1"})).json()
        assert first["stop_reason"] == "tool_use" and first["usage"]["input_tokens"] > 0
        assert [(b["type"], b["name"], b["input"]["command"]) for b in first["content"]] == \
            [("tool_use", "Bash", "echo hi > out.txt")]
        done = (await client.post("/v1/messages", json=commands_request(
            tool_use(0, "echo hi > out.txt"), tool_result(0, ""), tool_use(1, "ls"), tool_result(1, "out.txt")))).json()
        assert done["content"] == [{"type": "text", "text": COMMANDS_DONE.format(n=2, output="out.txt")}]
        assert done["stop_reason"] == "end_turn"
        refused = (await client.post("/v1/messages", json=commands_request(
            tool_use(0, "echo hi > out.txt"), tool_result(0, "alice said no", error=True)))).json()
        assert refused["content"][0]["text"] == COMMANDS_REFUSED.format(reason="alice said no")
        unknown = await client.post("/v1/messages", json={**commands_request(), "model": "claude-opus"})
        assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"
        bad = await client.post("/v1/messages", json={"model": COMMANDS_MODEL, "messages": []})
        assert bad.status_code == 400 and bad.json()["type"] == "error"
    assert received[0].session_id == "s-1" and carries(received[2], "alice said no")
    assert not carries(received[1], "alice said no")


async def test_the_messages_endpoint_streams_in_anthropics_events():
    app = create_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://scripted") as client:
        reply = await client.post("/v1/messages", json=commands_request(stream=True))
    assert reply.headers["content-type"].startswith("text/event-stream")
    events = [(chunk.split("\n")[0].removeprefix("event: "), json.loads(chunk.split("\n")[1].removeprefix("data: ")))
              for chunk in reply.text.strip().split("\n\n")]
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    opened = events[2][1]["content_block"]
    assert (opened["type"], opened["name"], opened["input"]) == ("tool_use", "Bash", {})
    partial = "".join(d["delta"]["partial_json"] for n, d in events if n == "content_block_delta")
    assert json.loads(partial) == {"command": "echo hi > out.txt", "description": "Run step 1"}
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] > 0


# ---- the real CLI -------------------------------------------------------------------------


async def test_claude_code_runs_headless_and_offline_against_the_scripted_endpoint(place: Place):
    session = await run_claude(place, "Please do this.\nRun:\necho hi > out.txt\ncat out.txt", "--allowedTools", "Bash")
    assert session.code == 0, session.stderr
    assert session.result["result"] == COMMANDS_DONE.format(n=2, output="hi")
    assert (place.project / "out.txt").read_text() == "hi\n"
    assert len(session.received) == 3 and {r.session_id for r in session.received} == {session.session_id}
    assert all(r.body["stream"] for r in session.received)
