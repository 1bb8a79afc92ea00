"""``tether rules`` from the command line, on both stores: add, list, remove, explain; a new
rule deciding the calls already waiting (and saying which); every bad input refused in
words with nothing changed; the deadline and edit options of run and approve.

``tether`` against the file store in a temp dir and the session's PostgreSQL (tests/pg.py):
the runs that wait are real processes, and so is one call of each command path
(``real=True``); the other calls run the CLI's own main in this process, the same parser
and words without a process start-up each (tests/support.py, cli_here). The PostgreSQL
store's rules and decisions are cleared before and after each test: every test of the
session shares the server, and a rule left behind would decide other tests' calls.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.store.protocol import Store
from tether.store.spec import open_store
from tether.vocab.state import NeedsApproval, Status
from tests.support import cli_here, wait_until

CAP_S = 120.0


@pytest.fixture(params=["files", "postgresql"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The store, as ``--store`` names it."""
    if request.param == "files":
        yield str(tmp_path / "runs")
        return
    pg = request.getfixturevalue("pg")  # the runs' tables emptied
    clear_approvals(pg)
    try:
        yield request.getfixturevalue("pg_url")
    finally:
        clear_approvals(pg)


def clear_approvals(pg) -> None:
    with pg._conn() as conn:
        conn.execute(pg.q("TRUNCATE {s}.rules, {s}.decisions"))


def tether(tmp_path: Path, *args: str, store: str, real: bool = False) -> subprocess.CompletedProcess[str]:
    """``tether ARGS --store STORE``, its workspace in ``tmp_path``: in a child process when
    ``real``, else by the CLI's main in this process, with the child's environment and folder."""
    env = {k: v for k, v in os.environ.items() if k != "TETHER_STORE"}
    env["TETHER_HOME"] = str(tmp_path / "home")
    if not real:
        return cli_here(*args, "--store", store, env=env, cwd=tmp_path)
    return subprocess.run([sys.executable, "-m", "tether.tui.cli", *args, "--store", store], capture_output=True,
                          text=True, timeout=CAP_S, env=env, cwd=tmp_path)


def run_args(tmp_path: Path) -> list[str]:
    return ["--workspace", str(tmp_path / "ws")]


def rule_ids(tmp_path: Path, store: str) -> list[str]:
    listed = tether(tmp_path, "rules", "--json", store=store)
    assert listed.returncode == 0, listed.stderr
    return [r["id"] for r in json.loads(listed.stdout)]


def added(result: subprocess.CompletedProcess[str]) -> str:
    """The id ``tether rules add`` printed first."""
    assert result.returncode == 0, result.stderr
    rule_id = result.stdout.splitlines()[0]
    assert re.fullmatch(r"R\d+", rule_id), result.stdout
    return rule_id


def number(rule_id: str) -> int:
    return int(rule_id[1:])


def waiting_call(store: Store, run_id: str) -> NeedsApproval:
    waiting = store.load(run_id).interruption
    assert isinstance(waiting, NeedsApproval)
    return waiting


# ---- add, list, remove ----------------------------------------------------------------------

def test_rules_are_added_listed_and_removed(spec: str, tmp_path: Path):
    empty = tether(tmp_path, "rules", store=spec, real=True)
    assert empty.returncode == 0 and empty.stdout.startswith("no standing rules on ")

    logs = added(tether(tmp_path, "rules", "add", "--allow", "delete_file", "--where", "path=*.log",
                        "--reason", "scratch logs", "--as", "alice", store=spec))
    demo = added(tether(tmp_path, "rules", "add", "--deny", "delete_file", "--agent", "destructive", "--scope",
                        "agent", "--expires", "7d", "--reason", "not the demo's files", "--as", "bob", store=spec))
    asked = added(tether(tmp_path, "rules", "add", "--ask", "delete_*", "--approvals", "2", "--deadline", "10m",
                         "--on-deadline", "escalate", "--reason", "two people", store=spec))
    assert number(logs) < number(demo) < number(asked)

    listed = tether(tmp_path, "rules", store=spec)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(logs) and "allow delete_file where path=*.log  [store]  scratch logs  (alice, " in lines[0]
    assert lines[1].startswith(demo) and "deny delete_file agent destructive  [agent]  not the demo's files" in lines[1]
    assert "(bob, " in lines[1] and " expires " in lines[1]
    assert "ask 2 people, escalate after 10 min delete_*" in lines[2]

    rows = json.loads(tether(tmp_path, "rules", "--json", store=spec).stdout)
    assert [(r["id"], r["effect"], r["where"], r["by"], r["expired"]) for r in rows] == [
        (logs, "allow", ["path=*.log"], "alice", False), (demo, "deny", [], "bob", False),
        (asked, "ask", [], rows[2]["by"], False)]
    assert rows[1]["expires"] - rows[1]["created"] == pytest.approx(7 * 86400, abs=60)
    assert rows[2]["approvals"] == 2 and rows[2]["deadline_s"] == 600 and rows[2]["on_deadline"] == "escalate"

    removed = tether(tmp_path, "rules", "remove", logs, store=spec, real=True)
    assert removed.returncode == 0 and removed.stdout.strip() == \
        f"removed {logs}: allow delete_file where path=*.log (scratch logs)"
    assert rule_ids(tmp_path, spec) == [demo, asked]
    again = tether(tmp_path, "rules", "remove", logs, store=spec)
    assert again.returncode == 2
    assert again.stderr.strip() == f"tether: error: no rule {logs} on this store; tether rules lists them"
    # An id is never given twice, even after its rule is gone.
    latest = added(tether(tmp_path, "rules", "add", "--deny", "*", "--reason", "x", store=spec))
    assert number(latest) > number(asked)


def test_every_bad_rule_is_refused_in_words_and_nothing_changes(spec: str, tmp_path: Path):
    kept = added(tether(tmp_path, "rules", "add", "--deny", "delete_file", "--reason", "keep", store=spec))
    before = tether(tmp_path, "rules", "--json", store=spec).stdout
    refused = tether(tmp_path, "rules", "add", "--allow", "delete_file", store=spec, real=True)  # a real process too
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert refused.stderr.startswith("tether: error: ") and "say why, with --reason TEXT" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1, refused.stderr
    cases = [
        (["add", "--allow", "delete_file", "--where", "name=*.log", "--reason", "x"],
         "--where name=*.log: delete_file has no argument 'name' (its arguments: path), so the rule can never match"),
        (["add", "--allow", "delete_file", "--where", "path", "--reason", "x"], "write KEY=GLOB"),
        (["add", "--allow", "delete_file", "--where", "/a//b=x", "--reason", "x"], "can never match"),
        (["add", "--allow", "delete_file", "--where", "path=", "--reason", "x"], "the pattern is empty"),
        (["add", "--allow", "delete_file", "--expires", "2020-01-01", "--reason", "x"],
         "the expiry is in the past: the rule would never apply"),
        (["add", "--allow", "delete_file", "--expires", "someday", "--reason", "x"],
         "--expires 'someday' is neither a date nor a duration"),
        (["add", "--allow", "delete_file"], "say why, with --reason TEXT"),
        (["add", "--allow", "delete_file", "--scope", "agent", "--reason", "x"], "--scope agent needs --agent NAME"),
        (["add", "--allow", "delete_file", "--scope", "team", "--reason", "x"], "--scope is run:ID, agent or store"),
        (["add", "--allow", "delete_file", "--approvals", "2", "--reason", "x"],
         "--approvals and --deadline are for --ask rules"),
        (["add", "--ask", "delete_file", "--approvals", "9", "--reason", "x"], "from 1 to 5; not 9"),
        (["add", "--ask", "delete_file", "--deadline", "soon", "--reason", "x"], "'soon' is not a duration"),
        (["remove", "R999999"], "no rule R999999 on this store; tether rules lists them"),
        (["explain", "no-such-run", "call_1"], "no run no-such-run"),
    ]
    if spec.startswith("postgresql"):  # refused before the store is touched, whichever it is: a few will do
        cases = [cases[0], cases[4], cases[-2], cases[-1]]
    for args, words in cases:  # the CLI's own main, in this process: the same parser and words, no start-up each
        refused = tether(tmp_path, "rules", *args, store=spec)
        code, out, err = refused.returncode, refused.stdout, refused.stderr
        assert code == 2, (args, out, err)
        assert out == "", args
        assert err.startswith("tether: error: ") and words in err, (args, err)
        assert len(err.splitlines()) == 1, err
    assert tether(tmp_path, "rules", "--json", store=spec).stdout == before
    assert rule_ids(tmp_path, spec) == [kept]


def test_an_unknown_tool_or_agent_is_a_warning_and_the_rule_is_kept(tmp_path: Path):
    store = str(tmp_path / "runs")
    made = tether(tmp_path, "rules", "add", "--deny", "deploy_prod", "--agent", "release-bot", "--reason", "later",
                  store=store, real=True)
    rule_id = added(made)
    warnings = made.stderr.splitlines()
    assert warnings[0].startswith("tether: warning: no tool known here is named 'deploy_prod' (known: ")
    assert warnings[0].endswith("the rule applies if one appears later")
    assert warnings[1] == "tether: warning: no agent named 'release-bot' is known here; the rule applies if one " \
                          "appears later"
    scoped = tether(tmp_path, "rules", "add", "--deny", "delete_file", "--scope", "run:later-1", "--reason", "x",
                    store=store)
    assert "tether: warning: no run later-1 on " in scoped.stderr
    assert rule_ids(tmp_path, store) == [rule_id, added(scoped)]
    quiet = tether(tmp_path, "rules", "add", "--allow", "read_file", "--agent", "plan", "--reason", "x", store=store)
    added(quiet)
    assert quiet.stderr == ""  # a demo tool and a demo agent are known


# ---- a new rule decides the calls that wait now ---------------------------------------------

def test_a_new_rule_decides_the_calls_already_waiting_and_says_which(spec: str, tmp_path: Path):
    store = open_store(spec)
    held = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "destructive", "--run-id", "held",
                             "--wait-for-decision", "--json", *run_args(tmp_path), "--store", spec],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**{k: v for k, v in os.environ.items() if k != "TETHER_STORE"},
                                 "TETHER_HOME": str(tmp_path / "home")})
    try:
        idle = tether(tmp_path, "run", "destructive", "--run-id", "idle", *run_args(tmp_path), store=spec)
        assert idle.returncode == 5, idle.stderr
        wait_until(lambda: store.exists("held") and isinstance(store.load("held").interruption, NeedsApproval),
                   "the held run waits for a decision", timeout_s=60)
        call_id = waiting_call(store, "held").call_id

        other = tether(tmp_path, "rules", "add", "--deny", "delete_file", "--agent", "someone-else", "--reason", "x",
                       store=spec)
        added(other)
        assert len(other.stdout.splitlines()) == 2  # its id and what it is: it fits neither waiting call
        assert isinstance(store.load("held").interruption, NeedsApproval)

        made = tether(tmp_path, "rules", "add", "--allow", "delete_file", "--where", "path=*.log", "--reason",
                      "scratch logs", "--as", "alice", store=spec)
        rule_id = added(made)
        said = made.stdout.splitlines()
        assert f"{rule_id} approved delete_file ({call_id}) in held" in said, said
        assert (f"{rule_id} fits delete_file ({waiting_call(store, 'idle').call_id}) in idle, which no process holds: "
                f"it decides the call when the run goes on (tether resume idle)") in said, said
    finally:
        out, err = held.communicate(timeout=CAP_S)
    assert held.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    held_decision = store.load("held").approvals[call_id]
    assert (held_decision.verdict, held_decision.by, held_decision.rule) == ("approved", f"rule {rule_id}", rule_id)
    assert store.load("idle").status is Status.INTERRUPTED  # left for its next resume

    resumed = tether(tmp_path, "resume", "idle", "--json", *run_args(tmp_path), store=spec)
    assert resumed.returncode == 0, resumed.stderr
    listed = tether(tmp_path, "decisions", "--by", rule_id, store=spec)
    assert listed.returncode == 0, listed.stderr
    assert sorted(line.split()[2] for line in listed.stdout.splitlines()[1:]) == ["held", "idle"]
    store_close = getattr(store, "close", None)
    if callable(store_close):
        store_close()


def test_a_deny_rule_rejects_a_waiting_call_in_its_words(tmp_path: Path):
    spec = str(tmp_path / "runs")
    held = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "destructive", "--run-id", "held",
                             "--wait-for-decision", "--json", *run_args(tmp_path), "--store", spec],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "TETHER_HOME": str(tmp_path / "home")})
    store = open_store(spec)
    try:
        wait_until(lambda: store.exists("held") and isinstance(store.load("held").interruption, NeedsApproval),
                   "the run waits for a decision", timeout_s=60)
        made = tether(tmp_path, "rules", "add", "--deny", "delete_*", "--reason", "logs are evidence", "--as", "bob",
                      store=spec)
        rule_id = added(made)
        assert f"{rule_id} rejected delete_file" in made.stdout
    finally:
        out, err = held.communicate(timeout=CAP_S)
    assert held.returncode == 0, err
    state = store.load("held")
    words = [m["content"] for m in state.messages if m.get("role") == "tool"]
    assert any(w.startswith(f"Declined by rule {rule_id} (logs are evidence; bob, ") for w in words), words
    assert (tmp_path / "ws" / "access.log").exists()


# ---- explain ----------------------------------------------------------------------------

def test_rules_explain_says_which_rule_decides_a_call_and_why_the_others_do_not(tmp_path: Path):
    spec = str(tmp_path / "runs")
    assert tether(tmp_path, "run", "destructive", "--run-id", "d1", *run_args(tmp_path), store=spec).returncode == 5
    call_id = waiting_call(open_store(spec), "d1").call_id
    allow = added(tether(tmp_path, "rules", "add", "--allow", "delete_file", "--where", "path=*.log", "--reason",
                         "scratch logs", "--as", "alice", store=spec))
    other = added(tether(tmp_path, "rules", "add", "--deny", "delete_file", "--agent", "ops", "--reason", "x",
                         store=spec))
    wide = added(tether(tmp_path, "rules", "add", "--allow", "*", "--reason", "anything", store=spec))
    explained = tether(tmp_path, "rules", "explain", "d1", call_id, store=spec, real=True)
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.splitlines() == [
        f'{call_id}: delete_file {{"path":"access.log"}} (agent destructive, source tether)',
        "the store's 3 rules now:",
        f"  {allow} decides: allow (allow delete_file where path=*.log; scratch logs; alice)",
        f"  {wide} fits too, but {allow} is narrower",
        f"  {other} does not fit: the agent is destructive, not ops",
    ]
    unknown = tether(tmp_path, "rules", "explain", "d1", "call_nope", store=spec)
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == ("tether: error: run d1 has no call 'call_nope'; tether show d1 lists its calls "
                                      "(the id after each one)")


# ---- the options of run and approve --------------------------------------------------------

def test_a_decision_deadline_rejects_the_call_of_a_run_nobody_holds_at_the_next_listing(tmp_path: Path):
    spec = str(tmp_path / "runs")
    bad = tether(tmp_path, "run", "destructive", "--decision-deadline", "soon", *run_args(tmp_path), store=spec,
                 real=True)
    assert bad.returncode == 2 and "'soon' is not a duration" in bad.stderr
    assert tether(tmp_path, "runs", store=spec).stdout.startswith("no runs")  # nothing was made

    ran = tether(tmp_path, "run", "destructive", "--run-id", "dl", "--decision-deadline", "0.2s", "--on-deadline",
                 "reject", *run_args(tmp_path), store=spec)
    assert ran.returncode == 5, ran.stderr
    waiting = waiting_call(open_store(spec), "dl")
    assert waiting.deadline_at is not None and waiting.on_deadline == "reject"
    time.sleep(max(0.0, waiting.deadline_at - time.time()) + 0.05)  # past the deadline: no process is there
    listed = tether(tmp_path, "runs", store=spec, real=True)
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.startswith(f"tether: dl: no decision on delete_file ({waiting.call_id}) within ")
    assert "the call was rejected; tether resume dl goes on" in listed.stderr
    decisions = tether(tmp_path, "decisions", store=spec).stdout.splitlines()
    assert len(decisions) == 2 and "rejected" in decisions[1] and "deadline" in decisions[1]
    assert tether(tmp_path, "runs", store=spec).stderr == ""  # applied once


def test_approve_with_arguments_that_are_not_a_json_object_is_refused_and_the_call_still_waits(tmp_path: Path):
    spec = str(tmp_path / "runs")
    assert tether(tmp_path, "run", "destructive", "--run-id", "d1", *run_args(tmp_path), store=spec).returncode == 5
    for given, words in (("{not json", "--args: the edited arguments are not JSON"),
                         ("[1, 2]", "--args: the edited arguments must be a JSON object"),
                         # A key given twice is not the last one's: JSON would drop the first silently.
                         ('{"path": "a.log", "path": "b.log"}', 'give the key "path" twice: say each key once')):
        refused = tether(tmp_path, "approve", "d1", "--args", given, *run_args(tmp_path), store=spec,
                         real=given.startswith("["))
        assert refused.returncode == 2 and words in refused.stderr and "nothing was decided" in refused.stderr
    state = open_store(spec).load("d1")
    assert isinstance(state.interruption, NeedsApproval) and not state.approvals


def test_the_store_named_before_the_action_is_the_one_it_acts_on(tmp_path: Path):
    named = tmp_path / "named"
    env = {**{k: v for k, v in os.environ.items() if k != "TETHER_STORE"}, "TETHER_HOME": str(tmp_path / "home")}
    made = subprocess.run([sys.executable, "-m", "tether.tui.cli", "rules", "--store", str(named), "add", "--deny",
                           "delete_file", "--reason", "x"], capture_output=True, text=True, env=env, timeout=CAP_S)
    rule_id = added(made)
    assert rule_ids(tmp_path, str(named)) == [rule_id]
    assert not (tmp_path / "home" / "runs").exists()  # not the default store
