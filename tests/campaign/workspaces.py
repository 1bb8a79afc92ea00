"""The crash campaign of a run's own workspace: kill ``tether`` at every boundary of making a
worktree, merging it and discarding it, then let the next command finish (issue 38, item 5).

Each operation is a flow of real ``tether`` processes (the campaign's shim arms the crash,
:mod:`tests.campaign.shim`) on a fresh repository and home:

* **create**: ``tether run destructive --isolate worktree`` (its deletion auto-approved), killed
  at each ``workspace_*`` boundary it passes; finished by ``tether resume RUN``;
* **merge (rule)**: ``tether merge RUN`` with a standing rule that allows it, killed at each
  boundary the merge passes; finished by ``tether merge RUN``;
* **merge (person)**: ``tether merge RUN`` asks, ``tether approve RUN`` merges and is killed at
  each boundary; finished by ``tether merge RUN``;
* **discard**: ``tether discard RUN --yes``, killed at each boundary; finished by ``tether
  discard RUN --yes``.
* **rewind** (issue 39): ``tether rewind RUN --to 0`` of the run made (its deletion
  checkpointed), killed at each ``rewind_*`` boundary; finished by ``tether rewind RUN --to 0``,
  which first finishes the rewind cut short.

* **checkpoint** (issue 39): ``tether run`` killed where a checkpoint's commit is made and its
  ref not yet written (``checkpoint_committed``); finished by ``tether resume RUN``;
* **undo** (issue 39): ``tether rewind RUN --undo`` after a rewind to 0, killed at each
  ``rewind_*`` and ``checkpoint_*`` boundary; finished by ``tether rewind RUN --undo``, which
  first finishes the undo cut short, then undoes it (so the end is checked by the count of
  undos: an odd one leaves the run's work, an even one checkpoint 0);
* **fork** (issue 39): ``tether fork RUN --at 1 --run-id f``, killed before the new run is
  made (``fork_prepared``); finished by the same command.
The rewind is killed at the ``checkpoint_*`` boundary of its checkpoint of the present too.

In *double* mode the finishing command is killed too, at the same boundary, and the command
after it finishes. What each cell must show:

* after each crash the run loads, ``tether workspaces --json`` lists it, and nothing is half
  merged: ``main`` is where it was or at a merge whose tree is the reference's, the run's
  branch is at its base or at its work, the user's checkout has no change it did not have;
* the finishing command exits 0, and the end is the reference's: a ready worktree with the
  run's work (create); one merge on ``main`` with the reference's tree and parents, the user's
  checkout clean and at it, the run completed (merge); no workspace, no branch, no stray
  worktree (discard).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.campaign.shim import CRASH_EXIT_CODE
from tests.support import cli_here, environ_now

REPO = Path(__file__).resolve().parents[2]
RUN = "w"
CAP_S = 120.0
CRASH, DOUBLE = "crash", "double"


@dataclass
class Cell:
    """One crash point of one operation, in one mode."""

    operation: str
    point: str
    mode: str
    problems: list[str] = field(default_factory=list)
    after: str = ""
    """What ``tether workspaces`` said after the (last) crash."""

    @property
    def ok(self) -> bool:
        return not self.problems


class Place:
    """A repository and a Tether home of one cell."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = root / "repo"
        self.home = root / "home"
        self.env = {**environ_now(), "TETHER_HOME": str(self.home), "GIT_OPTIONAL_LOCKS": "0"}
        self.env.pop("TETHER_CRASH_AT", None)
        # Every process of a cell gets the cell's environment, never os.environ at that moment:
        # the cells run on threads, and cli_here swaps os.environ while a command runs here.
        subprocess.run(["git", "init", "-q", "-b", "main", str(self.repo)], check=True, env=self.env)
        for name, text in (("access.log", "GET /\n"), ("errors.log", "worker 7 timed out\n"),
                           ("notes.txt", "notes\n")):
            (self.repo / name).write_text(text)
        self.git("add", "-A")
        self.git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
        self.first = self.git("rev-parse", "main").strip()

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=self.repo, capture_output=True, text=True, env=self.env)
        return done.stdout if done.returncode == 0 else ""

    def tether(self, *args: str, crash_at: str = "", log: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if crash_at:
            env["TETHER_CRASH_AT"] = crash_at
        if log is not None:
            env["TETHER_BOUNDARY_LOG"] = str(log)
        return subprocess.run([sys.executable, "-m", "tests.campaign.shim", *args, "--runs-dir",
                               str(self.home / "runs")], capture_output=True, text=True, env=env, cwd=REPO,
                              timeout=CAP_S)

    def here(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``tether ARGS`` by the CLI's main in this process (tests/support.py, cli_here), in the
        cell's environment: what is made before the crash and what is read after it. The
        command that is crashed, and each that finishes after a crash, is a process of its own
        (:meth:`tether`)."""
        return cli_here(*args, "--runs-dir", str(self.home / "runs"), env=self.env, cwd=REPO)

    def run_args(self) -> list[str]:
        return ["run", "destructive", "--run-id", RUN, "--workspace", str(self.repo), "--isolate", "worktree",
                "--auto-approve", "delete_file"]

    def survey(self) -> dict:
        done = self.here("workspaces", "--json")
        return json.loads(done.stdout) if done.returncode == 0 else {"unreadable": done.stderr}

    def shown(self) -> dict:
        done = self.here("show", RUN, "--json")
        return json.loads(done.stdout) if done.returncode == 0 else {"unreadable": done.stderr}


@dataclass(frozen=True)
class Operation:
    name: str
    prepare: Callable[[Place], None]
    """What is done, uncrashed, before the command that is crashed."""
    command: Callable[[Place], list[str]]
    finish: Callable[[Place], list[str]]
    end: Callable[[Place, dict], list[str]]
    """What is wrong with the end (against the reference's facts)."""
    only: str | tuple[str, ...] = ""
    """Crash only at boundaries whose name starts with this (create: the workspace's own)."""


def _made(place: Place) -> None:
    done = place.here(*place.run_args())
    assert done.returncode == 0, done.stderr


def _ruled(place: Place) -> None:
    _made(place)
    done = place.here("rules", "add", "--allow", "merge", "--reason", "merges go")
    assert done.returncode == 0, done.stderr


def _asked(place: Place) -> None:
    _made(place)
    done = place.here("merge", RUN)
    assert done.returncode == 3, done.stdout + done.stderr


def _created(place: Place, ref: dict) -> list[str]:
    wrong = []
    tree = place.home / "workspaces" / RUN
    if (tree / "access.log").exists() or not (tree / "notes.txt").exists():
        wrong.append("the worktree does not hold the run's work")
    if place.git("worktree", "list").count("tether/") != 1:
        wrong.append(f"worktrees: {place.git('worktree', 'list')!r}")
    survey = place.survey()
    if survey.get("strays") or [r.get("stage") for r in survey.get("workspaces", [])] != ["ready"]:
        wrong.append(f"tether workspaces: {survey}")
    if place.shown().get("status") != ref["status"]:
        wrong.append("the run did not end as the reference's")
    return wrong


def _merged(place: Place, ref: dict) -> list[str]:
    wrong = []
    if place.git("rev-parse", "main^{tree}").strip() != ref["tree"]:
        wrong.append("main's tree is not the reference's")
    if place.git("rev-list", "--count", "--merges", "main").strip() != "1":
        wrong.append(f"{place.git('rev-list', '--count', '--merges', 'main').strip()} merges on main, not 1")
    if place.git("status", "--porcelain") != "" or (place.repo / "access.log").exists():
        wrong.append("the user's checkout is not at the merge")
    shown = place.shown()
    if shown.get("status") != "completed" or not str(shown["messages"][-1]["content"]).startswith("Merged into main"):
        wrong.append("the run is not completed with the merge's words")
    main = place.git("rev-parse", "main")
    again = place.tether("merge", RUN)  # once more: nothing new, and nothing merged twice
    if again.returncode == 0 or "nothing new to merge" not in again.stderr or place.git("rev-parse", "main") != main:
        wrong.append(f"a merge after the merge was not refused as nothing new: {again.stdout}{again.stderr}")
    return wrong


def _discarded(place: Place, ref: dict) -> list[str]:
    wrong = []
    if (place.home / "workspaces" / RUN).exists():
        wrong.append("the workspace is still there")
    if place.git("branch", "--list", "tether/*"):
        wrong.append("the run's branch is still there")
    survey = place.survey()
    if survey.get("strays") or [r.get("stage") for r in survey.get("workspaces", [])] not in ([], ["discarded"]):
        wrong.append(f"tether workspaces: {survey}")
    if place.shown().get("messages") in (None, []):
        wrong.append("the transcript is gone")
    return wrong


def _rewound(place: Place, ref: dict) -> list[str]:
    wrong = []
    tree = place.home / "workspaces" / RUN
    if not (tree / "access.log").exists() or (tree / "access.log").read_text() != "GET /\n":
        wrong.append("the worktree is not at checkpoint 0 (access.log not back)")
    shown = place.shown()
    if [m.get("role") for m in shown.get("messages") or []] != ["system", "user"]:
        wrong.append(f"the transcript is not cut back to the task: {[m.get('role') for m in shown.get('messages') or []]}")
    if shown.get("status") != ref["status"] or any(r.get("stage") != "restored" for r in shown.get("rewinds") or []):
        wrong.append(f"the run is not as the reference's: {shown.get('status')}, {shown.get('rewinds')}")
    if place.git("status", "--porcelain") != "" or not (place.repo / "access.log").exists():
        wrong.append("the user's checkout changed")
    return wrong


def _rewound_to_0(place: Place) -> None:
    _made(place)
    done = place.here("rewind", RUN, "--to", "0")
    assert done.returncode == 0, done.stderr


def _undone(place: Place, ref: dict) -> list[str]:
    """The last undo finished, each one whole: an odd count of undos leaves the run's work (its
    deletion of access.log, its whole transcript), an even count checkpoint 0 again."""
    wrong = []
    shown = place.shown()
    rewinds = shown.get("rewinds") or []
    if not rewinds or any(r.get("stage") != "restored" for r in rewinds) or rewinds[0].get("kind") != "rewind" \
            or any(r.get("kind") != "undo" for r in rewinds[1:]):
        return [f"the rewinds are not one rewind then undos, each restored: {rewinds}"]
    work = len(rewinds[1:]) % 2 == 1
    tree = place.home / "workspaces" / RUN
    roles = [m.get("role") for m in shown.get("messages") or []]
    if (tree / "access.log").exists() == work:
        wrong.append(f"access.log {'is there' if work else 'is not back'} after {len(rewinds) - 1} undos")
    if (roles == ["system", "user"]) == work:
        wrong.append(f"the transcript is not as {len(rewinds) - 1} undos leave it: {roles}")
    if shown.get("status") != ref["status"] and work:
        wrong.append(f"the run's status is not the reference's: {shown.get('status')}")
    if place.git("status", "--porcelain") != "" or not (place.repo / "access.log").exists():
        wrong.append("the user's checkout changed")
    return wrong


def _checkpointed(place: Place, ref: dict) -> list[str]:
    """The run as the reference's, and its checkpoints each whole: listed, their files readable."""
    wrong = _created(place, ref)
    done = place.here("checkpoints", RUN, "--json")
    if done.returncode != 0:
        return wrong + [f"tether checkpoints failed: {done.stderr.strip()[-300:]}"]
    listed = json.loads(done.stdout).get("checkpoints") or []
    if [c.get("step") for c in listed] != list(range(1, len(listed) + 1)):
        wrong.append(f"the checkpoints are not steps 1..n: {[c.get('step') for c in listed]}")
    again = place.tether("rewind", RUN, "--to", "0")  # each checkpoint whole: a rewind to the start works
    if again.returncode != 0 or not (place.home / "workspaces" / RUN / "access.log").exists():
        wrong.append(f"a rewind to 0 after the crash failed: {again.stderr.strip()[-300:]}")
    return wrong


def _forked(place: Place, ref: dict) -> list[str]:
    wrong = []
    done = place.here("show", "f", "--json")
    if done.returncode != 0:
        return [f"the fork is not there: {done.stderr.strip()[-300:]}"]
    origin = json.loads(done.stdout).get("forked_from") or {}
    if (origin.get("run_id"), origin.get("step")) != (RUN, 1):
        wrong.append(f"the fork's lineage: {origin}")
    listed = place.here("runs", "--json")
    if sorted(r["run_id"] for r in json.loads(listed.stdout or "[]")) != ["f", RUN]:
        wrong.append(f"the runs are not {RUN} and f: {listed.stdout.strip()[-300:]}")
    again = place.tether("fork", RUN, "--at", "1", "--run-id", "f")
    if again.returncode == 0 or "exists already" not in again.stderr:
        wrong.append(f"a fork to the same id again was not refused: {again.stderr.strip()[-300:]}")
    return wrong


OPERATIONS = {
    "create": Operation("create", lambda p: None, lambda p: p.run_args(), lambda p: ["resume", RUN], _created,
                        only="workspace_"),
    "merge (rule)": Operation("merge (rule)", _ruled, lambda p: ["merge", RUN], lambda p: ["merge", RUN], _merged),
    "merge (person)": Operation("merge (person)", _asked, lambda p: ["approve", RUN], lambda p: ["merge", RUN],
                                _merged),
    "discard": Operation("discard", _made, lambda p: ["discard", RUN, "--yes"], lambda p: ["discard", RUN, "--yes"],
                         _discarded),
    "rewind": Operation("rewind", _made, lambda p: ["rewind", RUN, "--to", "0"], lambda p: ["rewind", RUN, "--to", "0"],
                        _rewound, only=("rewind_", "checkpoint_")),
    "checkpoint": Operation("checkpoint", lambda p: None, lambda p: p.run_args(), lambda p: ["resume", RUN],
                            _checkpointed, only="checkpoint_"),
    "undo": Operation("undo", _rewound_to_0, lambda p: ["rewind", RUN, "--undo"], lambda p: ["rewind", RUN, "--undo"],
                      _undone, only=("rewind_", "checkpoint_")),
    "fork": Operation("fork", _made, lambda p: ["fork", RUN, "--at", "1", "--run-id", "f"],
                      lambda p: ["fork", RUN, "--at", "1", "--run-id", "f"], _forked, only="fork_"),
}


def _half(place: Place, ref: dict) -> list[str]:
    """What is half done after a crash: the run unreadable, a merge half written."""
    wrong = []
    unreadable = place.shown().get("unreadable")
    if unreadable is not None:
        wrong.append(f"the run cannot be read: {unreadable.strip()[-300:]}")
    main = place.git("rev-parse", "main").strip()
    if main != place.first and place.git("rev-parse", "main^{tree}").strip() != ref.get("tree", ""):
        wrong.append("main moved to something that is not the merge")
    if main == place.first and place.git("status", "--porcelain") != "":
        wrong.append(f"the user's checkout changed: {place.git('status', '--porcelain')!r}")
    return wrong


def reference(operation: Operation, root: Path) -> tuple[list[str], dict]:
    """The flow uncrashed: the boundaries its command passes, and the facts its end has."""
    place = Place(root)
    operation.prepare(place)
    log = root / "boundaries.log"
    done = place.tether(*operation.command(place), log=log)
    assert done.returncode == 0, f"{operation.name}: the reference flow failed: {done.stderr}"
    names = log.read_text().split() if log.exists() else []
    seen: dict[str, int] = {}
    points = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        if name.startswith(operation.only):
            points.append(f"{name}:{seen[name]}")
    facts = {"tree": place.git("rev-parse", "main^{tree}").strip(), "status": place.shown().get("status")}
    wrong = operation.end(place, facts)
    assert not wrong, f"{operation.name}: the reference flow's end is wrong: {wrong}"
    return points, facts


def cell(operation: Operation, point: str, mode: str, root: Path, ref: dict) -> Cell:
    result = Cell(operation.name, point, mode)
    place = Place(root)
    operation.prepare(place)
    crashed = place.tether(*operation.command(place), crash_at=point)
    if crashed.returncode != CRASH_EXIT_CODE:
        result.problems.append(f"did not crash at {point} (exit {crashed.returncode}): {crashed.stderr.strip()[-300:]}")
        return result
    result.problems += _half(place, ref)
    rows = place.survey().get("workspaces", [])
    result.after = "; ".join(r.get("problem") or r.get("stage") or "" for r in rows)
    done = None
    if mode == DOUBLE:  # the finishing command killed too, where it passes the same boundary
        again = place.tether(*operation.finish(place), crash_at=point)
        if again.returncode == 0:  # it does not pass it: it finished
            done = again
        elif again.returncode != CRASH_EXIT_CODE:
            result.problems.append(f"the first finishing command failed (exit {again.returncode}): "
                                   f"{again.stderr.strip()[-300:]}")
            return result
        else:
            result.mode = "double (crashed again)"
            result.problems += _half(place, ref)
    done = done or place.tether(*operation.finish(place))
    if done.returncode != 0:
        result.problems.append(f"{' '.join(operation.finish(place))} exited {done.returncode}: "
                               f"{done.stderr.strip()[-300:]}")
        return result
    result.problems += operation.end(place, ref)
    return result


def sweep(root: Path, names: list[str] | None = None, modes: tuple[str, ...] = (CRASH, DOUBLE),
          workers: int = 2) -> list[Cell]:
    """Every crash point of the operations named (default all), in each mode."""
    jobs = []
    for name in names or list(OPERATIONS):
        operation = OPERATIONS[name]
        points, facts = reference(operation, Path(tempfile.mkdtemp(prefix="ref-", dir=root)))
        jobs += [(operation, point, mode, facts) for point in points for mode in modes]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: cell(job[0], job[1], job[2],
                                              Path(tempfile.mkdtemp(prefix="cell-", dir=root)), job[3]), jobs))


def table(cells: list[Cell]) -> str:
    from tests.campaign.crash import markdown

    rows = [[c.operation, c.point, c.mode, c.after or "-", "ok" if c.ok else "FAILED"] for c in cells]
    rows.append(["total", str(len(cells)), "", "", f"{sum(c.ok for c in cells)}/{len(cells)} ok"])
    return markdown(["operation", "crash at", "mode", "tether workspaces after the crash", "finished"], rows)


def failures(cells: list[Cell]) -> str:
    return "\n".join(f"- {c.operation} at {c.point} ({c.mode}): {'; '.join(c.problems)}" for c in cells if not c.ok)
