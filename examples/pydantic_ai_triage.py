"""A triage job written with pydantic-ai, supervised by Tether.

The job's loop is pydantic-ai's. Tether shows it in the console like any run, prices each
model call against a budget, and decides its dangerous tool (``close_ticket``,
``requires_approval=True``) inside the run: the call waits for anyone to answer it, the
console, ``tether approve|reject`` (with edited arguments: ``tether approve --args``), or a
standing rule. A rejection reaches the model in the operator's own words.

Against the scripted provider (its ``ticket`` scenario closes ticket 42)::

    tether provider --port 8787 &
    python examples/pydantic_ai_triage.py --base-url http://127.0.0.1:8787/v1 --run-id triage-42
    # then, from the console (tether console) or another terminal:
    tether approve triage-42 --args '{"ticket": 42, "reason": "duplicate of 17 (checked)"}'
    tether reject triage-42 --reason "17 is a different bug"

Needs ``pip install 'tether[integrations]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tether import Harness, Limits
from tether.vocab.events import ApprovalRequired, Event, TextDelta
from tether.integrations import Supervision
from tether.integrations.pydantic_ai import run
from tether.store.spec import open_store

TICKETS = {42: "Login page loops (a duplicate of 17?)", 17: "Login page loops after a password reset"}


def triage_agent(base_url: str, model: str) -> Agent[None, str]:
    agent = Agent(OpenAIChatModel(model, provider=OpenAIProvider(base_url=base_url, api_key="not-needed-here")),
                  name="triage", instructions="You triage support tickets. Close duplicates, saying of which.")

    @agent.tool_plain(requires_approval=True)
    def close_ticket(ticket: int, reason: str) -> str:
        """Close a support ticket; the customer reads the reason."""
        TICKETS.pop(ticket, None)
        return f"Ticket {ticket} closed: {reason}."

    return agent


def show(event: Event) -> None:
    """What the program prints as it goes: the streamed answer, and a call waiting for a person."""
    if isinstance(event, TextDelta) and event.text:
        print(event.text, end="", flush=True)
    elif isinstance(event, ApprovalRequired):
        print(f"{event.tool} {event.args} waits for a decision: tether approve {event.run_id} "
              f"(or reject it, with --reason)", flush=True)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="a chat-completions endpoint, e.g. the scripted provider")
    parser.add_argument("--model", default="ticket", help="the model (the scripted provider: a scenario)")
    parser.add_argument("--store", help="the run store (a directory or a postgresql:// URL; default $TETHER_STORE)")
    parser.add_argument("--run-id", help="the run's id (default: a new one)")
    parser.add_argument("--budget", type=float, default=0.05, help="USD; the run stops when it is spent")
    args = parser.parse_args()
    agent = triage_agent(args.base_url, args.model)
    async with Harness(store=open_store(args.store)) as harness:
        done = await run(harness, agent, "Ticket 42: the login page loops. Close it if it duplicates 17.",
                         supervision=Supervision(run_id=args.run_id, limits=Limits(budget_usd=args.budget),
                                                 sinks=[show]))
    print()
    print(f"run {done.run_id}: {done.status.value} ({done.reason})")
    return done.status.exit_code


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
