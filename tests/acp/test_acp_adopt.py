"""An ACP agent's own earlier sessions (``session/list``), adopted as Tether runs, against the
fake agent (``sessions`` mode lists ``fake-earlier`` and logs every session method it is sent):

- :func:`tether.acp.offer.agent_offer` lists them in the agent's workspace, with the modes and
  models a new session offers, asked in another folder (the workspace's list is left as it was);
- a run made with ``adopt`` goes on in the listed session by ``session/resume`` (or by
  ``session/load`` where the agent does not resume), its prompt the session's next turn, and
  never opens a new session; the run's record says which;
- ``tether agents sessions NAME`` and ``tether run --agent NAME --session ID``;
- a mode and a model chosen for one run (``tether run --mode/--model``) instead of the file's.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from tether.acp.offer import agent_offer
from tether.agents.agent import AcpCommand, Agent, AgentError, Isolation
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.store.trace import read_trace
from tether.vocab.state import Status
from tether.store.files.store import RunStore
from tests.acp.conftest import fake_agent
from tests.acp.procs import alive_in
from tests.support import cli_here_async


def sessions_agent(workspace: Path, log: Path, *, resumes: bool = True) -> Agent:
    env = {"FAKE_AGENT_LOG": str(log), **({} if resumes else {"FAKE_AGENT_NO_RESUME": "1"})}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return Agent(name="fake", model="acp:fake", workspace=workspace,
                 acp=AcpCommand(tuple(fake_agent("sessions")), env, 5.0))


def sent(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def test_the_offer_lists_the_agents_sessions_in_its_workspace_and_its_modes_and_models(
        tmp_path: Path, acp_workspace: Path):
    log = tmp_path / "agent.log"
    offer = await agent_offer(sessions_agent(acp_workspace, log))
    assert offer.agent == "fake-agent 1.0.0" and offer.lists and offer.adopts == "session/resume"
    assert offer.sessions == ({"sessionId": "fake-earlier", "cwd": str(acp_workspace), "title": "an earlier session",
                               "updatedAt": "2026-12-01T09:30:00Z"},)
    assert [m["id"] for m in offer.modes] == ["ask", "auto"] and offer.mode == "ask"
    assert offer.models == (("fake-small", "Fake Small"), ("fake-large", "Fake Large")) and offer.model == "fake-small"
    methods = [(e["method"], e.get("cwd")) for e in sent(log)]
    assert methods[:2] == [("initialize", None), ("session/list", str(acp_workspace))], methods
    new = [e for e in sent(log) if e["method"] == "session/new"]
    assert len(new) == 1 and "session/close" in [e["method"] for e in sent(log)], "the probe's session is closed"
    assert not alive_in(acp_workspace)
    plain = await agent_offer(sessions_agent(acp_workspace, log, resumes=False), choices=False)
    assert plain.adopts == "session/load" and plain.modes == () and plain.models == ()


@pytest.mark.parametrize(("resumes", "how"), [(True, "session/resume"), (False, "session/load")])
async def test_a_run_adopts_the_agents_listed_session_and_its_prompt_goes_there(tmp_path: Path, acp_workspace: Path,
                                                                                resumes: bool, how: str):
    log = tmp_path / "agent.log"
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        final = (await harness.start(sessions_agent(acp_workspace, log, resumes=resumes), "QUIET go on",
                                     adopt="fake-earlier")).state
        again = (await harness.run(final.run_id, message="QUIET and then")).state
        trace = list(read_trace(tmp_path / "runs" / final.run_id / "trace.jsonl"))
    assert final.status is Status.COMPLETED, final.error
    assert final.messages[-1] == {"role": "assistant", "content": "Noted in fake-earlier."}
    methods = [e["method"] for e in sent(log)]
    assert "session/new" not in methods, "an adopted session is gone on in, never a new one"
    assert [e["session_id"] for e in sent(log) if e["method"] == how] == ["fake-earlier", "fake-earlier"], methods
    sessions = [r for r in trace if r["kind"] == "agent_session"]
    assert sessions[0]["session_id"] == "fake-earlier" and sessions[0]["adopted"] == how
    assert not any("(replayed)" in str(m.get("content")) for m in again.messages), "a load's replay is not the run's"
    assert again.status is Status.COMPLETED and again.messages[-1]["content"] == "Noted in fake-earlier."
    assert not alive_in(acp_workspace)


async def test_a_session_the_agent_cannot_go_on_in_fails_the_run_in_words(tmp_path: Path, acp_workspace: Path,
                                                                          fake_env):
    normal = Agent(name="plain", model="acp:fake", workspace=acp_workspace,
                   acp=AcpCommand(tuple(fake_agent("normal")), fake_env, 5.0))
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        final = (await harness.start(normal, "QUIET hi", adopt="s-1")).state
        with pytest.raises(AgentError, match="cannot have a workspace of its own"):
            harness.create(normal, "hi", adopt="s-1", isolation="copy")
        copying = replace(normal, isolation=Isolation("copy"))  # its own runs each get a copy; this one not
        assert harness.create(copying, "hi", adopt="s-1").run_workspace is None
    assert final.status is Status.FAILED
    assert final.error == ("fake-agent cannot go on in its session s-1: it advertises neither session/resume nor "
                           "loadSession"), final.error
    assert not alive_in(acp_workspace)


async def test_tether_agents_sessions_then_run_session_and_a_mode_and_model_of_the_runs_own(tmp_path: Path,
                                                                                            acp_workspace: Path):
    log = tmp_path / "agent.log"
    pythonpath = os.environ.get("PYTHONPATH", "")
    config = tmp_path / "tether.toml"
    config.write_text(f'[agents.fake]\nacp = {json.dumps(fake_agent("sessions"))}\nworkspace = "{acp_workspace}"\n'
                      f'mode = "ask"\nmodel = "fake-small"\n'
                      f'env = {{ PYTHONPATH = "{pythonpath}", FAKE_AGENT_LOG = "{log}" }}\n')
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home"), "TETHER_CONFIG": str(config)}
    listed = await cli_here_async("agents", "sessions", "fake", env=env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        f"fake (fake-agent 1.0.0) in {acp_workspace}: 1 session(s); a run goes on in one by session/resume",
        "  fake-earlier  an earlier session · updated 2026-12-01T09:30:00Z",
        "tether run --agent fake --session ID --prompt TEXT goes on in session ID",
        "modes (--mode): ask, auto (a new session's: ask)",
        "models (--model): fake-small, fake-large (a new session's: fake-small)",
    ]
    log.unlink()
    ran = await cli_here_async("run", "--agent", "fake", "--session", "fake-earlier", "--prompt", "QUIET go on",
                               "--json", env=env)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["answer"] == "Noted in fake-earlier."
    assert [e["method"] for e in sent(log)] == ["initialize", "session/resume", "session/close"]
    log.unlink()
    chose = await cli_here_async("run", "--agent", "fake", "--mode", "auto", "--model", "fake-large",
                                 "--prompt", "QUIET hi", "--json", env=env)
    assert chose.returncode == 0, chose.stderr
    made = RunStore(tmp_path / "home" / "runs").load(json.loads(chose.stdout)["run_id"])
    assert made.model == "fake-large", "the run is named (and priced) by the model chosen for it"
    assert [(e["method"], e.get("mode_id") or e.get("value")) for e in sent(log)][1:4] == [
        ("session/new", None), ("session/set_mode", "auto"), ("session/set_config_option", "fake-large")]
    assert not alive_in(acp_workspace)
