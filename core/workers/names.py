"""The names DBOS keeps in its tables for Tether: the application, the workflow, its step,
the decision topic and the queues.

They are written into every queued workflow's row, so they are fixed strings: a worker of
a later release must find, and recover, the workflows queued by an earlier one. Changing
one orphans every run that waits in the queue.
"""

from __future__ import annotations

import os
import re
import secrets
import socket

from tether.integrations import on_workers as programs
from tether.vocab.state import RunState

APP_NAME = "tether"
APP_VERSION = "tether-run-1"
"""One version for every worker: the workflow is ``run(run_id)`` over the harness's resume
path, which every Tether version runs, so workers of different releases share the queue.
A change to the workflow's shape (its steps, their order) needs a new value."""
WORKFLOW = "tether.run"
DRIVE_STEP = "tether.drive"
DECISION_TOPIC = "tether.decision"
DBOS_SCHEMA = "dbos"
DEMO_QUEUE = "tether-demo"
"""Every worker can build the demo agents (built-in tools only): one queue for them all."""
ISOLATED = ":isolated"
"""A run recovered from a worker that died while driving it goes back to its agent's queue
with this suffix: a worker takes such a run only when it drives nothing else, and takes
nothing else while it drives one, so each later death is that run's alone."""


def queue_for(agent_name: str, source: str | None) -> str:
    """The queue a run of this agent waits in: one for the demo agents, one per other agent."""
    if source == "demo":
        return DEMO_QUEUE
    return "tether-agent-" + re.sub(r"[^A-Za-z0-9_.-]", "_", agent_name)[:100]


def isolated(queue: str) -> str:
    """The queue where the recovered runs of ``queue`` wait, to be driven each on its own."""
    return queue if queue.endswith(ISOLATED) else queue + ISOLATED


def queue_of_run(state: RunState) -> str:
    ref = state.agent
    if ref is None:
        return DEMO_QUEUE
    if programs.is_program(state):  # a paused openai-agents run (tether.integrations.on_workers)
        return programs.QUEUE
    return queue_for(ref.name, ref.source)


def new_executor_id() -> str:
    """Unique per worker process: host, pid and a random tail (a pid is reused, a host renamed)."""
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:40]
    return f"w-{host}-{os.getpid()}-{secrets.token_hex(3)}"

