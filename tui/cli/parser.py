"""The ``tether`` command line as argparse reads it: every command, its options, their help,
and the types that refuse a bad value in one line.

Only the tree lives here, so that building it imports no command: ``tether stop`` parses
its line with this module and argparse alone, then imports the one module that stops a run
(:mod:`tether.tui.cli`, its dispatch table)."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any, NoReturn

from tether.web import DEFAULT_HOST, DEFAULT_PORT  # not its settings: they import dataclasses

USAGE_ERROR = 2
MAX_COUNT = 1_000_000_000
"""The largest count an option takes (turns, tokens, lines, workers): past it, a typo."""


class UsageError(Exception):
    """A command line that parsed but asks for what cannot be: said in one line, exit 2."""


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


def _age_option(text: str) -> float:
    # lazy: dataclasses, which a quick tether stop parses without (tests/processes/test_cold_start.py)
    from tether.vocab.rules import RuleError, parse_duration

    try:
        return parse_duration(text)
    except RuleError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_seconds(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than zero seconds, got {text}")
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


def _as_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as", dest="who", metavar="NAME",
                   help="the name recorded with the decision (default: user@host); a call that needs two "
                        "people counts the account this runs as (the OS user, or the database role), not the name")


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



def _otlp_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--otlp", metavar="URL",
                   help="export the run's spans to this OTLP/HTTP endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT)")


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


EVAL_TASKS = ("timeout", "count", "notes", "list_and_read", "largest", "rotating")
"""``tether eval``'s task names, written here so that building the parser imports no eval
(:data:`tether.demo.evaluate.TASKS` has the tasks; a test holds the two the same)."""


class _Unbuilt:
    """The parser of a command that was not asked for: whatever is added to it is dropped."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self


class _OneCommand:
    """The subcommands, of which only ``command``'s parser is built (:func:`build_parser`)."""

    def __init__(self, sub: Any, command: str) -> None:
        self._sub, self._command = sub, command

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        return self._sub.add_parser(name, **kwargs) if name == self._command else _Unbuilt()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """``tether``'s parser. With ``command``, only that command's: a line that names its
    command needs no other, and building the two dozen others is most of the start-up of a
    command that only asks or stops (``tether stop``)."""
    parser = _Parser(prog="tether", description="Supervise AI agent runs.")
    sub: Any = parser.add_subparsers(dest="command", metavar="COMMAND")
    if command is not None:
        sub = _OneCommand(sub, command)

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
                         help="who the console's new runs, Stops and decisions are recorded as (default: user@host)")
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
    demo.add_argument("--merge", action="store_true",
                      help="the tour of contained runs: OpenCode and Qwen Code edit one file, each in its own "
                           "worktree; one is merged by a decision, the other conflicts and is discarded")
    demo.add_argument("--runs-dir", type=Path,
                      help="keep the tour's runs here (default: a temporary folder, removed afterwards)")

    agents = sub.add_parser("agents", help="list the agents; `agents add NAME`: install one; --check: a doctor")
    agents.add_argument("action", nargs="?", choices=["add", "sessions"], help="add NAME: claude, codex, gemini, "
                        "opencode, qwen; sessions NAME: an ACP agent's own sessions (for run --session ID)")
    agents.add_argument("agent_name", nargs="?", metavar="NAME")
    agents.add_argument("--check", action="store_true", help="check each ACP agent (docs/acp.md)")
    agents.add_argument("--registry", metavar="URL|DIR", help="agents add: an npm registry, or a folder of npm packs")
    agents.add_argument("--base-url", metavar="URL", help="agents add: the model endpoint the agent talks to")
    agents.add_argument("--json", action="store_true")
    agents.add_argument("--refresh", action="store_true",
                        help="ask every ACP agent again, instead of the answer kept until its program changes")
    agents.add_argument("--timeout", type=_positive_seconds, metavar="S",
                        help="how long an ACP agent may take to answer initialize (default 30), else it is ended")
    _config_option(agents)

    prices = sub.add_parser("prices", help="what Tether charges for a model, and where the price comes from")
    prices.add_argument("model", nargs="?", help="a model (default: each agent's in the agent file)")
    prices.add_argument("--base-url", help="the model's endpoint, for genai-prices to tell its provider")
    prices.add_argument("--json", action="store_true")
    _config_option(prices)

    costs = sub.add_parser("costs", help="what the runs cost, grouped by agent, model, source, day or operator")
    costs.add_argument("--by", choices=["agent", "model", "source", "day", "operator"], default="agent",
                       help="operator: the account that started each run (runs from before it was kept: (unknown))")
    costs.add_argument("--since", metavar="DATE|DURATION", help="runs made from this date (2026-12-01) or this long "
                                                               "ago (7d); default: all")
    costs.add_argument("--until", metavar="DATE|DURATION", help="runs made before this date, or this long ago")
    shape = costs.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true")
    shape.add_argument("--csv", action="store_true")
    _store_option(costs)
    _place_options(costs)

    fleet = sub.add_parser("budgets", help="the agent file's fleet budgets: each one's spend this period")
    fleet.add_argument("--json", action="store_true")
    _store_option(fleet)
    _place_options(fleet)

    run = sub.add_parser("run", help="start a run and wait for it to stop")
    run.add_argument("scenario", nargs="?", help="a demo scenario (tether agents lists them)")
    run.add_argument("--agent", metavar="NAME", help="an agent from the agent file")
    run.add_argument("--base-url", help="a chat-completions endpoint: with a SCENARIO, where the scripted "
                                        "provider is served; alone, an agent with the file tools (or LLM_BASE_URL)")
    run.add_argument("--model", help="the model name at --base-url (or LLM_MODEL); an ACP --agent's, not its file's")
    run.add_argument("--mode", help="an ACP --agent's session mode, instead of its file's")
    run.add_argument("--session", metavar="ID", help="an ACP --agent goes on in its own session ID (agents sessions)")
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
    run.add_argument("--sandbox", action="store_true",
                     help="let the agent's process and the MCP servers it starts write only its workspace, its state "
                          "folders and a private temp folder (bubblewrap, else Landlock): sandbox = \"workspace\"")
    run.add_argument("--isolate", choices=["worktree", "copy", "none"],
                     help="the run works in a workspace of its own: a git worktree on the branch tether/RUN_ID, "
                          "or a copy of the agent's folder (default: the agent file's isolation, else none)")
    run.add_argument("--as", dest="who", metavar="NAME", help="a name kept beside the account that starts the run")
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
            p.add_argument("--option", metavar="ID", help="an ACP agent's permission option, by its id "
                           "(tether show RUN lists them); default: allow once")
            p.add_argument("--scope", metavar="run:ID|agent|store", help="with an ACP agent's \"always\" option: "
                           "the scope of the rule Tether keeps of it (default: this run)")
            p.add_argument("--args", metavar="JSON",
                           help="approve with these arguments instead of the model's (a JSON object, each key "
                                "once, checked against the tool's schema); the call runs with them")
            p.add_argument("--unchecked", action="store_true",
                           help="with --args, on a program's run whose program reported no schema for the tool: "
                                "take the arguments unchecked (without it such an edit is refused)")
        else:
            p.add_argument("--silent", action="store_true",
                           help="an ACP agent: do not send the reason on to the agent as its next prompt")
        _as_option(p)
        _wait_options(p)
        _otlp_option(p)
        _place_options(p)

    _serve_parser(sub)

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
    show.add_argument("--all", action="store_true", help="with the messages a rewind cut out of the transcript")
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

    diff = sub.add_parser("diff", help="what a run changed in its own workspace, against its base")
    diff.add_argument("run_id")
    diff.add_argument("paths", nargs="*", metavar="PATH", help="only these files (relative to the workspace's top); "
                                                                "or another run's id: where the two runs' work differs")
    diff.add_argument("--stat", action="store_true", help="the files changed and their +/- line counts only")
    diff.add_argument("--json", action="store_true")
    _place_options(diff)

    marks = sub.add_parser("checkpoints", help="a run's checkpoints: one after each step that changed its workspace")
    marks.add_argument("run_id")
    marks.add_argument("--json", action="store_true")
    _place_options(marks)
    rewind = sub.add_parser("rewind", help="restore a run's workspace and transcript to checkpoint N, or undo that")
    rewind.add_argument("run_id")
    back = rewind.add_mutually_exclusive_group(required=True)
    back.add_argument("--to", type=_count, metavar="N", help="the checkpoint (tether checkpoints RUN; 0: the start)")
    back.add_argument("--undo", action="store_true", help="take the last rewind back")
    _as_option(rewind)
    _place_options(rewind)
    fork = sub.add_parser("fork", help="a new run whose workspace starts at a run's checkpoint N, and whose "
                                       "transcript is the first part of its, up to N")
    fork.add_argument("run_id")
    fork.add_argument("--at", type=_count, required=True, metavar="N", help="the checkpoint (0: the start)")
    fork.add_argument("--run-id", dest="new_id", metavar="ID", help="the new run's id (default: made up)")
    fork.add_argument("--agent", metavar="NAME", help="go on with this agent of the agent file (another model)")
    fork.add_argument("--message", metavar="TEXT", help="the fork's next words to its agent, after the prefix")
    fork.add_argument("--json", action="store_true")
    _place_options(fork)
    replay = sub.add_parser("replay", help="run a run's recorded tool calls again with today's tools, no model "
                                           "asked; report the first result that differs (exit 1)")
    replay.add_argument("run_id")
    replay.add_argument("--to", type=_count, metavar="N", help="only the calls up to checkpoint N")
    replay.add_argument("--json", action="store_true")
    _place_options(replay)

    spaces = sub.add_parser("workspaces", help="every run's own workspace: its run, status, size, age, changes; "
                                               "and the worktrees and folders no run owns")
    spaces.add_argument("action", nargs="?", choices=["prune"],
                        help="prune: discard the workspaces of runs that match --merged and/or --older-than")
    spaces.add_argument("--json", action="store_true")
    spaces.add_argument("--merged", action="store_true", help="prune: the runs whose work was merged (tether merge)")
    spaces.add_argument("--older-than", type=_age_option, metavar="AGE",
                        help="prune: workspaces made longer ago than AGE (30m, 12h, 7d)")
    spaces.add_argument("--yes", action="store_true", help="prune: do not ask first")
    _as_option(spaces)
    _place_options(spaces)

    discard = sub.add_parser("discard", help="remove a run's own workspace and its branch; its transcript stays")
    discard.add_argument("run_id")
    discard.add_argument("--yes", action="store_true", help="do not ask first")
    _as_option(discard)
    _place_options(discard)

    merge = sub.add_parser("merge", help="merge a run's work into a branch: a decision (the call merge) for the "
                                         "rules and people; merged when approved")
    merge.add_argument("run_id")
    merge.add_argument("--into", metavar="BRANCH", help="the branch to merge into (default: the one checked out in "
                                                        "the run's repository)")
    merge.add_argument("--squash", action="store_true", help="one commit of the work on BRANCH, not a merge commit")
    _as_option(merge)
    _place_options(merge)

    export = sub.add_parser("export-otel", help="send a finished run's trace to an OpenTelemetry collector")
    export.add_argument("run_id")
    _otlp_option(export)
    export.add_argument("--capture-content", action="store_true",
                        help="include prompts, answers and tool results (off by default)")
    export.add_argument("--timeout", type=_non_negative, metavar="SECONDS")
    export.add_argument("--runs-dir", type=Path, help="where runs are saved (default $TETHER_HOME/runs)")
    for p in (run, resume, *deciders, stop, runs, show, trace, watch, export, diff, marks, rewind, fork, replay, spaces, discard, merge):
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
    submit.add_argument("--as", dest="who", metavar="NAME", help="a name kept beside the account that starts the run")
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

    provider = sub.add_parser("provider", help="serve the scripted provider over HTTP, until interrupted")
    provider.add_argument("--host", default="127.0.0.1")
    provider.add_argument("--port", type=_port, default=8787)
    provider.add_argument("--latency-ms", type=_non_negative, help="added latency per reply (default 0)")
    provider.add_argument("--fail", metavar="SPEC", help="e.g. 429@1,500@2x2,401@0,garbage@1,drip@1")
    provider.add_argument("--retry-after", type=_non_negative, help="seconds sent with a 429 (default 1)")
    provider.add_argument("--coding", action="store_true",
                          help="serve the coding endpoint instead, for ACP coding agents (OpenCode, Qwen Code): "
                               "the one tether demo --acp runs them against")
    provider.add_argument("--tasks", type=Path, metavar="FILE",
                          help="with --coding: a JSON list of tasks instead of the demo's")
    provider.add_argument("--workspace", type=Path, metavar="DIR",
                          help="with --coding: the agent's folder, where the tasks' relative paths are")
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
    evaluate.add_argument("--task", action="append", metavar="NAME",
                          help=f"run only this task (again for more): {', '.join(EVAL_TASKS)}")
    evaluate.add_argument("--out", type=Path, metavar="FILE.md", help="also write the table as markdown")
    evaluate.add_argument("--json", action="store_true")
    return parser


def _serve_parser(sub: Any) -> None:
    """``tether serve`` (:mod:`tether.web.command` runs it)."""
    p = sub.add_parser("serve", help="the approvals page for a phone and the console in a browser, behind a login")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"the address to listen on (default {DEFAULT_HOST}; any other warns: put it behind TLS)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument("--public-url", metavar="URL",
                   help="the address users reach the server at (behind a proxy): the base of the links "
                        "notifications carry; https makes the session cookie Secure")
    p.add_argument("--session-hours", type=_hours, default=12.0, metavar="HOURS",
                   help="how long a login lasts (default 12)")
    p.add_argument("--trust-proxy", action="append", default=[], metavar="ADDR",
                   help="a reverse proxy's address or network (again, or a comma list): from it, the client is "
                        "the right-most other address of X-Forwarded-For; from anyone else, the header is ignored")
    p.add_argument("--config", metavar="FILE", type=Path,
                   help="the agent file (default $TETHER_CONFIG, else ./tether.toml when there is one)")
    users = p.add_mutually_exclusive_group()
    users.add_argument("--add-user", metavar="NAME",
                       help="add a user (or set their password), read from the terminal or from stdin")
    users.add_argument("--remove-user", metavar="NAME", help="remove a user")
    users.add_argument("--users", action="store_true", help="list the users")
    p.add_argument("--read-only", action="store_true", help="with --add-user: a watcher, who sees but cannot decide")
    _store_option(p)


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of hours, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of hours above 0, got {text!r}")
    return value
