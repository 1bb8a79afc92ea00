"""How an ACP run goes on in an earlier session, and what it makes of a turn an agent cancelled
by itself after a rejection (kept out of :mod:`tether.acp.run`, which is long enough).

- A follow-up uses ``session/resume`` where the agent advertises it (the agent goes on without
  replaying its history), else ``session/load``. An agent that advertises ``loadSession`` and
  then fails it (Gemini CLI 0.61) gets a new session: the run goes on, and a warning says the
  agent starts without its earlier conversation.
- Codex answers a rejected write (its ``abort`` option) by cancelling its whole turn. That is
  no Stop: when nobody stopped the run and a rejection's words are waiting, the turn counts as
  ended, so that the words go to the agent as its next prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from tether.acp.client import AcpSession
from tether.acp.errors import AcpError, AgentDied, exit_words
from tether.agents.agent import AcpCommand
from tether.vocab.events import RunWarning
from tether.vocab.state import Cancelled, RunState, Status

__all__ = ["ADOPTED", "ORPHANED", "adopt", "adopted_session", "came_back_words", "died_words", "first_session", "follow_up_session", "load_failed_words", "rejected_turn_cancelled", "restart_words", "started_again"]


def load_failed_words(agent: str, session_id: str, error: AcpError) -> str:
    return (f"{agent} could not go on in its earlier session {session_id} ({error}): this follow-up runs in a "
            "new session, without the agent's memory of the earlier turns")


async def follow_up_session(session: AcpSession, session_id: str, emit: Callable[[Any], None], run_id: str) -> str:
    """The session a follow-up goes on in: the earlier one, resumed or loaded; else a new one,
    with a warning in the run's record."""
    try:
        return await session.follow_up(session_id)
    except AgentDied:
        raise
    except AcpError as exc:
        name = session.info.name if session.info else "the agent"
        emit(RunWarning(run_id=run_id, text=load_failed_words(name, session_id, exc)))
        return await session.new_session()


async def first_session(session: AcpSession, forked_from: dict[str, Any] | None, emit: Callable[[Any], None],
                        run_id: str) -> tuple[str, str]:
    """A run's first session and, for a fork, how it was made: ``session/fork`` of the origin's
    session where the fork is at its last checkpoint (``forked_from["session"]``) and the agent
    advertises ``sessionCapabilities.fork``; else, or when the agent refuses the fork (the Claude
    adapter finds no session of another folder: docs/acp.md), a new session, told in words
    (``told``), the refusal in a warning."""
    origin = (forked_from or {}).get("session")
    if origin and session.session_capability("fork"):
        try:
            return await session.fork_session(str(origin)), "session/fork"
        except AgentDied:
            raise
        except AcpError as exc:
            name = session.info.name if session.info else "the agent"
            emit(RunWarning(run_id=run_id, text=f"{name} refused session/fork of session {origin} ({exc}): the fork "
                            "runs in a new session, told in words what was done up to its checkpoint"))
    return await session.new_session(), "told" if forked_from else ""


ADOPTED = "acp_session"
"""The key of a run's first prompt that names the agent's own earlier session the run adopts
(:meth:`tether.Harness.create` with ``adopt``): kept with the prompt, so whichever process
drives the run first goes on in that session."""


def adopted_session(messages: Sequence[dict[str, Any]]) -> str | None:
    """The agent's session a run adopts, if it was made to adopt one."""
    first = next((m for m in messages if m.get("role") == "user"), None)
    return str(first[ADOPTED]) if first and first.get(ADOPTED) else None


async def adopt(session: AcpSession, session_id: str) -> str:
    """Go on in the agent's own earlier session ``session_id`` (one it listed): ``session/resume``
    where it advertises it, else ``session/load``. AcpError in words when it can do neither, or
    refuses: a run made to adopt a session never starts a new one behind the operator's back."""
    name = session.info.name if session.info else "the agent"
    if not session.session_capability("resume") and not (session.info and session.info.load_session):
        raise AcpError(f"{name} cannot go on in its session {session_id}: it advertises neither session/resume "
                       "nor loadSession")
    try:
        return await session.follow_up(session_id)
    except AgentDied:
        raise
    except AcpError as exc:
        raise AcpError(f"{name} could not go on in its session {session_id}: {exc}") from None


ORPHANED = "the process that drove this ACP agent ended mid-turn, and the agent with it"
"""How a run whose driving process died (a SIGKILL, a crash) is ended by the next operation on it."""

_DIED = re.compile(r"the agent .+? (?:exited with status \d+|was killed by signal \d+(?: \(status \d+\))?|is gone) "
                   r"during \S+")
"""The start of an :class:`~tether.acp.errors.AgentDied`'s words: a run it ended says so."""


def died_words(state: RunState) -> str | None:
    """How the run's agent died when the run last stopped, in words, where it died rather
    than being ended by Tether: its process was killed or crashed mid-turn (``the agent
    fake-agent was killed by signal 9 during session/prompt``), or the process that drove the
    run died and took the agent with it. None for a run Tether ended (its agent closed)."""
    why = state.interruption
    if state.status is not Status.INTERRUPTED or not isinstance(why, Cancelled) or why.by:
        return None
    if why.reason.startswith(ORPHANED):
        return ORPHANED.replace("this ACP agent", "the run")
    found = _DIED.match(why.reason)
    return found.group(0) if found else None


def came_back_words(name: str, died: str, old_id: str, session: AcpSession, new_id: str) -> str:
    """What the transcript says when a follow-up started an agent that had died with its run."""
    how = ("by session/resume" if session.resumed else "by session/load (it replayed its history)") \
        if new_id == old_id else f"in a new session {new_id} (without its memory of the earlier turns)"
    went = f"in its session {old_id} {how}" if new_id == old_id else how
    return (f"the agent {name} had died with the run's last turn ({died}): Tether started it again "
            f"(pid {session.pid}) and it went on {went}")


def rejected_turn_cancelled(stop_reason: str, stopped: bool, rejections: Sequence[str], command: AcpCommand) -> bool:
    """Whether a ``cancelled`` turn is the agent's own answer to a rejection (Codex), not a Stop."""
    return stop_reason == "cancelled" and not stopped and bool(rejections) and command.tell_rejections


def restart_words(name: str, returncode: int | None, old_id: str, session: AcpSession, new_id: str) -> str:
    """What the transcript says when a dead agent was started again for the next turn."""
    how = ("by session/resume" if session.resumed else "by session/load (it replayed its history)") \
        if new_id == old_id else f"in a new session {new_id} (without its memory of the earlier turns)"
    went = f"in its session {old_id} {how}" if new_id == old_id else how
    return (f"the agent {name}'s process had ended between turns (it {exit_words(returncode)}): Tether started "
            f"it again (pid {session.pid}) and it went on {went}")


async def started_again(dead: AcpSession, make: Callable[[], AcpSession], emit: Callable[[Any], None],
                        run_id: str) -> AcpSession:
    """A dead agent's session made again: a new process, ``initialize``, then its earlier session
    resumed, else loaded, else a new one; the run's record says which, in words. The dead one is
    closed; the new one takes its event sink."""
    old_id = dead.session_id
    name = dead.info.name if dead.info else "the agent"
    await dead.close()  # reaps it: its exit status is known after
    code = dead.returncode
    session = make()
    session.on_event = dead.on_event
    try:
        await session.start()
        new_id = await follow_up_session(session, old_id, emit, run_id) if old_id else await session.new_session()
    except BaseException:
        await session.close()
        raise
    emit(RunWarning(run_id=run_id, text=restart_words(name, code, old_id or "?", session, new_id)))
    return session
