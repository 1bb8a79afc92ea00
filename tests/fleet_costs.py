"""A fixed fleet for the pictures of what it cost (the console's Costs screen, /costs): runs of
four agents on four models over twenty days, one with a subagent, one nobody priced, and three
fleet budgets (one ok, one at its warning, one reached), all seen at :data:`NOW`, so that a
snapshot of either view holds still whatever the day the tests run.

:func:`frozen` stops the clock the figures and the budgets read at :data:`NOW`; the runs are
made with the store's own ``create``, so the figures come from the store's real queries."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from tether.vocab.state import AgentRef, Pricing, RunState, Status

NOW = 1_796_061_600.0  # 2026-11-30 18:00 UTC, a Monday
HOUR = 3600.0
DAY = 86_400.0

AGENT_FILE = """
[agents.triage]
model = "gpt-4o-mini"
base_url = "http://127.0.0.1:8080/v1"

[agents.coder]
model = "claude-sonnet-4-5"
base_url = "http://127.0.0.1:8080/v1"

[budgets.coder-daily]
agent = "coder"
per = "day"
usd = 5

[budgets.triage-daily]
agent = "triage"
per = "day"
usd = 0.40

[budgets.fleet-monthly]
per = "month"
usd = 9
warn_at = 0.8
"""

# run id, agent, model, its own cost (None: no price), its subagents' cost, tokens in and out,
# how long before NOW it was made, its status, its parent
RUNS = (
    ("triage-7f3a", "triage", "gpt-4o-mini", 0.42, 0.0, 120_400, 8_200, 0.5 * HOUR, "completed", None),
    ("triage-91c2", "triage", "gpt-4o-mini", 0.18, 0.0, 51_000, 3_900, 2 * DAY, "completed", None),
    ("coder-2b81", "coder", "claude-sonnet-4-5", 3.10, 0.60, 402_000, 21_500, 1 * DAY, "completed", None),
    ("coder-2b81.call_1", "coder", "claude-sonnet-4-5", 0.60, 0.0, 88_000, 4_100, 1 * DAY, "completed",
     "coder-2b81"),
    ("review-5d10", "reviewer", "gpt-4o", 1.25, 0.0, 210_000, 12_000, 6 * DAY, "interrupted", None),
    ("local-0c44", "local", "qwen2.5-7b-instruct", None, 0.0, 64_000, 5_800, 3 * DAY, "completed", None),
    ("coder-77e0", "coder", "claude-sonnet-4-5", 2.40, 0.0, 310_000, 16_700, 12 * DAY, "failed", None),
    ("ops-a001", "ops", "gpt-4o-mini", 0.05, 0.0, 9_000, 700, 20 * DAY, "completed", None),
)


def make_runs(store: object) -> None:
    """:data:`RUNS`, made on ``store`` with its ``create``."""
    for run_id, agent, model, own, children, tokens_in, tokens_out, before, status, parent in RUNS:
        state = RunState(run_id=run_id, model=model, cost_usd=(own or 0.0) + children, child_cost_usd=children,
                         prompt_tokens=tokens_in, completion_tokens=tokens_out, status=Status(status),
                         pricing=Pricing(0.0, 0.0, source="unknown") if own is None else Pricing(source="genai-prices"),
                         agent=AgentRef(name=agent, source="config", fingerprint="f"), parent_run_id=parent,
                         messages=[{"role": "user", "content": f"the task of {run_id}"}])
        state.created_at = state.updated_at = NOW - before
        store.create(state)  # type: ignore[attr-defined]


def agent_file(folder: Path) -> Path:
    path = folder / "tether.toml"
    path.write_text(AGENT_FILE, encoding="utf-8")
    return path


def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The figures' clock and the budgets' periods at :data:`NOW` (nothing else's)."""
    clock = types.SimpleNamespace(time=lambda: NOW)
    monkeypatch.setattr("tether.observe.cost_figures.time", clock)
    monkeypatch.setattr("tether.approvals.budgets.time", clock)
    monkeypatch.setattr("tether.web.costs.time", clock)
