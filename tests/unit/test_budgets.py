"""Budgets in real dollars: strict mode against the endpoint's own counts, prices from the
agent, and a summary that says when a price is assumed or a count is Tether's own."""

from __future__ import annotations

import httpx
import pytest

from tether.agents.agent import Agent
from tether.models.client import ModelClient
from tether.harness import Harness
from tether.demo.provider import create_app
from tether.observe.report import summary, text_summary
from tether.vocab.state import Limits, MaxBudget, Pricing, RunState, Status
from tether.vocab.wording import overshoot
from tether.demo.agents import DEMO, EMBEDDED_BASE_URL
from tests.endpoints import call, completion, turns


def over_reporting(scale: float) -> ModelClient:
    """The scripted provider, reporting ``scale`` times the prompt tokens Tether counts."""
    return ModelClient(EMBEDDED_BASE_URL, transport=httpx.ASGITransport(app=create_app(usage_scale=scale)))


@pytest.mark.parametrize("scale", [1.1, 1.5])
@pytest.mark.parametrize("budget", [0.01, 0.02, 0.05])
async def test_strict_spend_never_passes_the_budget_of_an_endpoint_that_over_reports(tmp_path, scale, budget):
    async with Harness(tmp_path / "runs", tmp_path / "ws", client=over_reporting(scale), agent_sets=(DEMO,)) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None, budget_usd=budget,
                                                              budget_mode="strict")).run_id)
    assert out.state.status is Status.BUDGET_EXCEEDED and out.state.interruption == MaxBudget()
    assert out.state.cost_usd <= budget
    assert out.state.turns >= 1
    assert out.state.usage_ratio == pytest.approx(scale, abs=0.01)


async def test_soft_mode_against_the_same_endpoint_overshoots_by_at_most_a_turn(tmp_path):
    async with Harness(tmp_path / "runs", tmp_path / "ws", client=over_reporting(1.5), agent_sets=(DEMO,)) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None, budget_usd=0.02)).run_id)
    assert out.state.cost_usd > 0.02  # soft: the check before each turn cannot see the next turn's bill


async def test_a_run_of_a_model_nobody_prices_says_price_unknown_and_counts_its_tokens(tmp_path):
    app = turns(completion(tool_calls=[call("list_files", {}, "l")]), completion("done", usage=False))
    client = ModelClient("http://test/v1", transport=httpx.ASGITransport(app=app))
    agent = Agent("priced-not", "some-model", base_url="http://test/v1", tools=["tether:list_files"],
                  workspace=tmp_path)
    async with Harness(tmp_path / "runs", client=client, agent_sets=(DEMO,)) as h:
        out = await h.start(agent, "go")
        priced = await h.start(Agent("priced", "some-model", base_url="http://test/v1", tools=["tether:list_files"],
                                     workspace=tmp_path, pricing=Pricing(0.2, 0.6)), "go")
    words = text_summary(out.state, 1, 0)
    assert out.state.pricing.unknown and "price unknown for some-model" in words and "assumed price" not in words
    assert out.state.cost_usd == 0 and out.state.prompt_tokens > 0  # counted, not priced at a made-up price
    assert "usage not reported by the endpoint for turn 2" in words
    assert summary(out.state, [], 0)["assumed_price"] is False
    assert summary(out.state, [], 0)["estimated_turns"] == [2]
    assert not priced.state.pricing.unknown and "price unknown" not in text_summary(priced.state, 1, 0)
    assert priced.state.cost_usd > 0


@pytest.mark.parametrize(("spent", "budget", "words"), [
    # What the audit saw: "spend $0.0100 exceeds the $0.0100 budget by $0.0000".
    (0.010003, 0.01, "spend $0.010003 exceeds the $0.010000 budget by $0.000003"),
    (0.0100004, 0.01, "spend $0.0100004 exceeds the $0.0100000 budget by $0.0000004"),
    (0.0125, 0.01, "spend $0.0125 exceeds the $0.0100 budget by $0.0025"),
    (0.01 + 1e-13, 0.01, "spend $0.0100 reached the $0.0100 budget"),
    (150.5, 100.0, "spend $150.5000 exceeds the $100.0000 budget by $50.5000"),
])
def test_an_overshoot_is_worded_with_the_digits_that_show_it(spent, budget, words):
    assert overshoot(spent, budget) == words


def test_the_summary_never_reads_over_budget_by_nothing():
    state = RunState(run_id="r", model="m", limits=Limits(budget_usd=0.01))
    state.cost_usd = 0.010003
    assert "exceeds the $0.010000 budget by $0.000003" in text_summary(state, 0, 0.0)
    assert "by $0.0000 " not in text_summary(state, 0, 0.0)
