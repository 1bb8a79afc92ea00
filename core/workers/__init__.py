"""Workers: queued runs executed by any number of processes, on any number of hosts.

``tether submit`` creates a run in the PostgreSQL store and enqueues it; ``tether worker``
takes runs from the queue and drives them with the ordinary harness. DBOS (a library over
the same PostgreSQL) keeps the queue, each run's progress as a workflow, and the durable
wait for an approval; Tether's own tables keep the run itself (docs/scale-out.md says why
the line falls there).

The mapping:

* **One workflow per run**, ``tether.run(run_id)``, whose id is the run's id, registered
  under one application version (:data:`APP_VERSION`) by every worker whatever its Tether
  version: its code is the harness's resume path, which any version runs. Enqueueing the
  same run twice gives the same workflow.
* **A drive step** (:func:`~tether.workers.drive.drive`) takes the run and runs it until it stops, through
  :meth:`Harness.run` (or ``approve``/``reject`` after a decision). Its result is only the
  run's status. If the worker dies inside it, the recovered workflow runs the step again,
  and the harness resumes from the last committed Tether step: a model turn whose reply
  was saved is not asked again, and a write whose result is in the ledger is not done
  again. A step never drives a run another live process holds: it waits until the run is
  free (Tether's per-run advisory lock; the owner token fences saves besides).
* **An approval** ends the drive step with the run saved as waiting; the workflow then
  waits with ``DBOS.recv_async`` for a decision (sent by :func:`decide`), which survives
  the worker's death, and the next drive step applies it and goes on.
* **Queues per agent** (:func:`queue_for`): a worker listens only to the queues of the
  agents it can build (the demo agents, and the agents of its ``--config`` whose modules
  import here), so a run is never taken by a worker that lacks its agent. Such a worker
  says so in its log, in the workers table, and in the trace of each queued run it cannot
  take.
* **Recovery without Conductor.** Each worker holds a session advisory lock on its
  executor id for its life (:class:`~tether.workers.worker.Worker`); the server drops it the moment the process
  dies. Once a second a worker looks for executors with ``PENDING`` workflows whose lock
  is free and whose heartbeat is :data:`SILENT_S` old, claims the dead executor's lock (so only one worker recovers it), and resumes
  its workflows on their own queues (``resume_workflow(id, queue_name=...)``), so the
  concurrency limit holds for them too.
* **Recoveries that give up.** A run the dead worker was driving goes back to its queue's
  isolated twin (:data:`ISOLATED`: driven alone on a worker, so a later death is its own),
  and the death is counted in Tether's table ``recoveries``. At the death after
  :data:`MAX_RECOVERIES` recoveries with no progress in between, the run is parked as
  ``failed`` ("crashed every worker that took it", with each dead worker and when) and its
  workflow cancelled: no worker takes it again.
* **``--concurrency N`` is this process's**: N runs at once across all its queues, counted
  from DBOS's table at each claim (:mod:`~tether.workers.gate`), whatever other workers say.

The rooms, one concern each: :mod:`~tether.workers.names` (the names DBOS keeps: fixed, so
that queued workflows recover under any later release), :mod:`~tether.workers.database`
(engines, clients, tables), :mod:`~tether.workers.submit` (a run created and queued),
:mod:`~tether.workers.view` (the queue as a console sees it), :mod:`~tether.workers.decide`
(decisions and stops for runs no process holds), :mod:`~tether.workers.workflow` (the DBOS
workflow and its step), :mod:`~tether.workers.drive` (what the step does),
:mod:`~tether.workers.gate` (``--concurrency`` across queues), :mod:`~tether.workers.recovery`
(dead workers, and the recoveries that give up), :mod:`~tether.workers.worker` (the process)
and :mod:`~tether.workers.commands` (``tether worker``, ``tether submit``).
"""
