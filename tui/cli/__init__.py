"""The ``tether`` command.

Exit codes: 0 completed, 1 failed, 2 usage error (or a config error), 3 max_turns_exceeded,
4 budget_exceeded, 5 interrupted (an approval, a Stop, a stop condition), 6 interrupted by a
provider outage (``tether resume`` goes on once the endpoint is back).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from tether.run.cancel import CancelSignal
from tether.store.protocol import call
from tether.run.state import RunState, StateError
from tether.store.files.store import SaveError

USAGE_ERROR = 2
MAX_COUNT = 1_000_000_000
"""The largest count an option takes (turns, tokens, lines, workers): past it, a typo."""


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line: the command's twelve-line usage block ahead
    of the one line that says what is wrong only hides it."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}; see {self.prog} --help\n")


# Every numeric option goes through one of these: a number that is finite and in range, or
# one line saying what was given. float() takes "nan", "inf" and "1e309" (which is inf), and
# none of them is a budget, a timeout or a latency: a NaN budget never binds, and in the
# journal it is not JSON.

def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _whole_number(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not low <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be from {low} to {MAX_COUNT:,}, got {text}")
    return value


def _positive_int(text: str) -> int:
    return _whole_number(text, 1)


def _count(text: str) -> int:
    return _whole_number(text, 0)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, got {text}")
    return value


def _money(text: str) -> float:
    value = _number(text.removeprefix("$"))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than zero, got {text}")
    return value


def _non_negative(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def _tool_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _place_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs-dir", type=Path, help="where runs are saved (default $TETHER_HOME/runs)")
    p.add_argument("--workspace", type=Path,
                   help="the folder the file tools may touch: the demo's (default $TETHER_HOME/workspace), "
                        "or, with --base-url alone, the agent's (default: the current directory)")
    _config_option(p)


def _store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="URL|DIR",
                   help="the run store: a postgresql:// URL or a runs directory "
                        "(default $TETHER_STORE, else --runs-dir, else $TETHER_HOME/runs)")


def store_of(args: argparse.Namespace) -> Any:
    """The command's run store (:func:`tether.store.protocol.open_store`): ``--store``, else
    ``--runs-dir``, else ``$TETHER_STORE``, else ``$TETHER_HOME/runs``. Made once per command."""
    from tether.store.protocol import open_store

    made = getattr(args, "_store", None)
    if made is not None:
        return made
    spec, runs_dir = getattr(args, "store", None), getattr(args, "runs_dir", None)
    if spec and runs_dir:
        raise UsageError("give --store or --runs-dir, not both")
    args._store = open_store(spec or runs_dir)
    return args._store


async def _may_operate(args: argparse.Namespace, command: str) -> None:
    """Refuse, in words and before anything is changed, a command that changes runs on a
    store whose role may only watch them."""
    store = store_of(args)
    read_only = getattr(store, "read_only", None)
    role = await call(store, read_only) if callable(read_only) else None
    if role is not None:
        raise UsageError(f"this store's role {role} may only watch: tether {command} needs a role that may "
                         f"change runs (the operator's); nothing was changed")


def _as_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as", dest="who", metavar="NAME",
                   help="who is deciding, recorded with the decision (default: user@host)")


def _wait_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait-for-decision", action="store_true",
                   help="at an approval, keep the process waiting for a decision from any console or "
                        "tether approve|reject, instead of exiting 5")
    p.add_argument("--decision-timeout", type=_non_negative, default=0.0, metavar="SECONDS",
                   help="with --wait-for-decision: stop waiting after this long (default: wait until decided)")


def _config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="the agent file (default $TETHER_CONFIG, else ./tether.toml when there is one)")


def _worker_store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="URL", default=os.environ.get("TETHER_STORE"),
                   help="the PostgreSQL store, postgresql://USER[:PASSWORD]@HOST/DB (or TETHER_STORE)")


def _deadline_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--decision-deadline", metavar="DURATION",
                   help="how long a call waits for a decision (10m, 2h), then --on-deadline happens; "
                        "a deadline never approves")
    p.add_argument("--on-deadline", choices=["reject", "stop", "escalate"],
                   help="what a passed deadline does: reject the call (the default), stop the run, or "
                        "escalate (notify, and wait one more deadline, which then rejects)")


def _approvals_parsers(sub: Any) -> None:
    """``tether rules [add|remove|explain]`` and ``tether decisions`` (docs/approvals.md)."""
    rules = sub.add_parser("rules", help="the store's standing rules: list them, add one, remove one, explain a call")
    rules.add_argument("--json", action="store_true")
    actions = rules.add_subparsers(dest="rules_command", metavar="ACTION")
    add = actions.add_parser("add", help="a rule that decides every call it fits (and the calls waiting now)")
    effect = add.add_mutually_exclusive_group(required=True)
    for name in ("allow", "deny", "ask"):
        effect.add_argument(f"--{name}", dest="effect", action="store_const", const=name)
    add.add_argument("tool", metavar="TOOL", help="the tool's name, a glob: delete_file, fs.*, *")
    add.add_argument("--agent", metavar="NAME", help="only the calls of this agent's runs")
    add.add_argument("--where", action="append", default=[], metavar="KEY=GLOB",
                     help="only calls whose argument KEY (a name, or a JSON pointer such as /options/force) "
                          "fits GLOB: path=*.log (repeatable: all must fit)")
    add.add_argument("--source", choices=["tether", "acp", "program"],
                     help="only runs of this source: Tether's loop, an ACP agent, a program through the run API")
    add.add_argument("--scope", default="store", metavar="run:ID|agent|store",
                     help="one run, the --agent's runs, or the whole store (default)")
    add.add_argument("--expires", metavar="DATE|DURATION", help="when the rule stops applying: 2026-12-31, or 7d")
    add.add_argument("--approvals", type=_positive_int, default=1, metavar="N",
                     help="--ask: how many different people must approve (2 for a two-person call)")
    add.add_argument("--deadline", metavar="DURATION", help="--ask: how long the call waits for people")
    add.add_argument("--on-deadline", choices=["reject", "stop", "escalate"], default="reject",
                     help="--ask: what a passed deadline does (default reject)")
    add.add_argument("--reason", default="", help="why: what every decision by the rule shows")
    add.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    _as_option(add)
    _config_option(add)
    remove = actions.add_parser("remove", help="remove a rule (its id is not given again)")
    remove.add_argument("rule_id", metavar="ID")
    explain = actions.add_parser("explain", help="which rule decides a run's call, and why the others do not")
    explain.add_argument("run_id")
    explain.add_argument("call_id")
    decisions = sub.add_parser("decisions", help="every decision on the store, newest first: who approved what")
    decisions.add_argument("--since", metavar="DATE|DURATION", help="from this date (2026-12-01) or this long ago (7d)")
    decisions.add_argument("--agent", metavar="NAME", help="only the decisions on this agent's runs")
    decisions.add_argument("--by", metavar="NAME", help="only those of this person, or of this rule (R3)")
    decisions.add_argument("--limit", type=_positive_int, metavar="N", help="the newest N")
    decisions.add_argument("--json", action="store_true")
    for p in (rules, add, remove, explain, decisions):
        # An action's own options must not reset the same ones given before it
        # (tether rules --store URL add ...): unset there, they are left out.
        unset = {"default": argparse.SUPPRESS} if p in (add, remove, explain) else {}
        p.add_argument("--store", metavar="URL|DIR", **unset,
                       help="the run store: a postgresql:// URL or a runs directory (default $TETHER_STORE, "
                            "else --runs-dir, else $TETHER_HOME/runs)")
        p.add_argument("--runs-dir", type=Path, **unset, help="where runs are saved (default $TETHER_HOME/runs)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tether", description="Supervise AI agent runs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    console = sub.add_parser("console", help="open the console (the default)")
    console.add_argument("--start", action="append", default=[], metavar="SCENARIO",
                         help="start a run of SCENARIO at launch (repeatable)")
    console.add_argument("--agent", metavar="NAME", help="preselect this agent in the New run dialog")
    console.add_argument("--base-url", help="a chat-completions endpoint instead of the scripted provider")
    console.add_argument("--model", help="the model to use with --base-url")
    console.add_argument("--no-stream", action="store_true",
                         help="do not stream replies from real endpoints (the console streams them by default)")
    _otlp_option(console)
    console.add_argument("--as", dest="who", metavar="NAME",
                         help="who the console's Stops, approvals and rejections are recorded as (default: user@host)")
    _store_option(console)
    _place_options(console)

    demo = sub.add_parser("demo", help="an autopilot tour of the console on the scripted provider, with captions")
    demo.add_argument("--pace", type=_non_negative, default=1.6, metavar="SECONDS",
                      help="how long each caption is read before the tour goes on (default 1.6)")
    demo.add_argument("--latency-ms", type=_non_negative, default=120.0,
                      help="the scripted provider's added latency per reply (default 120)")
    demo.add_argument("--stay", action="store_true", help="keep the console open after the tour")
    demo.add_argument("--acp", action="store_true",
                      help="the tour of two real coding agents, OpenCode and Qwen Code, under the console "
                           "(`make agents` installs them)")
    demo.add_argument("--runs-dir", type=Path,
                      help="keep the tour's runs here (default: a temporary folder, removed afterwards)")

    agents = sub.add_parser("agents", help="list the agents: their model, endpoint and tools")
    agents.add_argument("--json", action="store_true")
    _config_option(agents)

    run = sub.add_parser("run", help="start a run and wait for it to stop")
    run.add_argument("scenario", nargs="?", help="a demo scenario (tether agents lists them)")
    run.add_argument("--agent", metavar="NAME", help="an agent from the agent file")
    run.add_argument("--base-url", help="a chat-completions endpoint: with a SCENARIO, where the scripted "
                                        "provider is served; alone, an agent with the file tools (or LLM_BASE_URL)")
    run.add_argument("--model", help="the model name at --base-url (or LLM_MODEL)")
    run.add_argument("--prompt", help="the task (an agent's or scenario's own task by default)")
    run.add_argument("--run-id")
    # Unset options keep the agent's own settings (its file's, or the defaults).
    run.add_argument("--max-turns", type=_positive_int)
    run.add_argument("--budget", type=_money, metavar="USD")
    run.add_argument("--budget-mode", choices=["soft", "strict"])
    run.add_argument("--max-tokens", type=_positive_int)
    run.add_argument("--tool-errors", choices=["fatal", "generic", "descriptive"])
    run.add_argument("--no-triage", action="store_true", default=None,
                     help="retry permanent tool errors like any other")
    run.add_argument("--dedupe", choices=["off", "read-only", "all"])
    run.add_argument("--auto-approve", type=_tool_list, metavar="TOOL[,TOOL]")
    run.add_argument("--latency-ms", type=_non_negative, default=0.0, help="scripted provider: added latency")
    run.add_argument("--fail", metavar="SPEC", help="scripted provider: inject faults, e.g. 429@1,500@2x2")
    run.add_argument("--stream", action="store_true", help="ask for streamed replies")
    run.add_argument("--cancel-after", type=_non_negative, metavar="SECONDS",
                     help="fire the run's Stop signal after this many seconds")
    run.add_argument("--json", action="store_true")
    _deadline_options(run)
    _wait_options(run)
    _otlp_option(run)
    _place_options(run)

    resume = sub.add_parser("resume", help="resume a stopped run, optionally with raised limits")
    resume.add_argument("run_id")
    resume.add_argument("--max-turns", type=_positive_int)
    resume.add_argument("--budget", type=_money, metavar="USD")
    resume.add_argument("--message", metavar="TEXT",
                        help="a follow-up: the next words to the agent; a completed run goes on from them")
    resume.add_argument("--json", action="store_true")
    _wait_options(resume)
    _otlp_option(resume)
    _place_options(resume)

    deciders = []
    for name, field, what in (("approve", "--note", "approve the pending call, then resume"),
                              ("reject", "--reason", "reject the pending call in words, then resume")):
        p = sub.add_parser(name, help=what)
        deciders.append(p)
        p.add_argument("run_id")
        p.add_argument(field, default="")
        p.add_argument("--json", action="store_true")
        if name == "approve":
            p.add_argument("--option", metavar="ID",
                           help="an ACP agent's permission option (such as allow_always's id); default: allow once")
            p.add_argument("--scope", metavar="run:ID|agent|store",
                           help="with an ACP agent's \"always\" option: the scope of the rule Tether keeps of it "
                                "(default: this run)")
            p.add_argument("--args", metavar="JSON",
                           help="approve with these arguments instead of the model's (a JSON object, checked "
                                "against the tool's schema); the call runs with them")
        else:
            p.add_argument("--silent", action="store_true",
                           help="an ACP agent: do not send the reason on to the agent as its next prompt")
        _as_option(p)
        _wait_options(p)
        _otlp_option(p)
        _place_options(p)

    from tether.web.command import add_parser as serve_parser

    serve_parser(sub, _store_option, _port)

    stop = sub.add_parser("stop", help="stop a run, whichever process runs it")
    stop.add_argument("run_id")
    stop.add_argument("--reason", default="", help="why, recorded with the stop")
    _as_option(stop)
    _place_options(stop)

    runs = sub.add_parser("runs", help="list every run in the runs dir")
    runs.add_argument("--json", action="store_true")
    runs.add_argument("--live", action="store_true",
                      help="only the runs that are running (or orphaned) and those waiting for an approval")
    _place_options(runs)

    show = sub.add_parser("show", help="show a run and its transcript")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true")
    _place_options(show)

    trace = sub.add_parser("trace", help="print a run's JSONL trace")
    trace.add_argument("run_id")
    _place_options(trace)

    watch = sub.add_parser("watch", help="follow runs as they happen, one line per event (until the run stops)")
    watch.add_argument("run_id", nargs="?", help="the run to follow (default: the most recently created)")
    watch.add_argument("--all", action="store_true",
                       help="follow every run on the store, new ones included, until Ctrl-C")
    watch.add_argument("--lines", type=_count, default=20, metavar="N",
                       help="show each run's last N trace lines first (default 20)")
    _place_options(watch)

    export = sub.add_parser("export-otel", help="send a finished run's trace to an OpenTelemetry collector")
    export.add_argument("run_id")
    _otlp_option(export)
    export.add_argument("--capture-content", action="store_true",
                        help="include prompts, answers and tool results (off by default)")
    export.add_argument("--timeout", type=_non_negative, metavar="SECONDS")
    export.add_argument("--runs-dir", type=Path, help="where runs are saved (default $TETHER_HOME/runs)")
    for p in (run, resume, *deciders, stop, runs, show, trace, watch, export):
        _store_option(p)
    _approvals_parsers(sub)

    submit = sub.add_parser("submit", help="create a run and put it on the worker queue; prints its id at once")
    submit.add_argument("--agent", required=True, metavar="NAME", help="an agent from the agent file, or a demo scenario")
    submit.add_argument("--prompt", help="the task (the agent's own task by default)")
    submit.add_argument("--run-id")
    submit.add_argument("--base-url", help="a demo scenario: where the scripted provider is served")
    submit.add_argument("--auto-approve", type=_tool_list, metavar="TOOL[,TOOL]")
    submit.add_argument("--workspace", type=Path, help="a demo scenario: its folder (default $TETHER_HOME/workspace)")
    submit.add_argument("--json", action="store_true")
    _deadline_options(submit)
    _worker_store_option(submit)
    _config_option(submit)

    worker = sub.add_parser("worker", help="run queued runs (tether submit) until SIGINT or SIGTERM")
    worker.add_argument("--concurrency", type=_positive_int, default=1, metavar="N",
                        help="runs this worker process drives at once, in all (default 1): across every "
                             "agent's queue it takes runs from, whatever other workers say; a run waiting "
                             "for a decision counts")
    worker.add_argument("--max-recoveries", type=_count, default=3, metavar="N",
                        help="a run whose worker died or was lost while driving it is recovered at most N "
                             "times (default 3) since it last made progress; at the next such death it is "
                             "parked as failed (\"crashed every worker that took it\")")
    _worker_store_option(worker)
    _config_option(worker)

    provider = sub.add_parser("provider", help="serve the scripted provider over HTTP")
    provider.add_argument("--host", default="127.0.0.1")
    provider.add_argument("--port", type=_port, default=8787)
    provider.add_argument("--latency-ms", type=_non_negative, default=0.0)
    provider.add_argument("--fail", metavar="SPEC", help="e.g. 429@1,500@2x2,401@0,garbage@1,drip@1")
    provider.add_argument("--retry-after", type=_non_negative, default=1.0, help="seconds sent with a 429")
    provider.add_argument("--until-stdin-closes", action="store_true", help=argparse.SUPPRESS)  # a child's lifeline

    lab = sub.add_parser("lab", help="rerun the experiments against the scripted provider, print their tables")
    lab.add_argument("--json", action="store_true", help="one JSON object keyed by experiment")
    lab.add_argument("--out", type=Path, metavar="FILE.md", help="also write the tables as markdown")
    lab.add_argument("--quick", action="store_true", help="a reduced lab (fewer, smaller rows)")
    lab.add_argument("--only", action="append", default=[], metavar="EXPERIMENT", help="repeatable")

    served = sub.add_parser("acp", help="be an ACP agent on stdio: an editor runs Tether's agents as sessions")
    _config_option(served)
    _store_option(served)
    served.add_argument("--workspace", type=Path, help="the demo agents' folder (default $TETHER_HOME/workspace)")

    notify = sub.add_parser("notify", help="send the store's notifications ([notify.NAME] in tether.toml) "
                                           "where no tether serve runs; until SIGINT or SIGTERM")
    _store_option(notify)
    _config_option(notify)
    notify.add_argument("--public-url", metavar="URL",
                        help="where tether serve is reached (https://tether.example.com): approvals then carry "
                             "links that approve or reject; without it, no links")

    hook = sub.add_parser("hook", help="a hook of another agent's CLI: tether hook claude-code [--install [DIR]]")
    hook.add_argument("agent", choices=["claude-code"], help="whose hook (tether hook claude-code --help)")
    hook.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    evaluate = sub.add_parser("eval", help="run the six eval tasks against a model and grade the answers")
    evaluate.add_argument("--base-url", default=os.environ.get("LLM_BASE_URL"),
                          help="a chat-completions endpoint (or LLM_BASE_URL); default: the scripted provider")
    evaluate.add_argument("--model", default=os.environ.get("LLM_MODEL"), help="the model name (or LLM_MODEL)")
    evaluate.add_argument("--max-turns", type=_positive_int, default=8)
    evaluate.add_argument("--task-timeout", type=_non_negative, metavar="SECONDS",
                          help="stop a task through its signal after this long")
    evaluate.add_argument("--out", type=Path, metavar="FILE.md", help="also write the table as markdown")
    evaluate.add_argument("--json", action="store_true")
    return parser


class _Output:
    """Standard output that its reader may close (``tether show ID | head -1``).

    A closed pipe ends the output quietly and the command goes on to its own status:
    a ``tether resume`` whose run completed still exits 0 after ``head`` has read enough,
    and a run is never cut short because nobody reads its summary. File descriptor 1 is
    pointed at /dev/null then, so that Python's flush at exit does not fail on it again.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.closed_by_reader = False
        self.on_close: list[Callable[[], None]] = []

    def write(self, text: str) -> int:
        if not self.closed_by_reader:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self.closed_by_reader = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        for callback in self.on_close:
            callback()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = args.command or "console"
    if command in ("console", "demo", "acp", "hook"):  # a full-screen app, or a protocol on stdout
        return _main(args, command)
    stdout = sys.stdout
    sys.stdout = _Output(stdout)
    try:
        return _main(args, command)
    finally:
        sys.stdout = stdout


def _main(args: argparse.Namespace, command: str) -> int:
    try:
        if command == "console":
            return _console(args)
        if command == "demo":
            from tether.tui.tour import run_demo

            return run_demo(args)
        if command == "provider":
            return _provider(args)
        if command == "acp":
            from tether.acp.server import main as serve_acp

            return serve_acp(args)
        if command == "hook":
            from tether.integrations.claude_code import main as claude_code_hook

            return claude_code_hook(args.rest)
        if command == "serve":  # aiohttp's server, on an event loop of its own
            from tether.web.command import serve_command

            return serve_command(args, store_of(args), lambda: _harness(args))
        if command in ("worker", "submit"):  # DBOS launches outside an event loop
            from tether.workers import commands as workers

            return workers.worker_command(args) if command == "worker" else workers.submit_command(args)
        return asyncio.run(_COMMANDS[command](args))
    except (UsageError, StateError, ValueError) as exc:
        print(f"tether: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except SaveError as exc:
        print(f"tether: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        close = getattr(getattr(args, "_store", None), "close", None)
        if callable(close):  # a database store's sessions
            close()


def _config(args: argparse.Namespace) -> Any:
    """The agent file in force, checked, or None (the demo agents only). The checker
    (pydantic) is imported only when there is a file to check."""
    from tether.agents.configfile import find_config

    path = find_config(getattr(args, "config", None))
    if path is None:
        return None
    from tether.agents.config import load_config

    return load_config(path)


def _harness(args: argparse.Namespace, **kw: Any) -> Any:
    """The harness of a command, exporting its runs' spans when OpenTelemetry is configured
    (``--otlp URL`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``): the exporter is imported only then."""
    from tether.harness import Harness

    harness = Harness(workspace=getattr(args, "workspace", None), config=_config(args), store=store_of(args), **kw)
    otlp = getattr(args, "otlp", None)
    if otlp or _otel_configured():
        from tether.observe.otel import CLI_EXPORT_TIMEOUT, otel_sink_from_env

        sink = otel_sink_from_env(otlp, on_dropped=harness.note_dropped, state_of=harness.live.get,
                                  secrets=harness.secrets(), timeout=CLI_EXPORT_TIMEOUT)
        if sink is not None:
            harness.sinks.append(sink)
    return harness


def _otel_configured() -> bool:
    return any(os.environ.get(name) for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def _otlp_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--otlp", metavar="URL",
                   help="export the run's spans to this OTLP/HTTP endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT)")


def _emit_outcome(args: argparse.Namespace, outcome: Any) -> int:
    from tether.observe.report import summary, text_summary

    state: RunState = outcome.state
    if args.json:
        print(json.dumps(summary(state, outcome.tool_runs, outcome.ms)))
    else:
        print(text_summary(state, len(outcome.tool_runs), outcome.ms))
    return state.exit_code


async def _signal(args: argparse.Namespace) -> CancelSignal:
    """The run's Stop signal. With --cancel-after it fires that long after the run starts:
    the rank file is loaded first, so start-up does not eat into the time."""
    from tether.models.tokens import encoding

    signal = CancelSignal()
    seconds = getattr(args, "cancel_after", None)
    if seconds is not None:
        await asyncio.to_thread(encoding)
        asyncio.get_running_loop().call_later(seconds, signal.cancel, f"cancelled after {seconds:g} s (--cancel-after)")
    return signal


def _run_agent(args: argparse.Namespace, harness: Any) -> Any:
    """The agent ``tether run`` runs: ``--agent`` from the agent file, a demo SCENARIO
    (at ``--base-url`` when the scripted provider is served there), or ``--base-url`` with
    ``--model`` alone: that model, offered the file tools on ``--workspace``."""
    from tether.demo import agents as demo
    from tether.harness import adhoc_agent

    if args.scenario and args.agent:
        raise UsageError("give a SCENARIO or --agent NAME, not both")
    if args.agent:
        if harness.config is None:
            raise UsageError(f"no agent file: --agent {args.agent} needs ./tether.toml, --config FILE "
                             "or $TETHER_CONFIG")
        if args.base_url:
            raise UsageError("--base-url does not apply to --agent: the agent file says where its model is")
        return harness.config.agent(args.agent)
    if args.scenario:
        if not demo.is_scenario(args.scenario):
            known = ", ".join(demo.scenarios())
            hint = " (an agent from the agent file is run with --agent NAME)" if harness.config else ""
            raise UsageError(f"unknown scenario {args.scenario!r}; the demo scenarios are: {known}{hint}")
        return harness.demo_agent(args.scenario).with_endpoint(args.base_url)
    base_url = args.base_url or os.environ.get("LLM_BASE_URL")
    if not base_url:
        raise UsageError("give a SCENARIO (tether agents lists them), --agent NAME, or --base-url URL")
    model = args.model or os.environ.get("LLM_MODEL")
    if not model or not args.prompt:
        raise UsageError("with --base-url, give --model NAME (or LLM_MODEL) and --prompt TEXT")
    return adhoc_agent(model, base_url, Path(args.workspace or Path.cwd()))


async def _run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from tether.approvals.commands import deadline_policy

    await _may_operate(args, "run")
    harness = _harness(args, latency_ms=args.latency_ms, fail=args.fail, stream=args.stream)
    async with harness:
        agent = _run_agent(args, harness)
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
        session = await harness.start_acp(agent) if agent.acp is not None else None
        try:
            state = await call(harness.store, harness.create, agent, args.prompt, run_id=args.run_id,
                               limits=replace(agent.limits, **overrides), policies=replace(agent.policies, **policy))
            sinks = [_StreamPrinter(state.run_id)] if args.stream and not args.json else []
            outcome = await harness.run(state.run_id, signal=await _signal(args), sinks=sinks,
                                        wait_for_decision=_waiting(args), acp_session=session)
        finally:
            if session is not None:
                await session.close()
    return _emit_outcome(args, outcome)


def _waiting(args: argparse.Namespace) -> float | None:
    return args.decision_timeout if getattr(args, "wait_for_decision", False) else None


def _who(args: argparse.Namespace) -> str:
    from tether.store.control import operator_name

    return getattr(args, "who", None) or operator_name()


class _StreamPrinter:
    """Prints the run's streamed reply text as it arrives (``tether run --stream``)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.open = False

    def __call__(self, event: Any) -> None:
        from tether.run.events import TextDelta, Turn
        from tether.text import clean

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


def _harness_for(args: argparse.Namespace) -> Any:
    """A harness on the run's runs dir; the run's agent is rebuilt from what the run saved."""
    return _harness(args, api_key=os.environ.get("LLM_API_KEY"))


async def _resume(args: argparse.Namespace) -> int:
    await _may_operate(args, "resume")
    async with _harness_for(args) as harness:
        outcome = await harness.run(args.run_id, signal=await _signal(args), max_turns=args.max_turns,
                                    budget_usd=args.budget, wait_for_decision=_waiting(args), message=args.message)
    return _emit_outcome(args, outcome)


async def _approve(args: argparse.Namespace) -> int:
    return await _decide(args, "approve", args.note)


async def _reject(args: argparse.Namespace) -> int:
    return await _decide(args, "reject", args.reason)


async def _decide(args: argparse.Namespace, verdict: str, text: str) -> int:
    """Decide the run's waiting call: delivered to whoever holds the run waiting for a
    decision (a queue worker's workflow, or a process), if anyone does; otherwise made here,
    and the run goes on in this process."""
    from tether.approvals.commands import deliver
    from tether.store.control import ControlRequest

    edited = _edited_args(getattr(args, "args", None))
    await _may_operate(args, verdict)
    async with _harness_for(args) as harness:
        acp = {"option": getattr(args, "option", None), "silent": getattr(args, "silent", False),
               "scope": getattr(args, "scope", None)}
        if acp["scope"] is not None and not acp["option"]:
            raise UsageError("--scope is the scope of the rule kept of an ACP agent's \"always\" option: "
                             "give the option with --option ID")
        if acp["scope"] not in (None, "agent", "store") and not str(acp["scope"]).startswith("run:"):
            raise UsageError(f"--scope is run:ID, agent or store; not {acp['scope']!r}")
        request = ControlRequest(verdict, text, by=_who(args), args=edited, **acp)
        reply = await deliver(harness.store, args.run_id, request)
        if reply is not None:
            return _emit_reply(args, reply)
        if acp["option"] or acp["silent"] or acp["scope"]:
            raise UsageError(f"--option and --silent answer an ACP agent while it waits, and no process holds run "
                             f"{args.run_id} now")
        edit = {"args": edited} if edited is not None else {}
        operate = harness.approve if verdict == "approve" else harness.reject
        outcome = await operate(args.run_id, text, by=_who(args), signal=await _signal(args),
                                wait_for_decision=_waiting(args), **edit)
    return _emit_outcome(args, outcome)


def _edited_args(text: str | None) -> str | None:
    """``--args JSON``: the call's arguments as the operator edited them (a JSON object),
    refused in words before anything is decided when it is not one."""
    if text is None:
        return None
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--args is not JSON ({exc.msg} at position {exc.pos}): give the arguments as a JSON "
                         "object, such as '{\"path\": \"old.log\"}'; nothing was decided") from None
    if not isinstance(parsed, dict):
        raise UsageError(f"--args must be a JSON object of the call's arguments, not {type(parsed).__name__}; "
                         "nothing was decided")
    return json.dumps(parsed, ensure_ascii=False)


async def _stop(args: argparse.Namespace) -> int:
    """Through the store and the control channel alone: no harness, no agent file to load,
    so the Stop reaches the run's process a few interpreter start-ups sooner."""
    from tether.store import control
    from tether.store.files.store import has_workers

    store = store_of(args)
    await _may_operate(args, "stop")
    if not await call(store, store.exists, args.run_id):
        raise StateError(f"no run {args.run_id} in {store.where}")
    request = control.ControlRequest("stop", args.reason or "stopped from the command line", by=_who(args))
    if has_workers(store):
        from tether.workers import decide as workers  # a worker's workflow may wait for a decision on the run

        waiting = await workers.stop_waiting(store, args.run_id, request)
        if waiting is not None:
            return _emit_reply(args, waiting)
    return _emit_reply(args, await control.request(store, args.run_id, request))


def _emit_reply(args: argparse.Namespace, reply: Any) -> int:
    """A control request's answer in words; exit 0 when it was done, 1 when it is recorded for
    when the run is adopted, 2 when nothing could be done (and nothing changed)."""
    from tether.text import clean

    if getattr(args, "json", False):
        print(json.dumps({"ok": reply.ok, "pending": reply.pending, "words": reply.words}))
    else:
        print(clean(reply.words), file=sys.stdout if reply.ok else sys.stderr)
    return 0 if reply.ok else 1 if reply.pending else USAGE_ERROR


async def _agents(args: argparse.Namespace) -> int:
    """Every agent in the agent file (its MCP servers started to list their tools), then the demo."""
    from tether.demo import agents as demo
    from tether.text import clean

    config = _config(args)
    rows: list[dict[str, Any]] = []
    if config is not None:
        for name, agent in config.agents().items():
            rows.append(await _describe(agent, "config"))
    demo_tools = [{"name": t.name, "source": t.source, "ref": t.ref, "read_only": t.read_only,
                   "needs_approval": t.needs_approval, "idempotent": t.idempotent} for t in demo.tools()]
    for name, description in demo.scenarios().items():
        rows.append({"name": name, "set": "demo", "model": name, "base_url": None, "config": None,
                     "description": description, "tools": demo_tools, "mcp": []})
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows:
        if row["set"] == "demo":
            continue
        if "acp" in row:
            acp = row["acp"]
            print(clean(f"{row['name']}  ACP agent: {' '.join(acp['command'])}  ({row['config']})"))
            if acp.get("error"):
                print(clean(f"  {acp['error']}"))
                continue
            caps = ", ".join(sorted(k for k, v in acp["capabilities"].items() if v)) or "none"
            print(clean(f"  {acp['agent']} {acp['version']}; auth: {', '.join(acp['auth_methods']) or 'none'}; "
                        f"loads sessions: {'yes' if acp['load_session'] else 'no'}; capabilities: {caps}"))
            continue
        where = row["base_url"] or "the embedded scripted provider"
        print(clean(f"{row['name']}  {row['model']} at {where}  ({row['config']})"))
        for tool in row["tools"]:
            print(clean(f"  {tool['name']:<28} {tool['source']:<20} {_policy_words(tool)}"))
        for server in row["mcp"]:
            if server.get("error"):
                print(clean(f"  [mcp {server['name']}] {server['error']}"))
    names = [r["name"] for r in rows if r["set"] == "demo"]
    print(clean("demo (the scripted provider): " + ", ".join(names)))
    print(clean("  tools: " + ", ".join(f"{t['name']} ({_policy_words(t)})" for t in demo_tools)))
    if config is None:
        print("no agent file: write ./tether.toml (or give --config FILE) to add your own agents")
    return 0


def _policy_words(tool: dict[str, Any]) -> str:
    words = ["read-only" if tool["read_only"] else "writes"]
    if tool["needs_approval"]:
        words.append("needs approval")
    if tool.get("idempotent"):
        words.append("idempotent")
    return ", ".join(words)


async def _describe(agent: Any, kind: str) -> dict[str, Any]:
    """An agent as ``tether agents`` shows it, its MCP servers' tools listed by starting them."""
    from tether.agents.agent import AgentError

    if agent.acp is not None:
        return await _describe_acp(agent, kind)
    tools = agent.describe_tools()
    servers: list[dict[str, Any]] = []
    if agent.mcp_servers:
        from tether.agents.mcp import MCPStartError, mcp_tools

        for server in agent.mcp_servers:
            try:
                async with mcp_tools([server], reserved=[t["name"] for t in tools]) as listed:
                    for tool in listed:
                        auto = tool.name in agent.policies.auto_approve
                        tools.append({"name": tool.name, "source": tool.source, "ref": None,
                                      "read_only": tool.read_only, "needs_approval": tool.needs_approval and not auto,
                                      "idempotent": tool.idempotent})
                servers.append({"name": server.name})
            except (MCPStartError, AgentError) as exc:
                servers.append({"name": server.name, "error": str(exc).splitlines()[0]})
    return {"name": agent.name, "set": kind, "model": agent.model, "base_url": agent.base_url,
            "config": str(agent.config) if agent.config else None, "tools": tools, "mcp": servers}


async def _describe_acp(agent: Any, kind: str) -> dict[str, Any]:
    """An ACP agent as ``tether agents`` shows it: what its ``initialize`` says (name, version,
    auth methods, capabilities), without a session; one that does not answer says why."""
    from tether.acp import AcpError, probe
    from tether.agents.agent import AgentError

    row: dict[str, Any] = {"name": agent.name, "set": kind, "model": agent.model, "base_url": None,
                           "config": str(agent.config) if agent.config else None, "tools": [], "mcp": [],
                           "acp": {"command": list(agent.acp.argv)}}
    try:
        env, _ = agent.acp.resolved_env()
        info = await probe(agent.acp.argv, env)
    except (AcpError, AgentError) as exc:
        row["acp"]["error"] = str(exc)
        return row
    row["acp"].update(agent=info.name, version=info.version, auth_methods=list(info.auth_methods),
                      load_session=info.load_session, capabilities=info.capabilities)
    return row


async def _runs(args: argparse.Namespace) -> int:
    """From the index of summaries (``tether.store.index``), not by replaying every journal.
    A running run shows who runs it; one whose process died shows as ``orphaned`` (in
    ``--json``: ``status`` stays the saved ``running``, ``liveness`` says ``orphaned``)."""
    from tether.observe.report import listing, owner_words, recorded_all
    from tether.text import clean

    store = store_of(args)
    problems: dict[str, str] = {}
    runs = await call(store, store.summaries, live_only=args.live, problems=problems)
    now = time.time()
    if any(r.waiting and (r.interruption or {}).get("deadlineAt", now + 1) <= now for r in runs):
        # Deadlines of calls nobody is there to answer are applied by the listing (and the
        # listing then shows what they did).
        from tether.approvals.deadlines import apply_due

        for words in await call(store, apply_due, store, now=now):
            print(f"tether: {clean(words)}", file=sys.stderr)
        problems.clear()
        runs = await call(store, store.summaries, live_only=args.live, problems=problems)
    if args.json:
        recorded = await call(store, recorded_all, store, [r.run_id for r in runs])
        print(json.dumps([listing(r, *recorded[r.run_id]) for r in runs]))
    else:
        lines = []
        for r in runs:
            line = f"{r.run_id:<40} {r.shown_status:<20} {r.model:<16} turns={r.turns:<4} cost=${r.cost_usd:.4f}"
            if r.source != "tether":  # an ACP agent's, or a program's on another framework
                line += f"  [{r.source}]"
            if r.liveness is not None:
                line += f"  {owner_words(r.run_id, r.liveness, r.owner)}"
            elif (r.interruption or {}).get("type") == "approval":
                waiting = r.interruption or {}
                line += f"  waits for approval of {waiting.get('toolName')}"
                if int(waiting.get("needed") or 1) > 1:  # a two-person call: how far it is
                    line += f" ({len(waiting.get('approvers') or [])} of {waiting['needed']} approved)"
                holder = await call(store, store.owner, r.run_id)
                if holder is not None and holder.alive:  # a process keeps it, waiting for a decision
                    line += f" (pid {holder.where} waits for the decision)"
            lines.append(clean(line))
        if not runs:
            lines.append(f"no {'live ' if args.live else ''}runs in {store.where}")
        sys.stdout.write("\n".join(lines) + "\n")
    for run_id, problem in problems.items():
        print(f"tether: skipped {run_id}: {problem}", file=sys.stderr)
    return 0


async def _rules(args: argparse.Namespace) -> int:
    """``tether rules``: list the store's standing rules, or add, remove or explain."""
    from tether.approvals.commands import explain_call, rule_json, rule_line

    store = store_of(args)
    action = getattr(args, "rules_command", None)
    if action == "add":
        return await _rule_add(args, store)
    if action == "remove":
        await _may_operate(args, "rules remove")
        removed = await call(store, store.rule_remove, args.rule_id)
        print(f"removed {removed.id}: {removed.describe()} ({removed.reason})")
        return 0
    rules = await call(store, store.rules)
    if action == "explain":
        state = await call(store, store.load, args.run_id)
        print("\n".join(explain_call(state, args.call_id, rules)))
        return 0
    now = time.time()
    if args.json:
        print(json.dumps([rule_json(r, now) for r in rules]))
    elif not rules:
        print(f"no standing rules on {store.where}; tether rules add --allow|--deny TOOL --reason TEXT makes one")
    else:
        print("\n".join(rule_line(r, now) for r in rules))
    return 0


async def _rule_add(args: argparse.Namespace, store: Any) -> int:
    """Check the rule (errors refused in words, warnings on stderr), keep it, then let it
    decide the calls already waiting that it fits."""
    from tether.approvals import Rule, check, parse_duration, parse_where
    from tether.approvals.commands import apply_to_waiting, expiry_note, known_tools, parse_time, rule_json
    from tether.text import clean

    await _may_operate(args, "rules add")
    rule = Rule(args.effect, args.tool, args.reason.strip(), _who(args), agent=args.agent,
                where=tuple(parse_where(w) for w in args.where), source=args.source, scope=args.scope,
                expires=None if args.expires is None else parse_time(args.expires, option="--expires", ago=False),
                approvals=args.approvals, deadline_s=None if args.deadline is None else parse_duration(args.deadline),
                on_deadline=args.on_deadline)
    check(rule)  # what needs no agent file is refused before one is loaded (a second, at most)
    tools, agents = known_tools(_config(args))
    checked = check(rule, tools=tools, agents=agents)
    warnings = list(checked.warnings)
    if rule.run_id is not None and not await call(store, store.exists, rule.run_id):
        warnings.append(f"no run {rule.run_id} on {store.where}; the rule applies if one is made with that id")
    for warning in warnings:
        print(clean(f"tether: warning: {warning}"), file=sys.stderr)
    added = await call(store, store.rule_add, checked.rule)
    applied = await apply_to_waiting(store, added)
    if args.json:
        print(json.dumps({"rule": rule_json(added, time.time()), "warnings": warnings,
                          "decided": [{"run_id": a.run_id, "call_id": a.call_id, "tool": a.tool, "decided": a.decided,
                                       "words": a.words} for a in applied]}))
        return 0
    print(added.id)
    note = expiry_note(added)
    print(clean(f"{added.id}: {added.describe()} [{added.scope}]" + (f"; {note}" if note else "")))
    for outcome in applied:
        print(clean(outcome.words))
    return 0


async def _decisions(args: argparse.Namespace) -> int:
    """``tether decisions``: the record of decisions, from the index, newest first."""
    from tether.approvals import DecisionQuery
    from tether.approvals.commands import decision_table, decisions_json, parse_time

    since = None if args.since is None else parse_time(args.since, option="--since", ago=True)
    store = store_of(args)
    query = DecisionQuery(since=since, agent=args.agent, by=args.by, limit=args.limit)
    records = await call(store, store.decisions, query)
    if args.json:
        print(decisions_json(records))
    elif not records:
        print(f"no decisions on {store.where}" + (" that fit" if any((args.since, args.agent, args.by)) else ""))
    else:
        sys.stdout.write(decision_table(records) + "\n")
    return 0


async def _show(args: argparse.Namespace) -> int:
    from tether.observe.report import owner_words, recorded_run, summary, text_summary
    from tether.run.state import Status
    from tether.text import clean

    store = store_of(args)
    state = await call(store, store.load, args.run_id)
    tool_runs, ms = await call(store, recorded_run, store, args.run_id)
    owner = await call(store, store.owner, args.run_id) if state.status is Status.RUNNING else None
    liveness = None if state.status is not Status.RUNNING else "running" if owner and owner.alive else "orphaned"
    if args.json:
        print(json.dumps({**summary(state, tool_runs, ms), "liveness": liveness,
                          "owner": None if owner is None else owner.to_dict(), "messages": state.messages}))
        return 0
    print(text_summary(state, len(tool_runs), ms))
    if liveness is not None:
        label = "owner" if liveness == "running" else "orphaned"
        print(clean(f"{label}: {owner_words(state.run_id, liveness, owner, long=True)}"))
    for message in state.messages:
        role = message.get("role")
        if message.get("content"):
            print(f"[{role}] {clean(message['content'])}")
        for tool_call in message.get("tool_calls") or ():
            fn = tool_call.get("function") or {}
            print(clean(f"[{role} → {fn.get('name')}] {fn.get('arguments')}  ({tool_call.get('id')})"))
    return 0


async def _trace(args: argparse.Namespace) -> int:
    from tether.store.files.store import RunStore, TRACE_FILE

    store = store_of(args)
    if isinstance(store, RunStore):
        path = store.run_dir(args.run_id) / TRACE_FILE
        if not path.exists():
            raise StateError(f"no trace for run {args.run_id} at {path}")
        sys.stdout.write(path.read_text(encoding="utf-8"))  # JSON lines: controls are escaped
        return 0
    if not await call(store, store.exists, args.run_id):
        raise StateError(f"no run {args.run_id} in {store.where}")
    records = await call(store, lambda: list(store.read_trace(args.run_id)))
    # The lines as the trace writer wrote them (ASCII JSON: controls and line breaks escaped).
    sys.stdout.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return 0


async def _watch(args: argparse.Namespace) -> int:
    """Follow a run (or, with --all, every run) as its events are written, by whichever
    process runs it: its last trace lines first, then each new one, worded as in the
    console's trace pane. Ends when the run stops, and Ctrl-C ends it (exit 0)."""
    import signal

    stop = asyncio.Event()  # Ctrl-C ends the watch quietly, from here on
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    if isinstance(sys.stdout, _Output):  # and so does its reader going away (| head)
        sys.stdout.on_close.append(stop.set)
    try:
        from tether.store.files.store import RunStore
        from tether.text import clean

        def note(text: str) -> None:
            print(clean(text), file=sys.stderr, flush=True)

        if args.all and args.run_id:
            raise UsageError("give a RUN_ID or --all, not both")
        store = store_of(args)
        if isinstance(store, RunStore):  # inotify on the runs dir
            from tether.store.files import watch as follow
            where: Any = store.root
        else:  # LISTEN/NOTIFY
            from tether.store.postgres import watch as follow
            where = store
        lines = max(0, args.lines)
        if args.all:
            await follow.follow_all(where, sys.stdout, stop_event=stop, backlog=lines,
                                    on_ready=lambda: note(f"watching every run in {store.where} (Ctrl-C to stop)"))
            return 0
        run_id = args.run_id
        if run_id is None:  # the most recently created run, from the index
            summaries = await call(store, store.summaries)
            newest = max(summaries, key=lambda s: (s.created_at, s.run_id), default=None)
            if newest is None:
                raise StateError(f"no runs in {store.where}")
            run_id = newest.run_id
        if not await call(store, store.exists, run_id):
            raise StateError(f"no run {run_id} in {store.where}")
        await follow.follow_run(where, run_id, sys.stdout, stop_event=stop, backlog=lines,
                                on_ready=lambda: note(f"watching {run_id} until it stops (Ctrl-C to stop watching)"))
        return 0
    except BrokenPipeError:  # the reader went away (tether watch | head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def _provider(args: argparse.Namespace) -> int:
    from tether.demo.provider.server import serve

    serve(args.host, args.port, args.latency_ms, args.fail, args.retry_after, args.until_stdin_closes)
    return 0


def _console(args: argparse.Namespace) -> int:
    try:
        from tether.tui.app import run_console
    except ImportError:
        print("tether: the console is not built yet. Commands: "
              "run, resume, approve, reject, runs, show, trace, provider (tether --help)")
        return 0
    return run_console(args)


async def _notify(args: argparse.Namespace) -> int:
    from tether.notify.command import notify_command

    return await notify_command(args, store_of(args))


async def _lab(args: argparse.Namespace) -> int:
    from tether.demo.lab import command

    return await command(args)


async def _eval(args: argparse.Namespace) -> int:
    from tether.demo.evaluate import command

    return await command(args)


async def _export_otel(args: argparse.Namespace) -> int:
    """``tether export-otel RUN_ID [--store URL|DIR] [--otlp URL] [--capture-content] [--timeout S]``."""
    from tether.observe.otel import (OtelExportError, capture_content_from_env, export_run, shown_url,
                             traces_endpoint)

    store = store_of(args)
    endpoint = traces_endpoint(getattr(args, "otlp", None))
    capture = bool(getattr(args, "capture_content", False)) or capture_content_from_env()
    try:
        count = await asyncio.to_thread(export_run, store, args.run_id, endpoint, capture_content=capture,
                                        timeout=getattr(args, "timeout", None))
    except OtelExportError as exc:
        print(f"tether: {exc}", file=sys.stderr)
        return 1
    print(f"exported {count} spans of run {args.run_id} to {shown_url(endpoint)}")
    return 0


_COMMANDS = {"agents": _agents, "stop": _stop, "export-otel": _export_otel, "run": _run, "resume": _resume,
             "approve": _approve, "reject": _reject, "runs": _runs, "show": _show, "trace": _trace,
             "watch": _watch, "lab": _lab, "eval": _eval, "rules": _rules, "decisions": _decisions,
             "notify": _notify}

