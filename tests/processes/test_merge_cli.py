"""``tether merge`` on real git repositories: the merge is the call ``merge``, decided as any
call is (a rule, two people), refused in words before it asks (a conflict, a dirty target,
whose changes are kept), bound to the diff it was asked for, and finished after a crash by
the next command (docs/workspaces.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tether.harness import Harness
from tether.vocab.state import NeedsApproval, Status
from tether.store.files.store import RunStore
from tests.campaign.shim import CRASH_EXIT_CODE
from tests.processes.test_workspaces_cli import RUN, isolated, repo, where, workspace_of  # noqa: F401 (repo: fixture)
from tests.support import cli_here, crashing, git, home  # noqa: F401 (home: a fixture)

COMMIT = ("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm")


def done_run(repo: Path, home: Path) -> None:
    """The destructive scenario in a worktree of ``repo``: it deletes access.log there."""
    ran = cli_here(*isolated(repo, home))
    assert ran.returncode == 0, ran.stderr


def merged_into_main(repo: Path) -> bool:
    return git(repo, "merge-base", "--is-ancestor", f"tether/{RUN}", "main") == "" and not (repo / "access.log").exists()


def test_a_merge_waits_for_a_person_then_approve_merges_it_and_the_audit_has_it(home: Path, repo: Path) -> None:
    done_run(repo, home)
    asked = cli_here("merge", RUN, *where(home))
    assert asked.returncode == 3, asked.stderr
    assert "its merge into main waits for a decision by a person" in asked.stdout and "+0 −1 in 1 file" in asked.stdout
    assert (repo / "access.log").exists() and git(repo, "rev-list", "--count", "main") == "1\n"  # nothing yet
    shown = json.loads(cli_here("show", RUN, "--json", *where(home)).stdout)
    assert shown["status"] == "interrupted" and shown["interruption"]["toolName"] == "merge"
    assert json.loads(shown["interruption"]["args"])["into"] == "main"

    approved = cli_here("approve", RUN, *where(home))
    assert approved.returncode == 0, approved.stderr
    assert merged_into_main(repo) and git(repo, "status", "--porcelain") == ""
    assert "Merge the work of the Tether run w" in git(repo, "log", "-1", "--format=%s", "main")
    shown = json.loads(cli_here("show", RUN, "--json", *where(home)).stdout)
    assert shown["status"] == "completed" and shown["interruption"] is None
    assert shown["messages"][-1]["content"].startswith("Merged into main as ")
    record, = [r for r in json.loads(cli_here("decisions", "--json", *where(home)).stdout) if r["tool"] == "merge"]
    assert record["verdict"] == "approved" and record["run_id"] == RUN


def test_an_allow_rule_on_into_main_merges_at_once_and_squash_makes_one_commit(home: Path, repo: Path) -> None:
    done_run(repo, home)
    assert cli_here("rules", "add", "--allow", "merge", "--where", "into=main", "--reason", "main takes it", *where(home)).returncode == 0
    merged = cli_here("merge", RUN, "--squash", *where(home))
    assert merged.returncode == 0, merged.stderr
    assert "merged into main as " in merged.stdout and "(squashed)" in merged.stdout
    assert not (repo / "access.log").exists()
    assert git(repo, "rev-list", "--parents", "-1", "main").split().__len__() == 2  # one parent: squashed
    record, = [r for r in json.loads(cli_here("decisions", "--json", *where(home)).stdout) if r["tool"] == "merge"]
    assert record["by"].startswith("rule ")


async def test_a_merge_ruled_to_need_two_people_is_merged_by_the_second(home: Path, repo: Path) -> None:
    done_run(repo, home)
    assert cli_here("rules", "add", "--ask", "merge", "--where", "into=main", "--approvals", "2", "--reason", "two people merge",
                    *where(home)).returncode == 0
    assert cli_here("merge", RUN, *where(home)).returncode == 3
    async with Harness(store=RunStore(home / "runs"), workspaces_dir=home / "workspaces") as harness:
        first = await harness.approve(RUN, by="ana", account="ana")
        assert first.state.status is Status.INTERRUPTED and isinstance(first.state.interruption, NeedsApproval)
        assert first.state.interruption.approvers == ("ana",)
        assert (repo / "access.log").exists()  # one of two: nothing merged
        with pytest.raises(Exception, match="already"):
            await harness.approve(RUN, by="ANA again", account="ana")
        second = await harness.approve(RUN, by="bob", account="bob")
    assert second.state.status is Status.COMPLETED and merged_into_main(repo)


def test_a_conflict_is_refused_in_words_and_nothing_is_asked(home: Path, repo: Path) -> None:
    done_run(repo, home)
    (repo / "access.log").write_text("GET /changed\n")
    git(repo, "add", "access.log")
    git(repo, *COMMIT, "changed on main")
    refused = cli_here("merge", RUN, *where(home))
    assert refused.returncode == 2
    assert "cannot be merged into main: it conflicts with main in access.log" in refused.stderr
    shown = json.loads(cli_here("show", RUN, "--json", *where(home)).stdout)
    assert shown["status"] == "completed" and shown["interruption"] is None


def test_a_dirty_target_is_refused_in_words_and_its_changes_are_kept(home: Path, repo: Path) -> None:
    done_run(repo, home)
    (repo / "access.log").write_text("GET / mine, not committed\n")
    refused = cli_here("merge", RUN, *where(home))
    assert refused.returncode == 2
    assert "main is checked out at" in refused.stderr and "uncommitted changes to access.log" in refused.stderr
    assert (repo / "access.log").read_text() == "GET / mine, not committed\n"
    assert git(repo, "rev-list", "--count", "main") == "1\n"


def test_a_target_in_another_worktree_is_updated_when_clean_and_refused_when_dirty(
        home: Path, repo: Path, tmp_path: Path) -> None:
    done_run(repo, home)
    git(repo, "branch", "release")
    other = tmp_path / "release-checkout"
    git(repo, "worktree", "add", "-q", str(other), "release")
    (other / "access.log").write_text("edited in the release checkout\n")
    refused = cli_here("merge", RUN, "--into", "release", *where(home))
    assert refused.returncode == 2 and f"release is checked out at {other}" in refused.stderr
    assert (other / "access.log").read_text() == "edited in the release checkout\n"

    git(other, "checkout", "-q", "--", "access.log")
    assert cli_here("rules", "add", "--allow", "merge", "--reason", "merges go", *where(home)).returncode == 0
    merged = cli_here("merge", RUN, "--into", "release", *where(home))
    assert merged.returncode == 0, merged.stderr
    assert not (other / "access.log").exists() and git(other, "status", "--porcelain") == ""
    assert (repo / "access.log").exists()  # main is not the target


def test_a_change_after_the_merge_was_asked_needs_a_new_decision(home: Path, repo: Path) -> None:
    done_run(repo, home)
    assert cli_here("merge", RUN, *where(home)).returncode == 3
    (workspace_of(home) / "notes.txt").write_text("changed after the merge was asked\n")
    approved = cli_here("approve", RUN, *where(home))
    assert approved.returncode == 2
    assert "not merged: its workspace changed after the merge was approved" in approved.stderr
    assert f"tether merge {RUN} asks for a new decision" in approved.stderr
    assert (repo / "access.log").exists() and git(repo, "rev-list", "--count", "main") == "1\n"
    shown = json.loads(cli_here("show", RUN, "--json", *where(home)).stdout)
    assert shown["status"] == "completed" and shown["messages"][-1]["content"].startswith("Not merged: the workspace")
    again = cli_here("merge", RUN, *where(home))
    assert again.returncode == 3 and "waits for a decision" in again.stdout


@pytest.mark.parametrize("at", ["merge_recorded:1", "merge_branch_moved:1", "merge_target_moved:1"])
def test_a_crash_mid_merge_is_finished_by_the_next_merge(home: Path, repo: Path, at: str) -> None:
    done_run(repo, home)
    assert cli_here("rules", "add", "--allow", "merge", "--reason", "merges go", *where(home)).returncode == 0
    crashed = crashing(at, "merge", RUN, *where(home))
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    row, = json.loads(cli_here("workspaces", "--json", *where(home)).stdout)["workspaces"]
    assert row["problem"] == f"its merge into main was cut short: tether merge {RUN} finishes it"
    refused = cli_here("resume", RUN, "--message", "more", *where(home))
    assert refused.returncode == 2 and "merge" in refused.stderr
    finished = cli_here("merge", RUN, *where(home))
    assert finished.returncode == 0, finished.stderr
    assert "merged into main as " in finished.stdout
    assert merged_into_main(repo) and git(repo, "status", "--porcelain") == ""
    assert git(repo, "rev-list", "--count", "--merges", "main") == "1\n"  # one merge, not two
    shown = json.loads(cli_here("show", RUN, "--json", *where(home)).stdout)
    assert shown["status"] == "completed"
    again = cli_here("merge", RUN, *where(home))  # merged already: nothing new, nothing merged twice
    assert again.returncode == 2 and "its work is in main already" in again.stderr
    assert "nothing new to merge; nothing was asked" in again.stderr
    assert git(repo, "rev-list", "--count", "--merges", "main") == "1\n"


def test_workspaces_prune_merged_removes_only_the_merged_ones(home: Path, repo: Path) -> None:
    done_run(repo, home)
    assert cli_here("rules", "add", "--allow", "merge", "--reason", "merges go", *where(home)).returncode == 0
    assert cli_here("merge", RUN, *where(home)).returncode == 0
    other = cli_here("run", "destructive", "--run-id", "x", "--workspace", str(repo), "--isolate", "worktree",
                     "--auto-approve", "delete_file", *where(home))
    assert other.returncode == 0, other.stderr
    nothing = cli_here("workspaces", "prune", *where(home))
    assert nothing.returncode == 2 and "needs --merged, --older-than AGE or both" in nothing.stderr
    young = cli_here("workspaces", "prune", "--older-than", "7d", "--yes", *where(home))
    assert young.returncode == 0 and "nothing was removed" in young.stdout
    pruned = cli_here("workspaces", "prune", "--merged", "--yes", *where(home))
    assert pruned.returncode == 0, pruned.stderr
    assert not workspace_of(home).exists() and (home / "workspaces" / "x").resolve().exists()
    branches = git(repo, "branch", "--list", "tether/*")
    assert "tether/x" in branches and f"tether/{RUN}\n" not in branches


def test_merge_refuses_a_copy_in_words(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    subprocess.run(["cp", "-r", str(Path(__file__).parent), str(folder / "x")], check=True)
    ran = cli_here("run", "plan", "--run-id", RUN, "--workspace", str(folder), "--isolate", "copy", *where(home))
    assert ran.returncode == 0, ran.stderr
    refused = cli_here("merge", RUN, *where(home))
    assert refused.returncode == 2 and "which is no repository to merge into" in refused.stderr


def test_an_edited_approval_of_a_merge_is_refused_in_words_and_merges_nothing(home: Path, repo: Path) -> None:
    """Its target and diff are what was checked: an approval with other arguments (into, squash)
    would merge what nobody checked, or be silently ignored."""
    done_run(repo, home)
    assert cli_here("merge", RUN, *where(home)).returncode == 3
    edited = cli_here("approve", RUN, "--args", '{"into": "release", "squash": true, "diff": "x", "checks": "none"}',
                      *where(home))
    assert edited.returncode == 2, edited.stdout + edited.stderr
    assert "a merge's arguments cannot be edited" in edited.stderr and "nothing was decided" in edited.stderr
    assert (repo / "access.log").exists() and git(repo, "rev-list", "--count", "main") == "1\n"
    assert cli_here("approve", RUN, *where(home)).returncode == 0
    assert merged_into_main(repo)
