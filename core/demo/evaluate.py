"""``tether eval``: the six tasks of SPEC §10, over a fresh sample workspace each.

A harness makes an agent governable, not correct; the eval tells which. Each task is
a live run through :class:`~tether.harness.Harness` against any chat-completions
endpoint (``--base-url``), graded by that task's rubric. Every task ends
in one of the run's five exits: a task that outlives ``--task-timeout`` is stopped
through its run's :class:`~tether.vocab.cancel.CancelSignal`, like the console's Stop key,
so it still has its cost and its trace.

Without ``--base-url`` the tasks run against the embedded scripted provider (model
``plan`` by default). That proves the plumbing only: a scripted model answers the
same thing whatever it is asked ("errors.log mentions a timeout..."), so it gets the
timeout task right and the others wrong.

Each task's rubric, and how an answer is read, are in :mod:`tether.demo.grading`.

A call that needs approval (``delete_file``) is declined in words, since an eval runs
unattended; the run goes on, and the table counts the declined calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.harness import Harness
from tether.demo.lab import cell, markdown_table, outcome_words, stop_after
from tether.observe.report import summary
from tether.vocab.state import Limits, NeedsApproval, Pricing, RunState, Status
from tether.models.tokens import encoding
from tether.demo.grading import RUBRICS, Grade, Rubric
from tether.demo.agents import DEMO


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    rubric: Rubric

    def grade(self, answer: str | None) -> Grade:
        return Grade(False, "no answer") if answer is None else self.rubric.grade(answer)


TASKS = (
    Task("timeout", "Which file mentions a timeout?", RUBRICS["timeout"]),
    Task("count", "How many files are in the directory?", RUBRICS["count"]),
    Task("notes", "Read notes.txt and tell me what it says.", RUBRICS["notes"]),
    Task("list_and_read", "List the files and then read each one.", RUBRICS["list_and_read"]),
    Task("largest", "Which file is the largest?", RUBRICS["largest"]),
    Task("rotating", "Is there a file about rotating logs?", RUBRICS["rotating"]),
)

EMBEDDED_MODEL = "plan"


@dataclass(frozen=True)
class EvalConfig:
    base_url: str | None = None
    model: str = EMBEDDED_MODEL
    api_key: str | None = None
    max_turns: int = 8
    max_tokens: int = 512
    task_timeout_s: float | None = None
    tasks: tuple[str, ...] = ()  # the names of the tasks to run, in TASKS' order; empty: all six
    pricing: Pricing | None = None  # a price for the model; None: the agent file's, genai-prices', or unknown

    def __post_init__(self) -> None:
        unknown = [name for name in self.tasks if name not in {t.name for t in TASKS}]
        if unknown:
            raise ValueError(f"no eval task {', '.join(map(repr, unknown))}: the tasks are "
                             f"{', '.join(t.name for t in TASKS)}")

    def chosen(self) -> tuple[Task, ...]:
        return tuple(t for t in TASKS if not self.tasks or t.name in self.tasks)


UNATTENDED = "this eval runs unattended and allows no changes to the workspace"


def waiting_for_approval(state: RunState) -> bool:
    return state.status is Status.INTERRUPTED and isinstance(state.interruption, NeedsApproval)


async def run_task(task: Task, cfg: EvalConfig, root: Path) -> dict[str, Any]:
    """One task in its own runs dir and sample workspace under ``root``. Nobody is there to
    approve, so a call that needs approval is declined in words (the model reads why and
    goes on); the task is stopped through its signal if it outlives the timeout."""
    async with Harness(root / "runs", root / "workspace", base_url=cfg.base_url, api_key=cfg.api_key,
                       agent_sets=(DEMO,)) as harness:
        state = harness.new_run(cfg.model, task.prompt,
                                limits=Limits(max_turns=cfg.max_turns, max_tokens=cfg.max_tokens),
                                pricing=cfg.pricing)
        started = time.perf_counter()
        with stop_after(cfg.task_timeout_s, f"task timeout: {cfg.task_timeout_s} s") as signal:
            outcome = await harness.run(state.run_id, signal=signal)
            tool_runs, declined = list(outcome.tool_runs), 0
            while waiting_for_approval(outcome.state) and declined < cfg.max_turns:
                outcome = await harness.reject(state.run_id, UNATTENDED, signal=signal)
                tool_runs += outcome.tool_runs
                declined += 1
        wall_ms = (time.perf_counter() - started) * 1000
    s = summary(outcome.state, tool_runs, wall_ms)
    grade = task.grade(s["answer"])
    return {"task": task.name, "prompt": task.prompt, "status": s["status"], "turns": s["turns"],
            "tool_runs": len(s["tool_runs"]), "declined": declined, "wall_ms": s["ms"],
            "cost_usd": s["cost_usd"], "right": grade.right, "why": grade.why,
            "answer": outcome_words(s), "run_id": s["run_id"], "runs_dir": str(root / "runs")}


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    turns = sum(r["turns"] for r in rows)
    wall = sum(r["wall_ms"] for r in rows)
    return {"turns": turns, "tool_runs": sum(r["tool_runs"] for r in rows),
            "declined": sum(r["declined"] for r in rows), "wall_ms": round(wall, 1),
            "mean_turn_ms": round(wall / turns, 1) if turns else None,
            "cost_usd": round(sum(r["cost_usd"] for r in rows), 8),
            "right": sum(r["right"] for r in rows), "tasks": len(rows)}


async def run_eval(cfg: EvalConfig, keep_dir: Path | None = None) -> dict[str, Any]:
    """The tasks (all six unless the config names some), one after the other (a local model
    serves one request at a time). With ``keep_dir`` the runs stay on disk under it (for
    inspecting their traces)."""
    await asyncio.to_thread(encoding)  # load the rank file once, outside the first task's wall time
    with tempfile.TemporaryDirectory(prefix="tether-eval-") as tmp:
        root = keep_dir or Path(tmp)
        rows = [await run_task(task, cfg, root / task.name) for task in cfg.chosen()]
    return {"model": cfg.model, "base_url": cfg.base_url or "embedded scripted provider",
            "tasks": rows, "totals": totals(rows)}


TABLE_COLUMNS = ("task", "status", "turns", "tool_runs", "declined", "wall_ms", "cost_usd", "right", "why", "answer")


def markdown(result: dict[str, Any]) -> str:
    """The eval as a markdown table, with the totals as its last row."""
    rows = [{k: r[k] for k in TABLE_COLUMNS} for r in result["tasks"]]
    t = result["totals"]
    rows.append({"task": "**total**", "status": f"mean turn {cell('ms', t['mean_turn_ms'])} ms",
                 "turns": t["turns"], "tool_runs": t["tool_runs"], "declined": t["declined"], "wall_ms": t["wall_ms"],
                 "cost_usd": t["cost_usd"], "right": f"{t['right']}/{t['tasks']}", "why": "", "answer": ""})
    return f"model `{result['model']}` at {result['base_url']}\n\n{markdown_table(rows)}\n"


def emit(result: dict[str, Any], as_json: bool, out: Path | None = None) -> None:
    text = markdown(result)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    print(json.dumps(result) if as_json else text)


async def command(args: argparse.Namespace) -> int:
    """``tether eval``: exit 0 when every task ended in one of the five exits (wrong
    answers are data, not failures of the command)."""
    cfg = EvalConfig(base_url=args.base_url, model=args.model or EMBEDDED_MODEL, api_key=os.environ.get("LLM_API_KEY"),
                     max_turns=args.max_turns, task_timeout_s=args.task_timeout, tasks=tuple(args.task or ()))
    if cfg.base_url is None and args.model and args.model != EMBEDDED_MODEL:
        print(f"note: without --base-url, {args.model!r} names a scripted scenario", flush=True)
    emit(await run_eval(cfg), args.json, args.out)
    return 0
