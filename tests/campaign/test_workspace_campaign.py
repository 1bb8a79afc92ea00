"""The workspace crash campaign (tests/campaign/workspaces.py), reduced to fit ``make test``:
a merge approved by a person, killed at each of its boundaries, and again in the ``tether
merge`` that finishes it; ``make campaign`` runs every point of making, merging and
discarding. tests/processes/test_merge_cli.py and test_workspaces_cli.py hold single crashes.

The suite's sample hits every kill point of rewind, undo, checkpoint and fork, each operation
at each of its points, and each point in both modes (crashed once; crashed again in the command
that finishes it): the rewind's points once, and twice through the undo, whose points they are;
merge, checkpoint and fork twice (a second crash is a first one followed by a finishing command
that is itself cut short). ``make campaign`` runs every operation at every point in both modes."""

from __future__ import annotations

from pathlib import Path

from tests.campaign.workspaces import CRASH, DOUBLE, failures, sweep, table


def test_a_merge_killed_twice_at_each_boundary_is_finished_once_by_the_next_merge(tmp_path: Path) -> None:
    cells = sweep(tmp_path, ["merge (person)"], modes=(DOUBLE,))
    assert [c.point for c in cells] == ["merge_recorded:1", "merge_branch_moved:1", "merge_target_moved:1"]
    assert not failures(cells), f"\n{table(cells)}\n{failures(cells)}"
    assert all(c.after.startswith("its merge into main was cut short: tether merge w finishes it") for c in cells), \
        table(cells)


def test_a_rewind_killed_once_and_its_undo_killed_twice_at_each_boundary_are_finished_by_the_next_command(
        tmp_path: Path) -> None:
    cells = sweep(tmp_path, ["rewind"], modes=(CRASH,)) + sweep(tmp_path, ["undo"], modes=(DOUBLE,))
    points = ["checkpoint_committed:1", "rewind_recorded:1", "rewind_restored:1"]
    assert sorted((c.operation, c.point) for c in cells) == [("rewind", p) for p in points] + [("undo", p) for p in points]
    assert [c.mode.split()[0] for c in cells] == [CRASH] * 3 + [DOUBLE] * 3
    assert not failures(cells), f"\n{table(cells)}\n{failures(cells)}"


def test_a_checkpoint_and_a_fork_killed_twice_are_finished_by_the_next_command(tmp_path: Path) -> None:
    cells = sweep(tmp_path, ["checkpoint", "fork"], modes=(DOUBLE,))
    assert sorted((c.operation, c.point) for c in cells) == [
        ("checkpoint", "checkpoint_committed:1"), ("fork", "fork_prepared:1")]
    assert not failures(cells), f"\n{table(cells)}\n{failures(cells)}"
