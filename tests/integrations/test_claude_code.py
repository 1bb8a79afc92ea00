"""Claude Code under Tether (issue 29, item 4): the real CLI (``make agents`` pins it), headless
and offline, against the scripted provider's Anthropic Messages endpoint on loopback, with the
hooks ``tether hook claude-code --install`` wrote:

- the endpoint speaks what Claude Code parses (a probe: two Bash calls and an answer);
- a Bash call denied from ``tether reject`` (another process): the next request carries the words;
- one approved from a Pilot console;
- a Stop made while no hook holds the run ends the session at its next hook (after the tool);
- a Stop while a call waits denies it at once, in the operator's words;
- a decision deadline denies by itself, with the call allowed by Claude Code's own list
  (a hook that timed out would have let it run).

Every wait is on a condition under a generous cap; nothing asserts on timing. Without the CLI
(no npm) the real-CLI tests skip with one reason; with ``CI`` set they fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tether.approvals import Rule
from tether.integrations import claude_code
from tether.demo.provider.anthropic import COMMANDS_DONE, COMMANDS_MODEL, COMMANDS_REFUSED, ReceivedRequest
from tether.demo.provider.app import create_app
from tether.demo.provider.server import running_app
from tether.vocab.state import Cancelled, NeedsApproval, RunState, Status
from tether.store.files.store import RunStore
from tests.acp import installed as agents
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
    pid: int = 0

    @property
    def result(self) -> dict:
        return next((line for line in self.lines if line.get("type") == "result"), {})

    @property
    def session_id(self) -> str | None:
        return self.result.get("session_id")


@dataclass
class Place:
    """A project folder, a private HOME and a run store, beside an endpoint that records every
    request; the session's id is chosen here, so its run's id is known before it starts."""

    project: Path
    home: Path
    runs: Path
    received: list[ReceivedRequest]
    base_url: str = ""
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def run_id(self) -> str:
        return claude_code.run_id_of(self.session_id)

    def state(self) -> RunState | None:
        store = RunStore(self.runs)
        return store.load(self.run_id) if store.exists(self.run_id) else None


@pytest.fixture
async def place(tmp_path: Path) -> AsyncIterator[Place]:
    agents.require_claude()
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    received: list[ReceivedRequest] = []
    here = Place(project, home, tmp_path / "runs", received)
    async with running_app(create_app(record=received.append)) as url:
        here.base_url = url.removesuffix("/v1")
        yield here
    # SessionEnd's hook ends the run from a detached process of its own: it is gone once done.
    await until(lambda: alive_in(project) == {}, "every process of the session to be gone")


def claude_env(place: Place, **extra: str) -> dict[str, str]:
    """Offline, headless, nothing of the operator's read or written (docs/integrations.md, "Claude Code")."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(place.home), "LANG": "C.UTF-8",
           "ANTHROPIC_BASE_URL": place.base_url, "ANTHROPIC_API_KEY": "sk-scripted-offline",
           "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return {**env, **extra}


async def until(predicate, what: str, session: asyncio.Task | None = None, cap: float = CAP_S):
    """Wait for ``predicate()`` to be true (returned); fail after the cap, or as soon as the
    Claude Code session ended without it."""
    deadline = time.monotonic() + cap
    while True:
        value = predicate()
        if value:
            return value
        if session is not None and session.done():
            done = session.result()
            raise AssertionError(f"the session ended before {what}: {done.code} {done.result} {done.stderr[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {cap:g} s waiting for {what}")
        await asyncio.sleep(0.05)


def install(place: Place, *options: str) -> dict:
    """``tether hook claude-code --install PROJECT`` with the test's store: the settings it wrote."""
    assert claude_code.main(["--install", str(place.project), "--store", str(place.runs), *options]) == 0
    return json.loads((place.project / ".claude" / "settings.json").read_text())


async def tether_cli(*args: str) -> tuple[int, str]:
    """A ``tether`` command in a process of its own, as an operator would type it."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), CAP_S)
    return proc.returncode, out.decode()


async def waiting_call(place: Place, session: asyncio.Task) -> NeedsApproval:
    state = await until(lambda: (s := place.state()) is not None and isinstance(s.interruption, NeedsApproval) and s,
                        "a call waiting for a decision", session)
    return state.interruption


async def ended_run(place: Place) -> RunState:
    """The run once its session's last hook ended it (SessionEnd's, detached, for a completed one)."""
    return await until(lambda: (s := place.state()) is not None and s.status is not Status.RUNNING and s,
                       "the run to end")


async def run_claude(place: Place, prompt: str, *args: str, env: dict[str, str] | None = None) -> Session:
    """``claude -p PROMPT --output-format stream-json --verbose`` in the project, its whole process
    group killed if it outlives the cap."""
    command = [str(agents.CLAUDE), "-p", prompt, "--output-format", "stream-json", "--verbose",
               "--model", COMMANDS_MODEL, "--session-id", place.session_id, *args]
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
    return Session(proc.returncode, lines, err.decode(errors="replace"), list(place.received), proc.pid)


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


async def test_a_bash_call_denied_from_tether_reject_reaches_the_model_in_its_words(place: Place):
    settings = install(place)
    session = asyncio.create_task(run_claude(place, "Run:\necho hi > out.txt"))
    waiting = await waiting_call(place, session)
    assert (waiting.tool_name, json.loads(waiting.args)["command"]) == ("Bash", "echo hi > out.txt")
    code, said = await tether_cli("reject", place.run_id, "--reason", "write to notes.md instead", "--as", "alice",
                                  "--runs-dir", str(place.runs))
    assert code == 0, said
    done = await session
    words = "The operator alice declined this call: write to notes.md instead. Nothing was done."
    assert done.code == 0, done.stderr
    assert carries(done.received[-1], words), "the next request carries the operator's words"
    assert done.result["result"] == COMMANDS_REFUSED.format(reason=words)
    assert not (place.project / "out.txt").exists()
    state = await ended_run(place)
    assert state.status is Status.COMPLETED and state.answer == done.result["result"]
    decision = state.approvals[waiting.call_id]
    assert (decision.verdict, decision.by) == ("rejected", "alice")
    assert state.turns == 2 and state.prompt_tokens > 0  # each model call's usage, from the transcript
    assert state.agent.spec["pid"] == done.pid  # Claude Code's process, not a hook's
    assert settings["hooks"]["PreToolUse"][0]["matcher"] == claude_code.DEFAULT_MATCHER


async def test_a_bash_call_approved_from_a_console_runs(place: Place):
    from tests.support import SIZE, finish, make_app, open_armed, wait_for
    from tether.tui.screens.decision import ApproveDialog

    install(place)
    app = make_app(place.runs.parent, operator="bob")
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        session = asyncio.create_task(run_claude(place, "Run:\necho hi > out.txt\ncat out.txt"))
        await wait_for(pilot, lambda: [p.run_id for p in app.pending_approvals()] == [place.run_id],
                       "the session's call to wait in the console", CAP_S)
        app.select(place.run_id)
        await open_armed(pilot, app, "a", ApproveDialog)
        await pilot.press(*"looks safe")
        await pilot.press("enter")
        await wait_for(pilot, lambda: [p.run_id for p in app.pending_approvals()] == [place.run_id],
                       "the second call to wait", CAP_S)
        await open_armed(pilot, app, "a", ApproveDialog)
        await pilot.press("enter")
        done = await asyncio.wait_for(session, CAP_S)
        await finish(pilot, app)
    assert done.code == 0, done.stderr
    assert done.result["result"] == COMMANDS_DONE.format(n=2, output="hi")
    assert (place.project / "out.txt").read_text() == "hi\n"
    state = await ended_run(place)
    approved = list(state.approvals.values())
    assert [(d.verdict, d.by, d.text) for d in approved] == [("approved", "bob", "looks safe"), ("approved", "bob", "")]
    assert state.status is Status.COMPLETED and state.answer == done.result["result"]
    results = [m["content"] for m in state.messages if m["role"] == "tool"]
    assert results == ["(no output)", "hi"]  # each call's result, from PostToolUse


async def test_a_stop_made_between_hooks_ends_the_session_at_its_next_hook(place: Place):
    RunStore(place.runs).rule_add(Rule("allow", "Bash", "the tests' shell", "alice", source="program"))
    install(place)
    gate = place.project / "go"
    # The wait is capped (2 minutes): a test killed before it opens the gate leaves no shell behind.
    prompt = (f"Run:\necho one >> steps.txt; i=0; while [ ! -e {gate} ] && [ $i -lt 2400 ]; do i=$((i+1)); "
              f"sleep 0.05; done\necho two >> steps.txt")
    session = asyncio.create_task(run_claude(place, prompt))
    await until(lambda: (place.project / "steps.txt").exists(), "the first command to run", session)
    # No hook runs now (the command does): the run is live while Claude Code's process lives.
    summary = RunStore(place.runs).summary(place.run_id)
    assert (summary.status, summary.liveness) == ("running", "running") and summary.owner.kept
    code, said = await tether_cli("runs", "--runs-dir", str(place.runs))
    assert "Stop lands at its next hook" in said and "orphaned" not in said, said
    code, said = await tether_cli("stop", place.run_id, "--reason", "wrong branch", "--as", "carol",
                                  "--runs-dir", str(place.runs))
    assert code == 1 and "is recorded and lands at its next hook" in said, said  # the next hook takes it
    gate.touch()
    done = await session
    assert summary.owner.pid == done.pid  # Claude Code's own process kept the run live
    assert (place.project / "steps.txt").read_text() == "one\n"  # the second command never ran
    assert len(done.received) == 1, "the session asked the model nothing after the Stop"
    state = await ended_run(place)
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled("wrong branch", "carol")
    assert done.result["terminal_reason"] == "hook_stopped"  # continue: false, at PostToolUse
    # The call ran and Claude Code received its result: the transcript has it (issue 37, item 18).
    assert [m["content"] for m in state.messages if m["role"] == "tool"] == ["(no output)"], state.messages


async def test_a_stop_while_a_call_waits_denies_it_in_the_operators_words(place: Place):
    install(place)
    session = asyncio.create_task(run_claude(place, "Run:\necho hi > out.txt"))
    await waiting_call(place, session)
    code, said = await tether_cli("stop", place.run_id, "--reason", "not today", "--as", "carol",
                                  "--runs-dir", str(place.runs))
    assert code == 0, said
    done = await session
    words = f"The operator carol stopped this session in Tether (run {place.run_id}): not today. The call was not run."
    assert carries(done.received[-1], words)
    assert not (place.project / "out.txt").exists()
    state = await ended_run(place)
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled("not today", "carol")


async def test_a_decision_deadline_denies_rather_than_letting_the_hook_time_out(place: Place):
    settings = install(place, "--deadline", "2")
    (pre,) = settings["hooks"]["PreToolUse"]
    assert pre["hooks"][0]["timeout"] > 2  # Claude Code's timeout outlasts Tether's deadline
    # Claude Code's own list allows Bash: a decision dropped by a timeout would let the call run.
    session = asyncio.create_task(run_claude(place, "Run:\necho hi > out.txt", "--allowedTools", "Bash"))
    done = await session
    assert not (place.project / "out.txt").exists()
    state = await ended_run(place)
    (decision,) = state.approvals.values()
    assert (decision.verdict, decision.by) == ("rejected", "deadline")
    assert carries(done.received[-1], "the call was declined. Nothing was done.")
    assert done.result["result"].startswith(COMMANDS_REFUSED.format(reason="No decision within "))


# ---- the hooks without Claude Code ---------------------------------------------------------


def test_install_merges_into_the_projects_settings_and_twice_is_once(tmp_path: Path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {"type": "command", "command": "notify-send done"}
    settings.write_text(json.dumps({"model": "opus", "permissions": {"allow": ["Read"]},
                                    "hooks": {"Stop": [{"hooks": [theirs]}],
                                              "PreToolUse": [{"matcher": "Bash", "hooks": [theirs]}]}}))
    policy = claude_code.Policy(store=str(tmp_path / "runs"), deadline_s=90, matcher="Bash|Write")
    claude_code.install(tmp_path, policy)
    once = settings.read_text()
    claude_code.install(tmp_path, policy)
    assert settings.read_text() == once
    written = json.loads(once)
    assert written["model"] == "opus" and written["permissions"] == {"allow": ["Read"]}
    assert set(written["hooks"]) == set(claude_code.EVENTS)
    assert written["hooks"]["Stop"][0] == {"hooks": [theirs]}  # theirs first, kept as they were
    (_, pre) = written["hooks"]["PreToolUse"]
    (hook,) = pre["hooks"]
    assert pre["matcher"] == "Bash|Write" and hook["timeout"] == 90 + claude_code.TIMEOUT_MARGIN_S
    assert hook["command"].split()[1:] == ["-m", claude_code.MODULE, "--store", str(tmp_path / "runs"),
                                           "--deadline", "90"]
    assert written["hooks"]["PostToolUse"][0]["matcher"] == "*"


def test_install_refuses_what_it_would_break_and_writes_nothing(tmp_path: Path, capsys):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{not json")
    assert claude_code.main(["--install", str(tmp_path)]) == 2
    assert "is not JSON" in capsys.readouterr().err and settings.read_text() == "{not json"
    assert claude_code.main(["--install", str(tmp_path), "--store", "postgresql://tether:s3cret@db/runs"]) == 2
    assert "password" in capsys.readouterr().err
    assert claude_code.main(["--install", str(tmp_path), "--deadline", "0"]) == 2
    assert claude_code.main(["--install", str(tmp_path), "--local"]) == 0
    assert json.loads((tmp_path / ".claude" / "settings.local.json").read_text())["hooks"]["SessionEnd"]


def transcript(path: Path, *calls: tuple[str, int, int, str]) -> str:
    """A Claude Code transcript holding these model calls (id, input and output tokens, text)."""
    lines = [{"type": "user", "message": {"role": "user", "content": "hello"}}]
    for message_id, prompt, completion, text in calls:
        lines.append({"type": "assistant", "message": {
            "id": message_id, "model": "claude-sonnet-4-5", "role": "assistant", "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": prompt, "output_tokens": completion, "cache_read_input_tokens": 0}}})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return str(path)


def answer(capsys, runs: Path, event: str, *options: str, **payload) -> tuple[int, dict | None]:
    body = {"session_id": "s-1", "cwd": "/tmp", "hook_event_name": event, "transcript_path": "", **payload}
    policy = claude_code._policy(claude_code._parser().parse_args(["--store", str(runs), *options]))
    code = claude_code.hook(json.dumps(body).encode(), policy, detached=True)
    out = capsys.readouterr().out.strip()
    return code, json.loads(out) if out else None


def test_usage_from_the_transcript_ends_the_run_at_its_budget_and_stops_the_session(tmp_path: Path, capsys):
    runs = tmp_path / "runs"
    path = tmp_path / "t.jsonl"
    assert answer(capsys, runs, "SessionStart", "--budget", "0.01", source="startup") == (0, None)
    assert answer(capsys, runs, "UserPromptSubmit", prompt="tidy up") == (0, None)
    transcript(path, ("m1", 1000, 10, "Let me look."))
    bash = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t1"}
    assert answer(capsys, runs, "PostToolUse", transcript_path=str(path), tool_response={"stdout": "a.txt"},
                  **bash) == (0, None)
    state = RunStore(runs).load("claude-s-1")
    assert state.agent.spec["program"] == "claude-code" and state.agent.spec["session_id"] == "s-1"
    assert state.agent.spec["host"]
    assert state.turns == 1 and state.prompt_tokens == 1000 and state.model == "claude-sonnet-4-5"
    assert [m["role"] for m in state.messages] == ["user", "assistant", "assistant", "tool"]
    assert state.messages[1]["content"] == "Let me look." and state.messages[3]["content"] == "a.txt"
    transcript(path, ("m1", 1000, 10, "Let me look."), ("m2", 5_000_000, 10, "Now delete."))
    code, said = answer(capsys, runs, "PreToolUse", transcript_path=str(path), **{**bash, "tool_use_id": "t2"})
    decision = said["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert decision["permissionDecisionReason"].startswith("Tether ended this session's run claude-s-1: the budget")
    assert RunStore(runs).load("claude-s-1").status is Status.BUDGET_EXCEEDED
    code, said = answer(capsys, runs, "UserPromptSubmit", prompt="go on")
    assert said["continue"] is False and "the budget of $0.0100 is spent" in said["stopReason"]
    assert answer(capsys, runs, "SessionEnd", reason="other") == (0, None)
    assert RunStore(runs).load("claude-s-1").status is Status.BUDGET_EXCEEDED  # the end stays the budget's


def test_a_pre_tool_use_that_cannot_reach_the_store_denies(tmp_path: Path, capsys):
    (tmp_path / "runs").write_text("not a folder")
    code, said = answer(capsys, tmp_path / "runs", "PreToolUse", tool_name="Bash", tool_input={"command": "ls"},
                        tool_use_id="t1")
    assert code == 0 and said["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert said["hookSpecificOutput"]["permissionDecisionReason"].startswith("Tether could not put this call")
    assert answer(capsys, tmp_path / "runs", "Stop")[0] == 1  # a report that fails: said, never blocking


def test_a_hook_whose_command_is_wrong_denies_a_call_and_never_blocks_a_stop(tmp_path: Path, capsys, monkeypatch):
    def run(event: str, *argv: str) -> tuple[int, str, str]:
        body = json.dumps({"session_id": "s-1", "hook_event_name": event, "tool_name": "Bash", "tool_use_id": "t"})
        monkeypatch.setattr(sys, "stdin", type("In", (), {"buffer": io.BytesIO(body.encode())})())
        code = claude_code.main(list(argv))
        said = capsys.readouterr()
        return code, said.out, said.err

    code, out, _ = run("PreToolUse", "--deadline", "soon")
    assert code == 0 and json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "the hook's command is wrong" in out
    code, out, err = run("Stop", "--no-such-option")
    assert code == 1 and out == "" and "unrecognized arguments: --no-such-option" in err


async def test_a_call_approved_with_edited_arguments_runs_with_them(place: Place):
    install(place)
    session = asyncio.create_task(run_claude(place, "Run:\necho hi > out.txt"))
    waiting = await waiting_call(place, session)
    edited = {"command": "echo edited > out.txt", "description": "Run step 1"}
    # Claude Code's hooks carry no schema of its tools: the edit cannot be checked, and is said so (issue 37).
    code, said = await tether_cli("approve", place.run_id, "--args", json.dumps(edited), "--as", "dana",
                                  "--runs-dir", str(place.runs))
    assert code == 2 and "did not report the schema of Bash's arguments" in said and "--unchecked" in said, said
    code, said = await tether_cli("approve", place.run_id, "--args", json.dumps(edited), "--unchecked", "--as", "dana",
                                  "--runs-dir", str(place.runs))
    assert code == 0, said
    done = await session
    assert done.code == 0, done.stderr
    assert (place.project / "out.txt").read_text() == "edited\n"  # Claude Code ran the operator's arguments
    state = await ended_run(place)
    assert json.loads(state.approvals[waiting.call_id].args) == edited


def test_a_hook_killed_while_its_call_waits_leaves_the_session_going(tmp_path: Path, capsys):
    runs = tmp_path / "runs"
    assert answer(capsys, runs, "SessionStart", source="startup") == (0, None)
    body = {"session_id": "s-1", "cwd": "/tmp", "hook_event_name": "PreToolUse", "transcript_path": "",
            "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t1"}
    waiting = subprocess.Popen([sys.executable, "-m", claude_code.MODULE, "--store", str(runs)],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        waiting.stdin.write(json.dumps(body).encode())
        waiting.stdin.close()
        deadline = time.monotonic() + CAP_S
        while not isinstance(RunStore(runs).load("claude-s-1").interruption, NeedsApproval):
            assert time.monotonic() < deadline and waiting.poll() is None, "the call never waited"
            time.sleep(0.05)
    finally:
        waiting.kill()  # as Claude Code does at its timeout, or when its user presses Esc
        waiting.wait()
    assert answer(capsys, runs, "UserPromptSubmit", prompt="try something else") == (0, None)
    state = RunStore(runs).load("claude-s-1")
    assert state.status is Status.RUNNING and state.messages[-1]["content"] == "try something else"


# ---- the example ------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "claude_code" / "setup.sh"


async def test_the_examples_hooks_and_rules_decide_claude_codes_calls(place: Place):
    env = {**os.environ, "TETHER_STORE": str(place.runs), "TETHER": f"{sys.executable} -m tether.tui.cli"}
    setup = await asyncio.create_subprocess_exec("sh", str(EXAMPLE), str(place.project), env=env,
                                                 stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(setup.communicate(), CAP_S)
    assert setup.returncode == 0, err.decode()
    settings = json.loads((place.project / ".claude" / "settings.json").read_text())
    (pre,) = settings["hooks"]["PreToolUse"]
    assert pre["matcher"] == "Bash|Write|Edit|MultiEdit|NotebookEdit" and pre["hooks"][0]["timeout"] == 120 + 30
    assert "--store" not in pre["hooks"][0]["command"]  # the store comes from Claude Code's environment
    done = await run_claude(place, "Run:\necho hi > out.txt\nrm out.txt",
                            env=claude_env(place, TETHER_STORE=str(place.runs)))
    assert done.code == 0, done.stderr
    assert (place.project / "out.txt").read_text() == "hi\n"  # echo allowed by a rule, rm denied by one
    rule = next(r for r in RunStore(place.runs).rules() if r.id == "R2")
    words = f"Declined by rule R2 ({rule.note()}). Nothing was done."
    assert "nothing is deleted from this project" in words
    assert carries(done.received[-1], words), done.received[-1].body["messages"][-1]
    state = await ended_run(place)
    assert [(d.verdict, d.by) for d in state.approvals.values()] == [("approved", "rule R1"), ("rejected", "rule R2")]
    assert state.status is Status.COMPLETED and state.limits.budget_usd == 5
