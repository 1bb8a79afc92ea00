"""What the adapters share: the run they open, how it ended, and the answer's words."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, Protocol

from tether.integrations import Supervised, Supervision
from tether.run.tracked import RunEnded, Stopped

if TYPE_CHECKING:
    from tether.run.tracked import TrackedRun
    from tether.store.protocol import Store
    from pathlib import Path


class Tracker(Protocol):
    """What an adapter needs of the harness it is given (:class:`tether.Harness`): its store,
    and a run of the program's loop to report into (:meth:`tether.Harness.track`). Typed
    here, so the adapters import nothing of the harness, which resumes a paused program with
    them (:func:`tether.integrations.openai_agents.resume`)."""

    store: Store
    workspaces_dir: Path

    def track(self, name: str, task: str = "", **options: Any) -> contextlib.AbstractAsyncContextManager[TrackedRun]:
        ...


class Ending:
    """How the driven code left the run: a Stop's or a limit's words, for :class:`Supervised`."""

    def __init__(self) -> None:
        self.reason = ""

    async def until(self, driving: Awaitable[None]) -> None:
        try:
            await driving
        except RunEnded as ended:
            self.reason = ended.reason
            raise
        except BaseExceptionGroup as group:  # a framework's task group: what ended the run, alone
            ended = _ended_in(group)
            if ended is None:
                raise
            self.reason = ended.reason
            raise ended from group

    def supervised(self, run: TrackedRun, output: Any = None, result: Any = None) -> Supervised:
        state = run.state
        reason = self.reason or getattr(state.interruption, "reason", None) or state.error or state.status.value
        completed = state.status.value == "completed"
        return Supervised(run.run_id, state.status, reason, output if completed else None,
                          result if completed else None)


@contextlib.asynccontextmanager
async def tracked(harness: Tracker, sv: Supervision, name: str, task: str, *, source: str, model: str,
                  attach: bool = False) -> AsyncIterator[tuple[TrackedRun, Ending]]:
    """The run on the store (:meth:`tether.Harness.track`) and what will say how it ended."""
    async with harness.track(sv.name or name, task, source=source, model=model, run_id=sv.run_id, limits=sv.limits,
                             pricing=sv.pricing, policies=sv.policies, attach=attach, sinks=sv.sinks,
                             **({} if attach else {"workspace": sv.workspace, "isolation": sv.isolation})) as run:
        yield run, Ending()


def stopped(run: TrackedRun) -> Stopped:
    """The Stop the run's signal carries, to raise in the program's code."""
    return Stopped(run.signal.reason or "stopped", run.signal.by)


def answer_text(run: TrackedRun, output: Any) -> str:
    """The answer to add to the transcript: none when the streamed text already said it."""
    text = output if isinstance(output, str) else shown(output)
    for message in reversed(run.state.messages):
        if message.get("role") == "assistant":
            return "" if message.get("content") == text else text
    return text


def shown(value: Any) -> str:
    """A tool's result or an agent's output, as text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump_json", None)
    if callable(dump):
        return str(dump())
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _ended_in(group: BaseExceptionGroup) -> RunEnded | None:
    for exc in group.exceptions:
        if isinstance(exc, RunEnded):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _ended_in(exc)
            if found is not None:
                return found
    return None


def with_workspace(given: Any, run: TrackedRun) -> Any:
    """What the agent's tools get as their ``deps`` / ``context``: the program's own, with its
    ``workspace`` attribute set to the run's workspace when it has one left as None; the
    run's workspace (a Path) when the program gives none; else as it is."""
    if run.workspace is None:
        return given
    if given is None:
        return run.workspace
    if getattr(given, "workspace", False) is None:
        with contextlib.suppress(AttributeError, TypeError):  # a frozen object keeps its own
            setattr(given, "workspace", run.workspace)
    return given
