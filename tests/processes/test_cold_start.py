"""What the quick commands import, each in a fresh process: ``tether stop`` and ``runs``
(and the parser of every command) load neither the console nor the harness nor any heavy
package, and ``approve``/``reject`` load the harness they go on with but not the console,
the web server, OpenTelemetry or a database driver.

A user notices this as start-up time (docs/performance.md, "Cold start"); it is asserted
here as the modules in ``sys.modules`` after the command, not as a time, so that a slow
host fails nothing and an eager import anywhere on the path fails this at once."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.vocab.state import NeedsApproval, Status
from tether.store.files.layout import JOURNAL_FILE, TRACE_FILE
from tether.store.files.lock import lock_held, owner_record
from tether.store.files.store import RunStore
from tether.tui.cli import _MODULES
from tether.tui.cli.parser import build_parser

from tests.support import cli_here, place, takes_requests, wait_until

NEVER = ("textual", "tether.tui.app", "tether.tui.cli.console", "tether.tui.cli.demo", "opentelemetry",
         "tether.observe.otel", "aiohttp", "tether.web.app", "psycopg", "dbos", "tether.store.postgres",
         "tether.workers.worker", "mcp", "tether.acp.server", "click", "pygments")
"""Loaded by none of the commands below (click and pygments: httpx's own command line)."""

NOT_TO_ASK = (*NEVER, "pydantic", "jsonschema", "httpx", "tether.harness", "tether.demo", "tether.run.loop",
              "tether.agents.config")
"""Nor by those that only ask or stop (no harness, no agent file, no model client)."""

_PROBE = """
import json, sys
from tether.tui.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:  # --help
    code = exc.code
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(k for k, m in sys.modules.items() if m is not None)}, out)
"""


def _loaded(tmp_path: Path, *args: str) -> tuple[int, list[str]]:
    """``tether ARGS`` in a fresh interpreter: its exit code and every module it loaded."""
    out = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", _PROBE, str(out), *args], capture_output=True, text=True,
                          timeout=120)
    assert out.exists(), done.stderr
    said = json.loads(out.read_text())
    return said["code"], said["modules"]


def _among(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.fixture(scope="module")
def waiting(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A file store with a run waiting for an approval (``w``): its place options."""
    where = place(tmp_path_factory.mktemp("cold"))
    assert cli_here("run", "destructive", "--run-id", "w", *where).returncode == 5
    return where


@pytest.mark.parametrize("command", ["stop", "approve", "reject", "runs", "run", "serve", "worker", "console"])
def test_the_parser_of_any_command_imports_no_command(tmp_path: Path, command: str) -> None:
    code, modules = _loaded(tmp_path, command, "--help")
    assert code == 0
    assert _among(modules, NOT_TO_ASK) == []
    assert not [m for m in modules if m.startswith("tether.tui.cli.") and m not in (
        "tether.tui.cli.parser", "tether.tui.cli.output")], "--help imports no command's module"


def test_stop_loads_the_store_and_the_control_channel_alone(tmp_path: Path, waiting: list[str]) -> None:
    code, modules = _loaded(tmp_path, "stop", "w", *waiting)
    assert code == 2  # nothing to stop: the run waits for a decision, and no process runs it
    assert "tether.store.files.store" in modules and "tether.store.operate" in modules
    assert _among(modules, NOT_TO_ASK) == []


QUICK_STOP_NEVER = ("asyncio", "dataclasses", "sqlite3", "uuid", "tether.run", "tether.store.files.store",
                    "tether.store.control", "tether.store.operate", "tether.tui.cli.context")
"""What ``tether stop`` of a run whose process lives here does without: the request is appended
and the socket poked with the standard library alone (tether.store.files.quickstop)."""


@contextlib.contextmanager
def live_run(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[bytes], list[str]]]:
    """``tether run ARGS --run-id live`` in a process of its own, once it holds the run and
    listens for requests; killed afterwards if it is still there."""
    where = place(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", *args, "--run-id", "live", *where],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: takes_requests(tmp_path / "runs", "live", waits="--wait-for-decision" in args),
                   "the run's process holds it and is in its tool, or waits", 60)
        yield proc, where
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_stop_of_a_live_run_sends_it_before_the_store_or_an_event_loop_is_loaded(tmp_path: Path) -> None:
    with live_run(tmp_path, "slow") as (proc, where):
        code, modules = _loaded(tmp_path, "stop", "live", "--reason", "enough", "--as", "tess", *where)
        assert code == 0
        assert proc.wait(timeout=60) == 5  # interrupted
    assert _among(modules, QUICK_STOP_NEVER) == []
    state = RunStore(tmp_path / "runs").load("live")
    assert state.status is Status.INTERRUPTED
    assert (state.interruption.reason, state.interruption.by) == ("enough", "tess")


@pytest.mark.parametrize("verdict", ["approve", "reject"])
def test_a_decision_for_a_process_that_waits_for_it_loads_no_harness(tmp_path: Path, verdict: str) -> None:
    with live_run(tmp_path, "destructive", "--wait-for-decision") as (proc, where):
        wait_until(lambda: isinstance(RunStore(tmp_path / "runs").load("live").interruption, NeedsApproval),
                   "the run waits for a decision", 60)
        code, modules = _loaded(tmp_path, verdict, "live", "--as", "tess", *where)
        assert code == 0
        assert proc.wait(timeout=60) == 0
    assert _among(modules, NOT_TO_ASK) == []
    decided = RunStore(tmp_path / "runs").load("live").approvals
    verdicts = {"approve": "approved", "reject": "rejected"}
    assert [(d.verdict, d.by) for d in decided.values()] == [(verdicts[verdict], "tess")]


@pytest.mark.parametrize("command", sorted(_MODULES))
def test_the_parser_of_one_command_is_the_whole_parser_s(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``tether COMMAND`` builds only COMMAND's parser: it must say and take what the whole
    tree's does."""
    helps = []
    for parser in (build_parser(), build_parser(command)):
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        helps.append(capsys.readouterr().out)
    assert helps[0] == helps[1] and command in helps[0]


@pytest.mark.parametrize(("args", "listing"), [
    (["runs"], "tether.observe.report"), (["runs", "--json"], "tether.observe.report"),
    (["runs", "--live"], "tether.observe.report"), (["decisions"], "tether.approvals.commands"),
    (["rules"], "tether.approvals.commands")])
def test_a_listing_loads_the_store_and_its_wording_alone(tmp_path: Path, waiting: list[str], args: list[str],
                                                        listing: str) -> None:
    """``tether runs``, ``decisions`` and ``rules`` are read far more often than anything is
    added: none loads an agent, the demo or a model client (the demo's agents are only for
    ``rules add``)."""
    code, modules = _loaded(tmp_path, *args, *waiting[:2])  # the store's folder: a listing takes no workspace
    assert code == 0
    assert listing in modules
    assert _among(modules, NOT_TO_ASK) == []



def test_tether_decisions_loads_no_event_classes(tmp_path: Path, waiting: list[str]) -> None:
    """The record of decisions is read from the index: no event is written or read back as an
    object, and the events' dataclasses are the largest import it would make."""
    code, modules = _loaded(tmp_path, "decisions", *waiting[:2])
    assert code == 0
    assert "tether.vocab.events" not in modules and "tether.store.trace" in modules


@pytest.mark.parametrize("verdict", ["approve", "reject"])
def test_a_decision_loads_the_harness_it_goes_on_with_but_no_console_server_or_driver(
        tmp_path: Path, waiting: list[str], verdict: str) -> None:
    code, modules = _loaded(tmp_path, verdict, "nobody", *waiting)
    assert code == 2  # no such run: refused in words, after the harness is made
    assert "tether.harness" in modules
    assert _among(modules, NEVER) == []


def test_tether_agents_with_every_answer_kept_loads_no_acp_client(tmp_path: Path, monkeypatch) -> None:
    """The ``acp`` package's schema is a few hundred milliseconds of imports: a listing whose
    ACP agents' answers are all kept (tether.acp.probe_cache) starts no agent and needs none."""
    from tests.acp.conftest import fake_agent

    config = tmp_path / "tether.toml"
    config.write_text(f"[agents.fake]\nacp = {json.dumps(fake_agent('normal'))}\n")
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TETHER_CONFIG", str(config))
    code, modules = _loaded(tmp_path, "agents")  # asks the agent: its answer is kept
    assert code == 0 and "acp" in modules
    code, modules = _loaded(tmp_path, "agents")
    assert code == 0
    assert _among(modules, ("acp", "tether.acp.client")) == []
    assert _among(modules, ("mcp",)) == []  # no agent with MCP servers: their client is not loaded


def test_tether_agents_without_mcp_servers_loads_no_mcp_client(tmp_path: Path, monkeypatch) -> None:
    """The ``mcp`` package is half a second of imports: an agent with MCP servers loads it to
    list their tools, and a listing without one (the demo's agents alone) does not; nor
    pydantic, which only a function tool needs."""
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # no ./tether.toml
    code, modules = _loaded(tmp_path, "agents")
    assert code == 0
    assert _among(modules, ("mcp", "tether.agents.mcp.catalog", "pydantic")) == []  # the demo's tools are no functions


_HOOK_PROBE = """
import atexit, json, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: json.dump(sorted(k for k, m in sys.modules.items() if m is not None), open(out, "w")))
runpy.run_module("tether.integrations.claude_code", run_name="__main__", alter_sys=True)
"""


def test_a_claude_code_hook_into_an_open_run_loads_neither_httpx_s_cli_nor_the_prices(tmp_path: Path) -> None:
    """Claude Code waits for each ``PreToolUse`` hook, a process of its own, before the call
    runs: what a hook loads is paid at every tool call. One that reports into the session's
    open run needs no price (the run has one) and no command line of httpx's."""
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home")}
    common = {"session_id": "cold", "cwd": str(tmp_path), "transcript_path": str(tmp_path / "t.jsonl")}
    hooks = [{"hook_event_name": "SessionStart", "source": "startup", **common},
             {"hook_event_name": "PostToolUse", "tool_name": "Read", "tool_input": {"file_path": "a"},
              "tool_use_id": "t1", "tool_response": {"ok": True}, **common}]
    loaded = []
    for n, payload in enumerate(hooks):
        out = tmp_path / f"modules-{n}.json"
        done = subprocess.run([sys.executable, "-c", _HOOK_PROBE, str(out)], input=json.dumps(payload), env=env,
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        loaded.append(json.loads(out.read_text()))
    opened, reported = loaded
    assert "genai_prices" in opened, "the probe saw no pricing where the run is made"
    assert _among(reported, ("genai_prices", "click", "pygments")) == []
    trace = list(RunStore(tmp_path / "home" / "runs").read_trace("claude-cold"))
    assert [r["call_id"] for r in trace if r["kind"] == "tool_result"] == ["t1"]  # and the hook did its work
