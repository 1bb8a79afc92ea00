"""The control channel: Stop and decisions reach whichever process runs a run.

A request (stop, approve, reject, report) is appended to the run's channel in the store
first, so it is never lost: a request for a run whose process died is there when the run is
adopted, and the adopting process handles it. Then the process that holds the run is told,
at the address it published as the run's owner (:attr:`tether.store.owner.Owner.control`);
it reads the requests it has not handled yet, acts on them at once, and answers in words
("stopped", "already decided: approved by alice@host"). So a Stop from another terminal
reaches a tool in the middle of its work within a round trip, and a process that waits for
a decision (``--wait-for-decision``) gets it the moment it is made.

How the owner is told is the store's business (:meth:`tether.store.protocol.Store.deliver`):
the file store pokes a Unix socket (:mod:`tether.store.unix`), PostgreSQL notifies the owner
on the database, on any host (:mod:`tether.store.postgres.control`). This module holds what
both share, the request and the reply; :func:`tether.store.operate.request` sends one.

The requests a run has handled are counted in its saved state (``control_seen``), so an
adopting process knows which are new. A request that reaches a run no longer running
(it stopped between the check and the request) is answered as such and never applied
later: only a run saved as ``running``, that is, one whose process died, adopts
requests it never handled.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from tether.store.operator import DELIVERY_TIMEOUT_S, operator_name

__all__ = ["DELIVERY_TIMEOUT_S", "KINDS", "ControlListener", "ControlReply", "ControlRequest", "Kind",
           "operator_name"]

Kind = Literal["stop", "approve", "reject", "report"]
"""``report``: what a reporter that could not hold a program's run adds to it (:meth:`tether.run.tracked.TrackedRun.reported`)."""
KINDS: tuple[str, ...] = ("stop", "approve", "reject", "report")


@dataclass(frozen=True, slots=True)
class ControlRequest:
    kind: Kind
    text: str = ""
    """The reason (stop, reject) or the note (approve)."""
    call_id: str | None = None
    by: str = "operator"
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    ts: float = field(default_factory=time.time)
    option: str | None = None
    """An ACP agent's permission option to answer with (``tether approve --option ID``)."""
    silent: bool = False
    """A rejection whose words are not sent on to an ACP agent (``tether reject --silent``)."""
    args: str | None = None
    """An approval's edited arguments (JSON): the call runs with these (``tether approve --args``)."""
    rule: str | None = None
    """The standing rule that decides (its id), when no person does."""
    scope: str | None = None
    """For an ACP agent's "always" option: the scope of the rule Tether keeps of it
    (``run:ID``, the default; ``agent``; ``store``)."""
    account: str | None = None
    """The account that authenticated the request (:meth:`tether.store.protocol.Store.account`,
    or the web login's user), whatever ``by`` says: for a call that needs two people, the
    people are accounts (:mod:`tether.vocab.people`). None from a rule, or an earlier Tether."""
    unchecked: bool = False
    """Edited arguments the run has no schema to check against, taken as they are
    (``tether approve --args JSON --unchecked``); an edit the run can check is checked anyway."""

    @classmethod
    def from_dict(cls, data: dict) -> "ControlRequest":
        """A request as saved; ValueError (or KeyError, TypeError) for one that is not: an
        unknown kind (never taken for a decision), a field of the wrong type."""
        kind = data["kind"]
        if kind not in KINDS:
            raise ValueError(f"unknown kind of control request {kind!r}")
        for name in ("call_id", "option", "args", "rule", "scope", "account"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ValueError(f"{name} of a control request must be a string")
        try:
            ts = float(data.get("ts") or 0)
        except OverflowError:  # an integer beyond a float
            raise ValueError("ts of a control request is not a time") from None
        return cls(kind=kind, text=str(data.get("text") or ""), call_id=data.get("call_id"),
                   by=str(data.get("by") or "operator"), id=str(data["id"]), ts=ts,
                   option=data.get("option"), silent=bool(data.get("silent")), args=data.get("args"),
                   rule=data.get("rule"), scope=data.get("scope"), account=data.get("account"),
                   unchecked=data.get("unchecked") is True)


@dataclass(frozen=True, slots=True)
class ControlReply:
    ok: bool
    words: str
    pending: bool = False
    """Not done now, but recorded: it applies when the run is adopted."""
    gone: bool = False
    """The process answered that it no longer runs the run (it let go of it)."""


class ControlListener(Protocol):
    """What a process that runs runs takes control requests behind
    (:meth:`tether.store.protocol.Store.control_server`): one per process, however many runs."""

    address: str
    """Published as the owner's ``control`` of every run this process takes."""

    async def start(self) -> str:
        """Listen (once, however many runs start together); returns :attr:`address`."""

    def register(self, run_id: str, poke: Callable[[str], Awaitable[ControlReply]]) -> None:
        """Have ``poke(request_id)`` answer the requests for ``run_id``."""

    def unregister(self, run_id: str) -> None: ...

    async def aclose(self) -> None: ...
