"""Fault injection: the one piece of state the scripted provider keeps.

A fault plan says which failure to return at which turn, and how many times, e.g.
``429@1,500@2x2,401@0,garbage@1,drip@1``:

* ``429``     a rate-limit error with a ``Retry-After`` header;
* ``500``     a server error;
* ``401``     an invalid-API-key error;
* ``garbage`` a 200 whose body is not JSON;
* ``drip``    a 200 whose body trickles in one byte at a time;

``@T`` is the turn index (the number of assistant messages in the request) and
``xN`` how many requests at that turn fail (default 1). Faults listed for the same
turn fire in the order written.

Replies are otherwise a pure function of the request; a fault has to fire a chosen
number of times and then let the retry through, so the plan counts what is left to
fire. Those counters live in the ``FaultPlan`` instance (one per app), shared by all
requests and guarded by a lock, so concurrent requests never fire a fault twice.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class FaultKind(StrEnum):
    RATE_LIMIT = "429"
    SERVER_ERROR = "500"
    UNAUTHORIZED = "401"
    GARBAGE = "garbage"
    DRIP = "drip"


_ITEM = re.compile(r"(?P<kind>[^@\s]+)@(?P<turn>\d+)(?:x(?P<times>\d+))?")
_SYNTAX = "expected KIND@TURN or KIND@TURNxTIMES, e.g. 429@1 or 500@2x2"


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    turn: int
    times: int = 1


class FaultPlan:
    """Which faults fire at which turns, with how many firings are left (thread-safe)."""

    def __init__(self, faults: Iterable[Fault] = ()) -> None:
        self.faults = tuple(faults)
        self._left = [f.times for f in self.faults]
        self._lock = threading.Lock()

    @classmethod
    def parse(cls, spec: str) -> FaultPlan:
        """Parse ``KIND@TURN[xTIMES]`` items separated by commas; raise ValueError if bad."""
        if not spec.strip():
            return cls()
        return cls([_parse_item(item.strip()) for item in spec.split(",")])

    def take(self, turn: int) -> FaultKind | None:
        """The fault to inject for a request at ``turn``, counting it as fired; or None."""
        with self._lock:
            for i, fault in enumerate(self.faults):
                if fault.turn == turn and self._left[i] > 0:
                    self._left[i] -= 1
                    return fault.kind
        return None


def _parse_item(item: str) -> Fault:
    match = _ITEM.fullmatch(item)
    if match is None:
        raise ValueError(f"bad fault {item!r}: {_SYNTAX}")
    try:
        kind = FaultKind(match["kind"].lower())
    except ValueError:
        known = ", ".join(k.value for k in FaultKind)
        raise ValueError(f"unknown fault kind {match['kind']!r} in {item!r}; known kinds: {known}") from None
    times = int(match["times"] or 1)
    if times < 1:
        raise ValueError(f"bad fault {item!r}: the number of times must be at least 1")
    return Fault(kind, int(match["turn"]), times)
