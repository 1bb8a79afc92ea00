"""The crash campaign, reduced to fit ``make test``; ``make campaign`` runs all of it.

Reduced to one crash point per distinct gap (the full sweep takes minutes on two cores):
a reply lost before its save, a reply saved but not traced, a read-only tool result lost,
the final answer saved before the final status, the approval and the write's intent
before and after their saves, a write done but not recorded; plus a second crash during
the resume and a real SIGKILL. Each cell is a run killed where stated, loaded, resumed
to its end and compared with an uninterrupted run (tests/campaign/crash.py says how).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.vocab.state import Status
from tether.store.files.store import RunStore
from tests.support import cli_here
from tests.campaign.crash import (
    CRASH, DOUBLE, SCENARIOS, SIGKILL, Campaign, Process, failures, table, trace_problems,
)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    with Campaign(tmp_path_factory.mktemp("campaign")) as c:
        yield c


def _holds(campaign: Campaign, name: str, ks: list[int], modes: tuple[str, ...] = (CRASH,)) -> None:
    result = campaign.sweep(name, ks, modes=modes)
    assert result.points, "no crash point ran"
    broken = failures([result])
    assert not broken, f"\n{table([result])}\n{broken}"


# plan's 22 boundaries: 4 per reply (before_save_reply, before_save, after_save,
# after_save_reply), 4 per tool (before_tool, after_tool, and the result's save), 2 to stop.
PLAN_POINTS = [2, 4, 6, 8, 20, 22]
# destructive: the run (1-14) stops for approval; `tether approve` (15-28) saves the
# approval (15-16), the intent (17-18), runs the delete (19-20), saves its result (21-22).
DESTRUCTIVE_POINTS = [14, 15, 17, 19, 20, 21]


def test_plan_survives_a_crash_in_each_gap(campaign: Campaign):
    _holds(campaign, "plan", PLAN_POINTS)


def test_destructive_approved_survives_a_crash_in_each_gap(campaign: Campaign):
    _holds(campaign, "destructive", DESTRUCTIVE_POINTS)


def test_a_rule_decided_delete_survives_a_crash_before_the_decision_is_saved(campaign: Campaign):
    """Crash where the standing rule has matched and the decision is not saved yet, and just
    after its save: the resumed run decides by the rule again, once, and deletes once."""
    reference = campaign.reference(SCENARIOS["destructive_ruled"])
    matched = reference.boundaries.index("rule_matched") + 1
    _holds(campaign, "destructive_ruled", [matched, matched + 1, matched + 2])
    state = reference.states["victim"]
    (decision,) = state.approvals.values()
    assert (decision.by, decision.rule) == ("rule R1", "R1")


def test_a_second_crash_during_the_resume_and_a_real_sigkill(campaign: Campaign):
    _holds(campaign, "repeat_write", [8], modes=(DOUBLE, SIGKILL))


def test_lost_reply_window_is_read_from_the_boundary_log():
    """Only a death after a reply arrived and before its save may cost a second request."""
    def died_at(*names: str) -> Process:
        return Process("run", 86, list(names), 1, "", "")

    assert died_at("before_save_reply").lost_a_reply
    assert died_at("before_save_reply", "before_save").lost_a_reply
    assert not died_at("before_save_reply", "before_save", "after_save").lost_a_reply
    assert not died_at("before_tool", "after_tool", "before_save").lost_a_reply
    assert not Process("run", 0, ["before_save_reply"], None, "", "").lost_a_reply


def test_trace_check_names_what_is_missing(tmp_path: Path):
    """The campaign's trace check itself: a trace without its last turn and stop is caught."""
    ran = cli_here("run", "plan", "--run-id", "p", "--runs-dir", str(tmp_path / "runs"), "--workspace",
                   str(tmp_path / "ws"))
    assert ran.returncode == 0, ran.stderr
    state = RunStore(tmp_path / "runs").load("p")
    lines = (tmp_path / "runs" / "p" / "trace.jsonl").read_bytes().splitlines(keepends=True)
    assert trace_problems(lines, state) == []
    problems = trace_problems(lines[:-2], state)
    assert problems == ["saved turn(s) [3] never traced", "last event is tool_result/None, not run_stopped/completed"]


def test_resume_and_approve_act_on_the_runs_own_workspace(tmp_path: Path):
    """After a crash the operator types ``tether approve ID`` (or resume) with only the runs
    dir: the call must act on the workspace the run was started on, not the default one."""
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home")}
    runs = ["--runs-dir", str(tmp_path / "runs")]

    def tether(*args: str) -> subprocess.CompletedProcess:  # the CLI's main, in this process
        return cli_here(*args, *runs, env=env)

    started = tether("run", "destructive", "--run-id", "d", "--workspace", str(tmp_path / "own"))
    assert started.returncode == 5, started.stderr
    assert tether("approve", "d").returncode == 0
    assert RunStore(tmp_path / "runs").load("d").status is Status.COMPLETED
    assert not (tmp_path / "own" / "access.log").exists(), "the approved deletion went elsewhere"
    default = tmp_path / "home" / "workspace" / "access.log"
    assert not default.parent.exists() or default.exists(), "a file in the default workspace was deleted"
