"""The same loop against a real model: SmolLM2-135M on a local llama.cpp server.

What a 135M model answers is not asserted (wrong answers are data); the harness's
guarantees are: every task ends in one of the five exits, its cost is the sum of its
turns' costs recomputed from their tokens, and its trace ends with ``run_stopped``.
Skipped only when the ``local`` extra is not installed (``make test`` installs it).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.demo.evaluate import EvalConfig, run_eval
from tether.models.local import SMOLLM2, find_gguf, local_server, missing_extra
from tether.vocab.state import Pricing, Status
from tether.store.files.layout import TRACE_FILE
from tether.store.trace import read_trace

MISSING = missing_extra()
pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(MISSING is not None, reason=f"the [local] extra is not importable: {MISSING}"),
]
FIVE_EXITS = {s.value for s in Status if s is not Status.RUNNING}
TASK_TIMEOUT_S = 40.0  # a loaded 2-core host took over 20 s for the first turn of both tasks
# Two of the six drive the paths for real (a search; a listing, then reads): a real model is
# the slowest part of the suite. All six run against the scripted provider in
# tests/unit/test_eval.py, and make eval-local runs all six against this model.
REAL_TASKS = ("timeout", "list_and_read")
# A local model has no price (its runs cost "unknown", tokens counted): one is given here, so the
# guarantee the limits rest on, cost = the turns' tokens priced, is checked against a real model.
PRICE = Pricing(input_per_million=2.0, output_per_million=12.0, source="config")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with local_server() as url:
        yield url


@pytest.fixture(scope="module")
def result(base_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cfg = EvalConfig(base_url=base_url, model=SMOLLM2.alias, max_turns=3, max_tokens=128,
                     task_timeout_s=TASK_TIMEOUT_S, tasks=REAL_TASKS, pricing=PRICE)
    return asyncio.run(run_eval(cfg, keep_dir=tmp_path_factory.mktemp("eval-local")))


def test_weights_found_without_importing_the_package() -> None:
    assert find_gguf().name.endswith(".gguf") and find_gguf().stat().st_size > 10_000_000
    assert SMOLLM2.package not in sys.modules


def test_every_task_ends_in_one_of_the_five_exits(result: dict[str, Any]) -> None:
    assert [r["task"] for r in result["tasks"]] == list(REAL_TASKS)
    for row in result["tasks"]:
        assert row["status"] in FIVE_EXITS, row
        assert row["wall_ms"] < (TASK_TIMEOUT_S + 10) * 1000


def test_cost_is_the_sum_of_the_turns_recomputed_from_tokens(result: dict[str, Any]) -> None:
    pricing = PRICE
    for row in result["tasks"]:
        turns = [r for r in read_trace(Path(row["runs_dir"]) / row["run_id"] / TRACE_FILE) if r["kind"] == "turn"]
        assert len(turns) == row["turns"]
        recomputed = sum(pricing.cost(t["prompt_tokens"], t["completion_tokens"]) for t in turns)
        assert row["cost_usd"] == pytest.approx(recomputed, abs=1e-8)
        assert (row["cost_usd"] > 0) == (row["turns"] > 0)
    # No turn at all (a host so loaded that both tasks timed out before a first answer) is
    # said with the tasks' exits, not as a bare 0.0.
    assert result["totals"]["cost_usd"] > 0, [(r["task"], r["status"], r["turns"], r["answer"]) for r in result["tasks"]]


def test_trace_ends_with_run_stopped(result: dict[str, Any]) -> None:
    for row in result["tasks"]:
        trace = list(read_trace(Path(row["runs_dir"]) / row["run_id"] / TRACE_FILE))
        assert trace[-1]["kind"] == "run_stopped" and trace[-1]["status"] == row["status"]
        seqs = [r["seq"] for r in trace]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_timeout_stops_a_real_model_through_the_signal(base_url: str, tmp_path: Path) -> None:
    cfg = EvalConfig(base_url=base_url, model=SMOLLM2.alias, max_turns=3, max_tokens=128, task_timeout_s=0.05,
                     tasks=REAL_TASKS)
    result = await run_eval(cfg, keep_dir=tmp_path)
    for row in result["tasks"]:
        assert row["status"] == "interrupted" and "task timeout" in row["answer"]
        assert list(read_trace(Path(row["runs_dir"]) / row["run_id"] / TRACE_FILE))[-1]["kind"] == "run_stopped"
