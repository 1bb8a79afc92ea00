"""Agent sets: the harness knows no demo; it asks the sets it was given (the CLI gives the
demo's), for an agent by name, for the endpoint of agents that name none, and for the agent of
a saved run, including one made before agents existed (its model names a scenario)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tether.agents.agent import Agent
from tether.agents.sets import AgentSet, known_agents, set_of
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.vocab.state import RunState, StateError, Status


class Greeters:
    """An agent set of a program's own: one agent on the demo's scripted endpoint."""

    source = "greeters"

    def agents(self) -> dict[str, str]:
        return {"greeter": "says hello"}

    def task(self, name: str) -> str | None:
        return "Say hello." if name == "greeter" else None

    def tools(self) -> list:
        return []

    def agent(self, name: str, workspace: Path | None = None, *, base_url: str | None = None) -> Agent:
        if name != "greeter":
            raise ValueError(f"no agent {name!r}")
        return Agent(name="greeter", model="plan", base_url=base_url, tools=[], workspace=workspace,
                     prompt="Say hello.", source="library")

    def rebuild(self, state: RunState) -> Agent | None:
        return None

    def model(self, counter, *, latency_ms: float = 0.0, fail: str | None = None):
        return None

    def child_model(self, model: str) -> str | None:
        return None


def test_the_demo_and_a_program_s_own_set_are_agent_sets() -> None:
    sets: tuple[AgentSet, ...] = (DEMO, Greeters())
    assert "plan" in known_agents(sets) and known_agents(sets)["greeter"] == "says hello"
    assert set_of(sets, "greeter").source == "greeters" and set_of(sets, "plan") is DEMO
    assert set_of(sets, "nobody") is None


async def test_a_harness_given_no_set_knows_no_scenario_and_says_so(tmp_path: Path) -> None:
    async with Harness(tmp_path / "runs", tmp_path / "ws") as harness:
        with pytest.raises(ValueError, match="unknown agent 'plan': this harness was given no agent set"):
            harness.new_run("plan")
        agent = Agent(name="nowhere", model="m", tools=[], prompt="hi")
        state = harness.create(agent)
        with pytest.raises(StateError, match="names no endpoint \\(base_url\\), and this harness has no agent set"):
            await harness.run(state.run_id)


async def test_an_agent_of_another_set_runs_on_the_endpoint_a_set_offers(tmp_path: Path) -> None:
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(Greeters(), DEMO)) as harness:
        done = await harness.start(harness.agent_named("greeter"))
    assert done.status is Status.COMPLETED, "the demo's in-process provider answered the greeter"


async def test_a_run_made_before_agents_existed_is_rebuilt_by_its_set(tmp_path: Path) -> None:
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as harness:
        made = replace(harness.new_run("plan"), run_id="before-agents", agent=None)  # as saved before agents
        harness.store.create(made)
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as later:
        rebuilt = later.agent_of(later.load("before-agents"))
        assert rebuilt.source == "demo" and rebuilt.name == "plan"
        done = await later.run("before-agents")
    assert done.status is Status.COMPLETED
