"""A subagent's run, made and driven for the research tool of the run that asks.

The child is a run of its own on the store (``<parent>.<call id>``), made once: a parent
resumed after a crash finds the child its call made and goes on with it, or takes its result
if it had finished. It is offered the parent's read-only tools, at most
:data:`tether.agents.subagent.CHILD_MAX_TURNS` turns and what is left of the parent's budget.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from tether.agents.subagent import CHILD_MAX_TURNS, child_limits_budget
from tether.vocab.cancel import CancelSignal
from tether.store.hold import open_run, release
from tether.run.driver import RunDriver
from tether.run.loop import LoopEnv, RunLoop
from tether.vocab.state import RunState, Status
from tether.store.protocol import Store, call

CHILD_SYSTEM_PROMPT = (
    "You are a research subagent. Answer the question using the read-only tools, then reply "
    "with a short summary of what you found."
)
Spawn = Callable[[RunState, str, str, CancelSignal], Awaitable[RunState]]


def spawner(store: Store, env: Callable[[], LoopEnv], *, secrets: tuple[str, ...],
            child_model: Callable[[str], str | None], live: dict[str, RunState]) -> Spawn:
    """What the loop calls to run a subagent: ``env`` makes the child's loop environment,
    ``child_model`` names the model a child of a parent on a model runs on (None: the same),
    ``live`` is where views see the child while it runs."""
    async def spawn(parent: RunState, call_id: str, question: str, signal: CancelSignal) -> RunState:
        child_id = f"{parent.run_id}.{call_id}"
        if not await call(store, store.exists, child_id):
            child = RunState(
                run_id=child_id,
                model=child_model(parent.model) or parent.model,
                messages=[{"role": "system", "content": CHILD_SYSTEM_PROMPT},
                          {"role": "user", "content": question}],
                limits=replace(parent.limits, max_turns=CHILD_MAX_TURNS, budget_usd=child_limits_budget(parent)),
                policies=replace(parent.policies, auto_approve=[]),
                pricing=parent.pricing,
                parent_run_id=parent.run_id,
                base_url=parent.base_url,
                workspace=parent.workspace,
                agent=parent.agent,
                operator=parent.operator,  # started by whoever started its parent (a worker runs it as its own role)
                operator_name=parent.operator_name,
            )
            await call(store, store.create, child)
        state, handle = await open_run(store, child_id)
        trace = handle.trace(secrets)
        try:
            if state.status is not Status.RUNNING:
                return state  # finished before a crash: its result stands
            loop_env = env()
            loop = RunLoop(RunDriver(state, handle, trace, loop_env.sinks, loop_env.after_change), loop_env, signal)
            live[child_id] = state
            return await loop.run()
        finally:
            live.pop(child_id, None)
            trace.close()
            await release(handle)

    return spawn
