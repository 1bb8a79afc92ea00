"""Tools for the helpdesk agent: plain functions, typed and documented.

Tether builds each tool's JSON schema from the type hints and the docstring, checks the
model's arguments before the call, and runs a plain (sync) function in a worker thread.
"""

from __future__ import annotations

import json
from pathlib import Path

import tether

TICKETS = Path(__file__).parent / "tickets"


def _path(ticket_id: int) -> Path:
    return TICKETS / f"{ticket_id}.json"


@tether.tool(read_only=True)
def get_ticket(ticket_id: int) -> dict:
    """Read one ticket.

    Args:
        ticket_id: The ticket's number, e.g. 42.
    """
    try:
        return json.loads(_path(ticket_id).read_text())
    except FileNotFoundError:
        raise tether.ToolError(f"no ticket {ticket_id}; the open tickets are {open_tickets()}") from None


@tether.tool(needs_approval=True, idempotent=True)
def close_ticket(ticket_id: int, reason: str, ctx: tether.ToolContext) -> str:
    """Close a ticket. Needs the operator's approval.

    Args:
        ticket_id: The ticket to close.
        reason: Why, in a sentence the customer will read.
    """
    ticket = json.loads(_path(ticket_id).read_text())
    if ticket["status"] == "closed":  # idempotent: a retry of the same call changes nothing
        return f"ticket {ticket_id} was already closed"
    ticket.update(status="closed", reason=reason, closed_by=ctx.idempotency_key)
    _path(ticket_id).write_text(json.dumps(ticket, indent=2))
    return f"closed ticket {ticket_id}"


def open_tickets() -> list[int]:
    return sorted(int(p.stem) for p in TICKETS.glob("*.json") if json.loads(p.read_text())["status"] == "open")


def too_many_errors(state: tether.RunState) -> str | None:
    """A stop condition: three failed tool calls and the run stops, whatever the model wants."""
    errors = sum(1 for m in state.messages if m.get("role") == "tool" and str(m.get("content")).startswith("Error"))
    return f"{errors} tool calls failed" if errors >= 3 else None
