"""``tether run`` and ``tether resume``: a run in this process, on a harness, until it stops;
the summary (or ``--json``) is printed and the exit code says how it ended."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from tether.store.protocol import call
from tether.tui.cli import context, running
from tether.tui.cli.parser import UsageError
from tether.actions import control
from tether.agents.agent import AgentError
from tether.agents.sandbox import SandboxUnavailable, available_backend
from tether.approvals.commands import deadline_policy
from tether.demo import agents as demo
from tether.harness import adhoc_agent
from tether.vocab.events import TextDelta, Turn
from tether.vocab.text import clean


def _run_agent(args: argparse.Namespace, harness: Any) -> Any:
    """The agent ``tether run`` runs: ``--agent`` from the agent file, a demo SCENARIO
    (at ``--base-url`` when the scripted provider is served there), or ``--base-url`` with
    ``--model`` alone: that model, offered the file tools on ``--workspace``."""

    if args.scenario and args.agent:
        raise UsageError("give a SCENARIO or --agent NAME, not both")
    if args.agent:
        if harness.config is None:
            raise UsageError(f"no agent file: --agent {args.agent} needs ./tether.toml, --config FILE "
                             "or $TETHER_CONFIG")
        if args.base_url:
            raise UsageError("--base-url does not apply to --agent: the agent file says where its model is")
        return harness.config.agent_for_run(args.agent, mode=args.mode, model=args.model)
    if args.mode or args.session:
        raise UsageError("--mode and --session are for an ACP agent of the agent file: give --agent NAME")
    if args.scenario:
        if not demo.is_scenario(args.scenario):
            known = ", ".join(demo.scenarios())
            hint = " (an agent from the agent file is run with --agent NAME)" if harness.config else ""
            raise UsageError(f"unknown scenario {args.scenario!r}; the demo scenarios are: {known}{hint}")
        return harness.agent_named(args.scenario).with_endpoint(args.base_url)
    base_url = args.base_url or os.environ.get("LLM_BASE_URL")
    if not base_url:
        raise UsageError("give a SCENARIO (tether agents lists them), --agent NAME, or --base-url URL")
    model = args.model or os.environ.get("LLM_MODEL")
    if not model or not args.prompt:
        raise UsageError("with --base-url, give --model NAME (or LLM_MODEL) and --prompt TEXT")
    return adhoc_agent(model, base_url, Path(args.workspace or Path.cwd()))


async def run(args: argparse.Namespace) -> int:

    await context.may_operate(args, "run")
    harness = running.harness(args, latency_ms=args.latency_ms, fail=args.fail, stream=args.stream)
    async with harness:
        agent = _run_agent(args, harness)
        if args.sandbox and agent.sandbox is None:
            try:
                available_backend()
            except SandboxUnavailable as exc:
                raise UsageError(f"--sandbox: {exc}") from None
            agent = replace(agent, sandbox="workspace")
        overrides = {k: v for k, v in (("max_turns", args.max_turns), ("budget_usd", args.budget),
                                       ("budget_mode", args.budget_mode), ("max_tokens", args.max_tokens))
                     if v is not None}
        policy = {k: v for k, v in (("tool_errors", args.tool_errors), ("dedupe", args.dedupe),
                                    ("auto_approve", args.auto_approve),
                                    ("triage", None if args.no_triage is None else not args.no_triage),
                                    *deadline_policy(args.decision_deadline, args.on_deadline).items())
                  if v is not None}
        # An ACP agent is started first: a missing command or one that does not speak ACP is one
        # line and exit 2, with no run made.
        session = await harness.start_acp(agent, args.isolate) if agent.acp is not None else None
        try:
            state = await call(harness.store, _create, harness, agent, args, limits=replace(agent.limits, **overrides),
                               policies=replace(agent.policies, **policy))
            sinks = [_StreamPrinter(state.run_id)] if args.stream and not args.json else []
            outcome = await harness.run(state.run_id, signal=await running.stop_signal(args), sinks=sinks,
                                        wait_for_decision=running.waiting(args), acp_session=session)
        finally:
            if session is not None:
                await session.close()
    return running.emit_outcome(args, outcome)


def _create(harness: Any, agent: Any, args: argparse.Namespace, **kw: Any) -> Any:
    """The run, made; ``--isolate`` that cannot apply to the agent is a usage error naming it."""
    try:
        return harness.create(agent, args.prompt, run_id=args.run_id, isolation=args.isolate, adopt=args.session,
                              **kw)
    except AgentError as exc:
        if args.session is not None:
            raise UsageError(f"--session {args.session}: {exc}") from None
        if args.isolate is None:
            raise
        raise UsageError(f"--isolate {args.isolate}: {exc}") from None


class _StreamPrinter:
    """Prints the run's streamed reply text as it arrives (``tether run --stream``)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.open = False

    def __call__(self, event: Any) -> None:
        if event.run_id != self.run_id:
            return  # a subagent's reply is not the answer
        if isinstance(event, TextDelta):
            if event.text is None:
                if self.open:
                    sys.stdout.write("\n[the endpoint failed mid-reply: asking again]\n")
                    self.open = False
            else:
                sys.stdout.write(clean(event.text))
                self.open = True
            sys.stdout.flush()
        elif isinstance(event, Turn) and self.open:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.open = False


async def resume(args: argparse.Namespace) -> int:
    await context.may_operate(args, "resume")
    async with running.harness_for(args) as harness:
        limits = dict(signal=await running.stop_signal(args), max_turns=args.max_turns, budget_usd=args.budget,
                      wait_for_decision=running.waiting(args))
        if args.message is not None:  # a follow-up (tether.actions.control)
            outcome = await control.follow_up(harness, args.run_id, args.message, **limits)
        else:
            outcome = await harness.run(args.run_id, **limits)
    return running.emit_outcome(args, outcome)


COMMANDS = {"run": run, "resume": resume}
