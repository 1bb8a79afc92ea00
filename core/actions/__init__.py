"""The operator's actions on a run, one way from every front: Stop, a decision (approve,
reject, edited arguments, an ACP agent's option, a signed link's), a follow-up, a rewind or a
fork, and a run's merge and discard.

The console, the CLI, the web pages and their signed links, the ACP server and the queue
workers call these and nothing below them (an import contract in pyproject.toml holds them
to it). Each action finds the run's route once: a queue worker's workflow that waits for it
(PostgreSQL), the process that holds the run (through the store's control channel,
:mod:`tether.store.operate`), or, when nobody holds it, this process, which adopts the run
and goes on with it (:mod:`tether.actions.adopting`, which finds that run's route: a
spent budget's ask, a merge, a paused program's run, or its own driver). The rules, the decision
deadline and the two-person check are then applied where the run is held
(:mod:`tether.run.controls`), the same whichever front asked.

- :mod:`tether.actions.control`: Stop, decide and follow up, whoever holds the run.
- :mod:`tether.actions.adopting`: a decision on a run nobody holds, made here.
- :mod:`tether.actions.rules`: a new rule deciding the calls already waiting.
- :mod:`tether.actions.deadlines`: the passed deadlines of runs no process holds.
- :mod:`tether.actions.takeback`: rewind and fork.
- :mod:`tether.actions.workspace`: a run's merge and discard.

The package imports nothing here, so that ``tether stop`` loads only the module it uses.
"""
