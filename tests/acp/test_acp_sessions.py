"""ACP's session methods and the agent file's ``fs`` and ``mode`` keys, against the fake agent
(``sessions`` mode logs every session method it is sent):

- ``mode``: ``session/set_mode`` after ``session/new``; a mode the agent does not have fails
  the run in words, naming the modes it has;
- ``fs = false``: the client's ``fs/*`` is not advertised;
- ``session/close`` at a run's end, and ``session/resume`` (no replay) for a follow-up, where
  the agent advertises them; ``session/list`` where it does;
- the agent file reads ``fs`` and ``mode``.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from tether.acp.client import AcpSession
from tether.acp.errors import AcpError
from tether.agents.agent import AcpCommand, Agent
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.store.trace import read_trace
from tether.vocab.state import Status
from tests.acp.conftest import fake_agent
from tests.acp.driving import kinds, waiting
from tests.acp.procs import alive_in


def sessions_agent(workspace: Path, log: Path, **keys) -> Agent:
    env = {"FAKE_AGENT_LOG": str(log)}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return Agent(name="fake", model="acp:fake", workspace=workspace,
                 acp=AcpCommand(tuple(fake_agent("sessions")), env, 5.0, **keys))


def sent(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def test_mode_is_set_the_session_closed_at_the_end_and_a_follow_up_resumes(tmp_path: Path,
                                                                                acp_workspace: Path):
    """The agent file's mode and model, set after ``session/new``; the follow-up resumes the
    session in a new process, which answers it is back in its default mode and model (as
    Claude's and Codex's adapters do): they are set again."""
    log = tmp_path / "agent.log"
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(sessions_agent(acp_workspace, log, mode="auto", model="fake-large"), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        assert (await harness.decide(state.run_id, "approve", by="alice")).ok
        first = (await running).state
        again = asyncio.create_task(harness.run(state.run_id, message="once more", wait_for_decision=0))
        while kinds(harness, state.run_id).count("approval_required") < 2:  # the same call id in a new process
            await asyncio.sleep(0.05)
        await waiting(harness, state.run_id)
        assert (await harness.decide(state.run_id, "approve", by="alice")).ok
        second = (await again).state
        trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    assert first.status is Status.COMPLETED and second.status is Status.COMPLETED, (first.error, second.error)
    methods = [entry["method"] for entry in sent(log)]
    assert methods == ["initialize", "session/new", "session/set_mode", "session/set_config_option", "session/close",
                       "initialize", "session/resume", "session/set_mode", "session/set_config_option",
                       "session/close"], methods
    assert [e.get("mode_id") or e.get("value") for e in sent(log) if e["method"].startswith("session/set")] == \
        ["auto", "fake-large", "auto", "fake-large"]
    configs = [r for r in trace if r["kind"] == "config_options"]
    assert [(o["id"], o["value"]) for o in configs[-1]["options"]][0] == ("model", "fake-large")
    assert {e["session_id"] for e in sent(log) if "session_id" in e} == {"fake-1"}
    assert sent(log)[0]["fs"] is True
    assert not any("(replayed)" in json.dumps(r) for r in trace), "a resumed session is not replayed"
    assert not alive_in(acp_workspace)


async def test_a_mode_the_agent_does_not_have_fails_the_run_in_words(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        final = (await harness.start(sessions_agent(acp_workspace, tmp_path / "log", mode="yolo"), "hi")).state
    assert final.status is Status.FAILED
    assert final.error == ("fake-agent has no session mode 'yolo' (the agent file's mode): "
                           "its modes are ask, auto"), final.error
    assert not alive_in(acp_workspace)


async def test_fs_false_is_not_advertised_and_sessions_are_listed(tmp_path: Path, acp_workspace: Path):
    log = tmp_path / "agent.log"
    command = sessions_agent(acp_workspace, log, fs=False).acp
    assert command is not None
    async with AcpSession(command.argv, workspace=acp_workspace, env=dict(command.env), fs=command.fs) as session:
        listed = await session.list_sessions()
    assert listed == [{"sessionId": "fake-earlier", "cwd": str(acp_workspace), "title": "an earlier session",
                       "updatedAt": "2026-12-01T09:30:00Z"}]
    assert sent(log)[0] == {"method": "initialize", "fs": False}
    assert sent(log)[1] == {"method": "session/list", "cwd": str(acp_workspace)}


async def test_an_agent_without_the_session_methods_says_so(acp_workspace: Path, fake_env):
    async with AcpSession(fake_agent("normal"), workspace=acp_workspace, env=fake_env) as session:
        with pytest.raises(AcpError, match=r"cannot list its sessions \(it does not advertise session/list\)"):
            await session.list_sessions()
        with pytest.raises(AcpError, match="cannot resume a session"):
            await session.resume_session("x")


def test_the_agent_file_reads_fs_and_mode(tmp_path: Path):
    from tether.agents.config import load_config

    config = tmp_path / "tether.toml"
    config.write_text('[agents.gem]\nacp = ["/bin/true"]\nmodel = "m"\nfs = false\nmode = "auto"\n')
    agent = load_config(config).agent("gem")
    assert agent.acp is not None and agent.acp.fs is False and agent.acp.mode == "auto"
    config.write_text('[agents.gem]\nacp = ["/bin/true"]\nmodel = "m"\nmode = ""\n')
    with pytest.raises(Exception, match="mode"):
        load_config(config).agent("gem")


async def test_model_is_chosen_through_the_agents_config_options_and_shown(tmp_path: Path, acp_workspace: Path,
                                                                           capsys):
    """``model = "fake-large"``: ``session/set_config_option`` on the agent's model option; the
    agent's config options (its own ``config_option_update`` too) are kept on the run and
    ``tether show`` prints them."""
    from tether.tui.cli import main

    log = tmp_path / "agent.log"
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(sessions_agent(acp_workspace, log, model="fake-large"), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        assert (await harness.decide(state.run_id, "approve", by="alice")).ok
        final = (await running).state
        trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    assert final.status is Status.COMPLETED, final.error
    assert [e for e in sent(log) if e["method"] == "session/set_config_option"] == [
        {"method": "session/set_config_option", "session_id": "fake-1", "config_id": "model", "value": "fake-large"}]
    configs = [r for r in trace if r["kind"] == "config_options"]
    assert [c["source"] for c in configs] == ["session/new", "session/set_config_option", "config_option_update"]
    assert [(o["id"], o["value"]) for o in configs[-1]["options"]] == [("model", "fake-large"), ("effort", "high")]
    assert configs[0]["options"][0]["values"] == ["fake-small", "fake-large"]
    assert await asyncio.to_thread(main, ["show", state.run_id, "--store", str(tmp_path / "runs")]) == 0
    assert "config: Model=fake-large, Effort=high" in capsys.readouterr().out.splitlines()
    assert not alive_in(acp_workspace)


async def test_a_model_the_agent_does_not_offer_fails_the_run_in_words(tmp_path: Path, acp_workspace: Path):
    log = tmp_path / "agent.log"
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        final = (await harness.start(sessions_agent(acp_workspace, log, model="gpt-9"), "hi")).state
    assert final.status is Status.FAILED
    assert final.error == ("fake-agent does not offer the model 'gpt-9' (the agent file's model): its models are "
                           "fake-small, fake-large"), final.error
    assert "session/set_config_option" not in [e["method"] for e in sent(log)]
    assert not alive_in(acp_workspace)


def test_a_model_is_matched_by_its_provider_prefix_or_its_name():
    from tether.acp.config import choose_model, offered_value

    opencode = [{"id": "model", "category": "model", "value": "opencode/big", "values": ["opencode/big", "tether/scripted"]}]
    qwen = [{"id": "model", "category": "model", "value": "x", "values": ["x", "$runtime|openai|scripted(openai)"],
             "labels": ["X", "scripted"]}]
    assert choose_model("opencode", "scripted", opencode) == "model"
    assert offered_value("scripted", opencode) == "tether/scripted"
    assert offered_value("scripted", qwen) == "$runtime|openai|scripted(openai)"
    assert choose_model("opencode", "tether/scripted", [{**opencode[0], "value": "tether/scripted"}]) is None
    assert choose_model("none", "m", [{"id": "mode", "category": "mode", "value": "a", "values": ["a"]}]) is None
