"""A support bot written with the OpenAI Agents SDK, supervised by Tether.

The bot's loop is the SDK's. Tether shows it in the console like any run, prices each model
call against a budget, and turns its one dangerous tool (``close_ticket``, ``needs_approval``)
into an approval anyone can answer: the console, ``tether approve|reject``, a standing rule.
A rejection reaches the model in the operator's own words.

Against the scripted provider (its ``ticket`` scenario closes ticket 42)::

    tether provider --port 8787 &
    python examples/openai_agents_support_bot.py --base-url http://127.0.0.1:8787/v1 --run-id support-42
    # then, from the console (tether console) or another terminal:
    tether approve support-42 --note "it is a duplicate"
    tether reject support-42 --reason "the customer still sees the bug"

Needs ``pip install 'tether[integrations]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, function_tool
from openai import AsyncOpenAI

from tether import Harness, Limits
from tether.vocab.events import ApprovalRequired, Event, TextDelta
from tether.integrations import Supervision
from tether.integrations.openai_agents import run
from tether.store.spec import open_store

TICKETS = {42: "Login page loops (a duplicate of 17?)", 17: "Login page loops after a password reset"}


@function_tool(needs_approval=True)
def close_ticket(ticket: int, reason: str) -> str:
    """Close a support ticket; the customer reads the reason."""
    TICKETS.pop(ticket, None)
    return f"Ticket {ticket} closed: {reason}."


def support_bot(base_url: str, model: str) -> Agent:
    client = AsyncOpenAI(base_url=base_url, api_key="not-needed-here")
    return Agent(name="support-bot", tools=[close_ticket],
                 instructions="You answer support tickets. Close duplicates, saying which ticket they duplicate.",
                 model=OpenAIChatCompletionsModel(model=model, openai_client=client))


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
    agent = support_bot(args.base_url, args.model)
    async with Harness(store=open_store(args.store)) as harness:
        done = await run(harness, agent, "Ticket 42: the login page loops. Close it if it is a duplicate.",
                         supervision=Supervision(run_id=args.run_id, limits=Limits(budget_usd=args.budget),
                                                 sinks=[show]),
                         run_config=RunConfig(tracing_disabled=True))  # no OpenAI trace export offline
    print()
    print(f"run {done.run_id}: {done.status.value} ({done.reason})")
    return done.status.exit_code


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
