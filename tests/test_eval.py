"""``tether eval``: the plumbing against the scripted provider, and the graders by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.cli import main
from tether.evaluate import TASKS, EvalConfig, run_eval
from tether.provider.scenarios import DESTRUCTIVE_DECLINED, PLAN_ANSWER

GRADED = {
    "timeout": (["errors.log mentions a timeout.", "The timeout is in ERRORS.LOG (worker 7)."],
                ["access.log mentions a timeout.", "I do not know.", "errors"]),
    "count": (["There are 4 files.", "Four files: access.log, errors.log, notes.txt, secrets.env.",
               "3 readable files (and secrets.env, which I may not read)."],
              ["There are 2 files.", "errors.log mentions worker 7.", "Several files."]),
    "notes": (["It says: Remember to rotate your logs.", "notes.txt reminds you to rotate logs."],
              ["It says nothing.", "It is about logs.", "Rotate."]),
    "list_and_read": (["access.log has GET /api/orders requests; errors.log says worker 7 timed out; "
                       "notes.txt says to rotate your logs.",
                       "errors.log: timeout errors. access.log: HTTP/1.1 requests. notes.txt: rotate logs."],
                      ["The files are access.log, errors.log, notes.txt and secrets.env.",
                       "errors.log says worker 7 timed out; notes.txt says rotate logs."]),
    "largest": (["errors.log is the largest.", "The largest file is errors.log (987 bytes)."],
                ["access.log is the largest.", "errors.log, then access.log.", "I cannot tell."]),
    "rotating": (["Yes: notes.txt says to rotate your logs.", "notes.txt"],
                 ["No.", "errors.log mentions rotate-logs."]),
}


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_graders_on_hand_written_answers(task) -> None:
    right, wrong = GRADED[task.name]
    assert [task.grade(a) for a in right] == [True] * len(right)
    assert [task.grade(a) for a in wrong] == [False] * len(wrong)


async def test_eval_against_the_scripted_provider(tmp_path: Path) -> None:
    result = await run_eval(EvalConfig(), keep_dir=tmp_path)
    rows = {r["task"]: r for r in result["tasks"]}
    assert list(rows) == [t.name for t in TASKS]
    assert all(r["status"] == "completed" and r["answer"] == PLAN_ANSWER for r in rows.values())
    # The scripted model says the same thing to every task: right only where that fits.
    assert {name for name, r in rows.items() if r["right"]} == {"timeout", "largest"}
    totals = result["totals"]
    assert (totals["turns"], totals["tool_runs"], totals["right"], totals["tasks"]) == (18, 12, 2, 6)
    assert totals["mean_turn_ms"] == pytest.approx(totals["wall_ms"] / 18, abs=0.1)
    assert all((Path(r["runs_dir"]) / r["run_id"] / "trace.jsonl").exists() for r in rows.values())
    # A fresh workspace per task: no task sees another's files.
    assert len({r["runs_dir"] for r in rows.values()}) == 6


async def test_task_timeout_stops_through_the_signal() -> None:
    result = await run_eval(EvalConfig(model="slow", task_timeout_s=0.2))
    for row in result["tasks"]:
        assert row["status"] == "interrupted"
        assert "task timeout" in row["answer"]
        assert row["cost_usd"] > 0 and row["right"] is False


def test_cli_eval_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    monkeypatch.delenv("LLM_MODEL", raising=False)
    assert main(["eval", "--json", "--max-turns", "5"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["totals"]["tasks"] == 6 and result["base_url"] == "embedded scripted provider"


async def test_unattended_eval_declines_approvals_in_words(tmp_path: Path) -> None:
    result = await run_eval(EvalConfig(model="destructive"), keep_dir=tmp_path)
    for row in result["tasks"]:
        assert (row["status"], row["declined"], row["answer"]) == ("completed", 1, DESTRUCTIVE_DECLINED)
        assert (Path(row["runs_dir"]).parent / "workspace" / "access.log").exists()
    assert result["totals"]["declined"] == 6
