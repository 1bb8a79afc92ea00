"""``tether worker`` and ``tether submit``: the CLI's arguments turned into a running worker,
or a run created and queued.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.workers.recovery import MAX_RECOVERIES
from tether.workers.submit import Submission, submit
from tether.workers.worker import Worker
from tether.agents.config import find_config, load_config
from tether.approvals.commands import deadline_policy
import json

if TYPE_CHECKING:
    from tether.agents.config import Config
    from tether.agents.sets import AgentSet

def serve(url: str, *, concurrency: int = 1, config: Config | None = None,
          max_recoveries: int = MAX_RECOVERIES, agent_sets: Sequence[AgentSet] = ()) -> int:
    """``tether worker``: run queued runs until SIGINT or SIGTERM; then cancel what runs here
    (saved as interrupted by the shutdown, for the next worker to go on with) and exit 0."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("dbos").setLevel(os.environ.get("TETHER_DBOS_LOG", "ERROR"))
    logging.getLogger("httpx").setLevel(logging.WARNING)
    worker = Worker(url, concurrency=concurrency, config=config, max_recoveries=max_recoveries,
                    agent_sets=agent_sets)
    try:
        worker.start()
        print(f"worker {worker.executor_id} (pid {os.getpid()}) on {worker.store.where}: queues "
              + ", ".join(worker.queues), file=sys.stderr, flush=True)
        for name, why in worker.cannot.items():
            print(f"worker {worker.executor_id}: cannot run agent {name}: {why}", file=sys.stderr, flush=True)

        async def main() -> None:
            stopping = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stopping.set)
            await worker.supervise(stopping)

        asyncio.run(main())
    finally:
        worker.stop()
    return 1 if worker.superseded else 0


def config_path(path: Path | None) -> Path | None:
    return find_config(path)


def submit_command(args: Any, agent_sets: Sequence[AgentSet] = ()) -> int:
    """``tether submit``: print the run id at once (``--json``: id, queue, agent). ``agent_sets``:
    the agents runs may be of besides the agent file's (the CLI gives the demo's)."""


    url = _store_url(args)
    path = config_path(args.config)
    config = load_config(path) if path is not None else None

    deadline = deadline_policy(getattr(args, "decision_deadline", None), getattr(args, "on_deadline", None))
    state, queue = submit(url, Submission(args.agent, args.prompt, run_id=args.run_id, base_url=args.base_url,
                                          auto_approve=args.auto_approve, workspace=args.workspace, deadline=deadline,
                                          operator_name=getattr(args, "who", None)),
                          config=config, agent_sets=agent_sets)
    if args.json:
        print(json.dumps({"run_id": state.run_id, "queue": queue, "agent": args.agent, "status": "queued"}))
    else:
        print(state.run_id)
    return 0


def worker_command(args: Any, agent_sets: Sequence[AgentSet] = ()) -> int:
    """``tether worker``, able to run the agents of ``agent_sets`` (the CLI gives the demo's)."""
    url = _store_url(args)
    path = config_path(args.config)
    config = load_config(path) if path is not None else None
    max_recoveries = getattr(args, "max_recoveries", None)
    return serve(url, concurrency=args.concurrency, config=config,
                 max_recoveries=MAX_RECOVERIES if max_recoveries is None else max_recoveries, agent_sets=agent_sets)


def _store_url(args: Any) -> str:
    url = getattr(args, "store", None) or os.environ.get("TETHER_STORE")
    if not url or not re.match(r"^postgres(ql)?://", url):
        raise ValueError("workers need the PostgreSQL store: give --store postgresql://USER@HOST/DB "
                         "(or set TETHER_STORE)")
    return url
