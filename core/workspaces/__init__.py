"""A workspace of each run's own: a git worktree on the branch ``tether/RUN_ID``, or a copy
of a folder that is not a repository, so runs of one agent never share its folder, and what a
run changed can be shown, kept or thrown away as one thing (docs/workspaces.md).

* :mod:`~tether.workspaces.git` runs the git command line, off the event loop, never on the
  user's index;
* :mod:`~tether.workspaces.make` makes and removes one, each step safe to do again;
* :mod:`~tether.workspaces.setup` runs its setup commands;
* :mod:`~tether.workspaces.changes` reads what a run changed, and a file's diff;
* :mod:`~tether.workspaces.lifecycle` takes one through a run's life (the run's state records
  it: :class:`tether.vocab.state.RunWorkspace`);
* :mod:`~tether.workspaces.survey` lists them all, with what git knows that the store does not;
* :mod:`~tether.workspaces.merge` checks whether a run's work would merge, changing nothing.

Nothing here is imported by the run or the agents: the harness brings them together.
"""
