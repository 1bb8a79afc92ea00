"""Checkpoints of an ACP agent's run in a workspace of its own (issue 39): after each tool
call the agent reports finished and after its turn; a rewind takes the files back, the
transcript stays (the agent's session cannot be cut). Against the fake agent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tether.acp.run import _last_user_text
from tether.vocab.state import Status
from tether.workspaces.checkpoints import listing
from tether.workspaces.rewinding import rewind_run
from tests.acp.driving import waiting
from tests.support import cli_here_async
from tests.acp.fake_agent import WRITE_NAME, WRITE_TEXT
from tests.acp.test_acp_isolated import harness, isolated, repo, trace  # noqa: F401 (repo: a fixture)


async def test_an_acp_runs_write_is_checkpointed_and_rewound_its_transcript_kept(tmp_path: Path, repo: Path) -> None:
    async with harness(tmp_path) as h:
        state = h.create(isolated(repo), "write the file")
        running = asyncio.create_task(h.run(state.run_id, wait_for_decision=0))
        await waiting(h, state.run_id)
        assert (await h.decide(state.run_id, "approve")).ok
        final = (await running).state
        assert final.status is Status.COMPLETED, final.error
        ws = final.run_workspace
        found = await listing(ws, state.run_id)  # type: ignore[arg-type]
        assert found, "a checkpoint after the agent's write"
        assert found[0].files[0]["path"] == WRITE_NAME and found[0].files[0]["status"] == "added"
        assert found[0].tool is not None or found[0].label == "the end of turn 1"
        taken = [r for r in trace(tmp_path, state.run_id) if r["kind"] == "checkpoint"]
        assert [r["step"] for r in taken] == [c.step for c in found]
        kept = list(final.messages)
        rewound, said = await rewind_run(h.store, state.run_id, to=0, by="test")
    tree = Path(str(ws.path))  # type: ignore[union-attr]
    assert not (tree / WRITE_NAME).exists()
    assert rewound.messages[:-1] == kept, "an ACP agent's transcript is not cut"
    note = rewound.messages[-1]
    assert note["role"] == "user" and note["tether"] == "rewind" and "checkpoint 0" in note["content"]
    # which files went back to which step, in words: the agent wrote WRITE_NAME after checkpoint 0
    assert f"- {WRITE_NAME} (removed: it did not exist at checkpoint 0)" in note["content"]
    assert rewound.rewinds[-1]["files"] == [{"path": WRITE_NAME, "status": "deleted"}]
    rewound.messages.append({"role": "user", "content": "go on"})  # a follow-up: the note goes with it
    assert _last_user_text(rewound) == f"{note['content']}\n\ngo on"
    rewound.messages.pop()
    assert f"run {state.run_id} rewound to checkpoint 0" in said[-1]
    async with harness(tmp_path) as h:
        back, _ = await rewind_run(h.store, state.run_id, to=None, by="test")
    assert (tree / WRITE_NAME).read_text() == WRITE_TEXT and back.status is Status.COMPLETED
    assert json.loads(json.dumps(back.messages)) == json.loads(json.dumps(kept))


def test_the_rewind_note_names_each_file_and_what_happened_to_it() -> None:
    from tether.workspaces.rewinding import NOTE_FILES, rewind_note

    files = [{"path": "a.py", "status": "changed"}, {"path": "gone.txt", "status": "added"},
             {"path": "new.txt", "status": "deleted"}]
    note = rewind_note({"to": 3, "files": files})
    assert "checkpoint 3" in note and "- a.py (restored to checkpoint 3)" in note
    assert "- gone.txt (brought back as at checkpoint 3)" in note
    assert "- new.txt (removed: it did not exist at checkpoint 3)" in note
    many = rewind_note({"to": 1, "files": [{"path": f"f{i}", "status": "changed"} for i in range(NOTE_FILES + 5)]})
    assert "- and 5 more files" in many and f"- f{NOTE_FILES}" not in many
    assert "No file differed" in rewind_note({"to": 2, "files": []})


async def test_a_fork_of_an_acp_run_is_a_new_session_at_checkpoint_n_told_what_was_done(
        tmp_path: Path, repo: Path) -> None:
    """No agent Tether runs advertises session/fork: the fork is a new run of the same agent in a
    workspace made at checkpoint N, whose first prompt says what was done up to N, then --message."""
    from tether.run.controls import add_follow_up
    from tether.workspaces.forking import fork

    async with harness(tmp_path) as h:
        state = h.create(isolated(repo), "write the file")
        running = asyncio.create_task(h.run(state.run_id, wait_for_decision=0))
        await waiting(h, state.run_id)
        assert (await h.decide(state.run_id, "approve")).ok
        origin = (await running).state
        assert origin.status is Status.COMPLETED, origin.error
        step = (await listing(origin.run_workspace, state.run_id))[0].step  # type: ignore[arg-type]
        by_cli = await cli_here_async("fork", state.run_id, "--at", str(step), "--run-id", "by-cli", "--message", "hi",
                                      "--runs-dir", str(tmp_path / "runs"))
        assert by_cli.returncode == 0, by_cli.stderr
        assert "a new session of the agent is told in words what was done up to there and your message" in by_cli.stdout
        assert _last_user_text(h.store.load("by-cli")).endswith("Go on with the task from that point.)\n\nhi")
        made = await fork(origin, step, "forked", tmp_path / "workspaces")
        add_follow_up(made, "now say hello")
        made.status, made.interruption = Status.INTERRUPTED, None
        h.store.create(made)
        note = made.messages[0]["content"]
        assert made.messages[0]["tether"] == "fork" and f"forked this from run {state.run_id} at checkpoint {step}" in note
        assert "- The user asked: write the file" in note and f"- You called Write {WRITE_NAME}(" in note
        assert "result: Wrote out.txt" in note and "now say hello" not in note
        assert _last_user_text(made) == f"{note}\n\nnow say hello", "the note goes before the fork's message"
        assert made.forked_from["run_id"] == state.run_id and made.forked_from["step"] == step  # type: ignore[index]
        again = asyncio.create_task(h.run("forked", wait_for_decision=0))
        await waiting(h, "forked")
        ws = h.store.load("forked").run_workspace
        assert (Path(str(ws.path)) / WRITE_NAME).read_text() == WRITE_TEXT, "the fork's workspace starts at N"
        assert (await h.decide("forked", "approve")).ok
        final = (await again).state
    assert final.status is Status.COMPLETED, final.error
    assert Path(str(ws.path)) != Path(str(origin.run_workspace.path))  # type: ignore[union-attr]
    sessions = [r for r in trace(tmp_path, "forked") if r["kind"] == "agent_session"]
    assert len(sessions) == 1 and sessions[0]["session_id"], "a new session of the same agent"
    assert final.agent is not None and final.agent.name == "fake"


async def test_a_fork_at_the_last_checkpoint_of_an_agent_with_session_fork_forks_its_session(
        tmp_path: Path, repo: Path, monkeypatch) -> None:
    """The fake agent advertises session/fork ($FAKE_AGENT_FORK): a fork at the run's last checkpoint
    is the agent's session/fork of the origin's session, in the fork's workspace as cwd, and its
    first prompt is only the fork's message; a fork at an earlier one (0) is a new session told in words."""
    from tether.run.controls import add_follow_up
    from tether.vocab.wording import describe
    from tether.tui.cli.runs import rewind_lines
    from tether.workspaces.forking import fork

    log = tmp_path / "agent.log"
    monkeypatch.setenv("FAKE_AGENT_FORK", str(log))
    agent = isolated(repo)
    agent.acp.env["FAKE_AGENT_FORK"] = str(log)  # type: ignore[union-attr]
    async with harness(tmp_path) as h:
        state = h.create(agent, "write the file")
        running = asyncio.create_task(h.run(state.run_id, wait_for_decision=0))
        await waiting(h, state.run_id)
        assert (await h.decide(state.run_id, "approve")).ok
        origin = (await running).state
        assert origin.status is Status.COMPLETED, origin.error
        origin_sid = [r for r in trace(tmp_path, state.run_id) if r["kind"] == "agent_session"][-1]["session_id"]
        last = (await listing(origin.run_workspace, state.run_id))[-1].step  # type: ignore[arg-type]
        finals = {}
        for new_id, step in (("at-last", last), ("at-zero", 0)):
            made = await fork(origin, step, new_id, tmp_path / "workspaces", session=origin_sid)
            add_follow_up(made, "now say hello")
            made.status, made.interruption = Status.INTERRUPTED, None
            h.store.create(made)
            again = asyncio.create_task(h.run(new_id, wait_for_decision=0))
            await waiting(h, new_id)
            assert (await h.decide(new_id, "approve")).ok
            finals[new_id] = (await again).state
            assert finals[new_id].status is Status.COMPLETED, finals[new_id].error
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    forks = [x for x in lines if x["method"] == "session/fork"]
    ws = Path(str(finals["at-last"].run_workspace.path))  # type: ignore[union-attr]
    assert len(forks) == 1 and forks[0]["session_id"] == origin_sid, "only the fork at the last checkpoint"
    assert Path(forks[0]["cwd"]).resolve() == ws.resolve(), "the fork's own workspace is the session's cwd"
    prompts = [x for x in lines if x["method"] == "session/prompt"]
    assert [p["text"] for p in prompts if p["session_id"].startswith("fork-")] == ["now say hello"]
    told = [p["text"] for p in prompts if not p["session_id"].startswith("fork-")][-1]
    assert "Go on with the task from that point.)" in told and told.endswith("now say hello")
    sessions = {i: [r for r in trace(tmp_path, i) if r["kind"] == "agent_session"] for i in finals}
    assert sessions["at-last"][0]["fork"] == "session/fork" and sessions["at-zero"][0]["fork"] == "told"
    assert "session/fork of the origin's session" in describe(sessions["at-last"][0])
    shown = rewind_lines(finals["at-last"], sessions["at-last"], everything=False)
    assert "made by session/fork of the agent's session" in shown[0]
    assert "told in words" in rewind_lines(finals["at-zero"], sessions["at-zero"], everything=False)[0]
