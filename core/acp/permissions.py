"""``session/request_permission`` as an awaitable request that someone outside decides.

The agent's JSON-RPC request stays open until the decision: the handler awaits
``PermissionRequest.outcome()``, and whoever supervises (the harness, an approval on the store,
a test) calls ``decide(option_id)`` or ``cancel()``. The request carries what a person needs to
decide (the options with their kinds, the diff, the raw arguments) and what binds a decision to
it: the tool call id and the hash of ``rawInput``, computed as Tether hashes its own calls'
arguments (``tether.vocab.state.args_hash``), so a stale decision can be refused the same way.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from tether.acp.touches import Diff, Location
from tether.vocab.state import args_hash


@dataclass(frozen=True)
class PermissionOption:
    """One of the agent's answers: ``kind`` is allow_once, allow_always, reject_once or reject_always."""

    option_id: str
    name: str
    kind: str


def raw_input_hash(raw_input: Any) -> str:
    """A stable hash of the arguments: canonical JSON (sorted keys), as for Tether's own calls."""
    return args_hash(json.dumps(raw_input, sort_keys=True, separators=(",", ":"), default=str))


class PermissionRequest:
    """A pending permission request. ``decide``/``cancel`` answer it once; later answers are refused."""

    def __init__(self, *, tool_call_id: str, title: str | None, kind: str | None,
                 options: tuple[PermissionOption, ...], diffs: tuple[Diff, ...], locations: tuple[Location, ...],
                 raw_input: Any) -> None:
        self.tool_call_id = tool_call_id
        self.title = title
        self.kind = kind
        self.options = options
        self.diffs = diffs
        self.locations = locations
        self.raw_input = raw_input
        self.args_hash = raw_input_hash(raw_input)
        self.by_cancel = False
        self._answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    def __repr__(self) -> str:
        return f"PermissionRequest({self.tool_call_id!r}, {self.title!r}, options={[o.option_id for o in self.options]})"

    @property
    def decided(self) -> bool:
        return self._answer.done()

    def option(self, kind: str) -> PermissionOption | None:
        """The first option of ``kind`` (``allow_once`` is what the console's ``a`` picks)."""
        return next((o for o in self.options if o.kind == kind), None)

    def option_by_id(self, option_id: str) -> PermissionOption | None:
        return next((o for o in self.options if o.option_id == option_id), None)

    def decide(self, option_id: str, *, tool_call_id: str | None = None, args_hash: str | None = None) -> None:
        """Answer with one of the agent's options. With ``tool_call_id``/``args_hash``, the decision
        is refused (ValueError, in words) unless it was made for this very request."""
        if tool_call_id is not None and tool_call_id != self.tool_call_id:
            raise ValueError(f"this decision is for tool call {tool_call_id}, but the agent asks about {self.tool_call_id}")
        if args_hash is not None and args_hash != self.args_hash:
            raise ValueError(f"this decision was made on other arguments (hash {args_hash}, now {self.args_hash})")
        if option_id not in {o.option_id for o in self.options}:
            offered = ", ".join(o.option_id for o in self.options)
            raise ValueError(f"the agent offers no option {option_id!r} (it offers {offered})")
        self._settle(option_id)

    def cancel(self, *, by_session: bool = False) -> bool:
        """Answer ``cancelled`` (ACP's outcome for a turn being cancelled); False if already answered."""
        if self.decided:
            return False
        self.by_cancel = by_session
        self._settle(None)
        return True

    async def outcome(self) -> str | None:
        """Wait for the answer: an option id, or None for cancelled."""
        return await asyncio.shield(self._answer)

    def _settle(self, option_id: str | None) -> None:
        if self._answer.done():
            raise ValueError(f"the permission request for {self.tool_call_id} was already answered")
        self._answer.set_result(option_id)
