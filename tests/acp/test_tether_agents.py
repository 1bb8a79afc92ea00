"""``tether agents`` with ACP agents: each asked side by side, what it answered kept until its
program changes, one that answers wrong or not at all said so in one line, and ended."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acp.conftest import FAKE_AGENT, fake_agent
from tests.support import cli_here

# Answers initialize with an empty result: JSON-RPC, but not ACP's InitializeResponse.
MALFORMED = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}), flush=True)
"""

# Never answers, shrugs off SIGTERM, and starts a child that does the same; writes both pids.
SILENT = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
                          "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def agent_file(path: Path, agents: dict[str, list[str]], env: dict[str, str] | None = None) -> Path:
    lines = []
    for name, command in agents.items():
        lines += [f"[agents.{name}]", f"acp = {json.dumps(command)}"]
        if env:
            lines.append("env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }")
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def environment(tmp_path: Path, config: Path) -> dict[str, str]:
    return {**os.environ, "TETHER_HOME": str(tmp_path / "home"), "TETHER_CONFIG": str(config)}


def running(pid: int) -> bool:
    """``ps`` still lists ``pid``, and not as a zombie."""
    shown = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True)
    return shown.returncode == 0 and not shown.stdout.strip().startswith("Z")


def counting_agent(folder: Path) -> tuple[Path, Path]:
    """The fake agent behind a program of its own that writes a line to a log at each start."""
    log = folder / "starts.log"
    program = folder / "counting-agent"
    program.write_text(f"#!/bin/sh\necho started >> {log}\nexec {sys.executable} {FAKE_AGENT} normal\n")
    program.chmod(0o755)
    return program, log


def starts(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_malformed_initialize_is_one_line_naming_the_key_and_the_others_are_listed(tmp_path: Path):
    script = tmp_path / "malformed.py"
    script.write_text(MALFORMED)
    config = agent_file(tmp_path / "tether.toml", {"broken": [sys.executable, str(script)],
                                                   "fake": fake_agent("normal")})
    shown = cli_here("agents", env=environment(tmp_path, config))
    assert shown.returncode == 0, shown.stderr
    said = [line for line in shown.stdout.splitlines() if "protocolVersion" in line]
    assert len(said) == 1, shown.stdout
    assert said[0].strip().startswith(f"{config}: agents.broken.acp: ")
    assert said[0].endswith("is not an ACP agent: its answer to initialize is malformed: protocolVersion is missing")
    assert "validation error" not in shown.stdout + shown.stderr and "pydantic" not in shown.stdout + shown.stderr
    assert "fake-agent 1.0.0; auth: none" in shown.stdout, "the healthy agent is still listed"

    rows = {r["name"]: r for r in json.loads(cli_here("agents", "--json", env=environment(tmp_path, config)).stdout)}
    assert rows["broken"]["acp"]["error"] == said[0].strip()
    assert rows["fake"]["acp"]["agent"] == "fake-agent"


def test_whatever_asking_one_agent_raises_the_others_are_listed(tmp_path: Path, monkeypatch):
    """An agent is another program: a failure Tether did not foresee in asking one is that
    agent's line, not the end of the listing."""
    import tether.acp.probe_cache as probe_cache

    asked = probe_cache.probe

    async def probe(command, env=None, **kw):
        if "odd" in command:
            raise RuntimeError("something nobody foresaw\nsecond line")
        return await asked(command, env, **kw)

    monkeypatch.setattr(probe_cache, "probe", probe)
    config = agent_file(tmp_path / "tether.toml", {"odd": [*fake_agent("normal"), "odd"], "fake": fake_agent("normal")})
    shown = cli_here("agents", env=environment(tmp_path, config))
    assert shown.returncode == 0, shown.stderr
    assert (f"  {config}: agents.odd.acp: asking it failed: RuntimeError: something nobody foresaw⏎ second line\n"
            in shown.stdout), shown.stdout
    assert "fake-agent 1.0.0" in shown.stdout


def test_a_second_listing_starts_no_agent_until_its_program_changes(tmp_path: Path, monkeypatch):
    program, log = counting_agent(tmp_path)
    monkeypatch.setenv("TETHER_TEST_PROBE_KEY", "sk-probe-secret-42")
    config = agent_file(tmp_path / "tether.toml", {"counted": [str(program)]},
                        env={"AGENT_KEY": "${TETHER_TEST_PROBE_KEY}"})
    env = environment(tmp_path, config)

    def listed(*extra: str) -> dict:
        shown = cli_here("agents", "--json", *extra, env=env)
        assert shown.returncode == 0, shown.stderr
        return {r["name"]: r for r in json.loads(shown.stdout)}["counted"]["acp"]

    first = listed()
    assert (first["agent"], first["cached"], starts(log)) == ("fake-agent", False, 1)
    second = listed()
    assert (second["agent"], second["cached"], starts(log)) == ("fake-agent", True, 1), "asked again"
    assert "1 of 1 ACP agents answered from an earlier listing" in cli_here("agents", env=env).stdout
    assert starts(log) == 1

    program.write_text(program.read_text() + "# upgraded\n")  # the agent's program changed
    assert listed()["cached"] is False and starts(log) == 2
    assert listed()["cached"] is True and starts(log) == 2
    assert listed("--refresh")["cached"] is False and starts(log) == 3
    agent_file(config, {"counted": [str(program)]}, env={"AGENT_KEY": "${TETHER_TEST_PROBE_KEY}", "MORE": "1"})
    assert listed()["cached"] is False and starts(log) == 4, "another environment is another key"

    kept = b"".join(p.read_bytes() for p in (tmp_path / "home").rglob("*") if p.is_file())
    assert kept and b"fake-agent" in kept
    assert b"sk-probe-secret-42" not in kept


async def test_an_agent_that_does_not_answer_holds_up_no_other_and_ctrl_c_ends_it(tmp_path: Path):
    silent = tmp_path / "silent.py"
    silent.write_text(SILENT)
    pids = tmp_path / "silent.pids"
    config = agent_file(tmp_path / "tether.toml", {"silent": [sys.executable, str(silent), str(pids)],
                                                   "fake": fake_agent("normal")})
    # faulthandler: a tether agents that outlives its Ctrl+C is made to say where it is (SIGABRT, below)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tether.tui.cli", "agents", "--timeout", "600",
        env={**environment(tmp_path, config), "PYTHONFAULTHANDLER": "1"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        seen: list[str] = []
        while not any("fake-agent 1.0.0" in line for line in seen):
            line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
            assert line, f"tether agents ended before the healthy agent was listed: {seen}"
            seen.append(line)
        assert not any(line.startswith("silent ") for line in seen), "the silent agent is listed after"
        while not pids.exists():  # the silent agent was started beside the other
            assert proc.returncode is None
            await asyncio.sleep(0.05)
        agent, child = map(int, pids.read_text().split())
        assert running(agent) and running(child), "the healthy agent was listed while the silent one was asked"
        proc.send_signal(signal.SIGINT)
        ended = asyncio.ensure_future(proc.wait())
        done, _ = await asyncio.wait({ended}, timeout=60)
        if not done and proc.returncode is not None:  # asyncio's wait also waits for its pipes to close
            pytest.fail(f"tether agents exited {proc.returncode} after its Ctrl+C, but a process it left "
                        f"holds its output open (agent {agent} running: {running(agent)}, child {child}: {running(child)})")
        if not done:
            proc.send_signal(signal.SIGABRT)  # its threads' stacks, on its stderr
            where = (await asyncio.wait_for(proc.stderr.read(), 30)).decode("utf-8", "replace")
            pytest.fail(f"tether agents did not end within 60 s of its Ctrl+C; it was at:\n{where[-6000:]}")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130
    assert not running(agent) and not running(child), "Ctrl+C left the agent's processes behind"


def test_an_agent_that_does_not_answer_is_said_so_after_the_timeout_and_ended(tmp_path: Path):
    silent = tmp_path / "silent.py"
    silent.write_text(SILENT)
    pids = tmp_path / "silent.pids"
    # The healthy agent's answer is kept first (by a file of its own: the key is its command),
    # so that the short timeout below binds the silent agent alone, however loaded the host.
    alone = agent_file(tmp_path / "alone.toml", {"fake": fake_agent("normal")})
    assert cli_here("agents", env=environment(tmp_path, alone)).returncode == 0
    config = agent_file(tmp_path / "tether.toml", {"silent": [sys.executable, str(silent), str(pids)],
                                                   "fake": fake_agent("normal")})
    shown = subprocess.run([sys.executable, "-m", "tether.tui.cli", "agents", "--timeout", "2"],
                           env=environment(tmp_path, config), capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    said = [line.strip() for line in shown.stdout.splitlines() if "agents.silent.acp" in line]
    assert len(said) == 1 and said[0].startswith(f"{config}: agents.silent.acp: `{sys.executable} "), shown.stdout
    assert said[0].endswith("did not answer initialize within 2 s: is it an ACP agent?")
    assert "fake-agent 1.0.0" in shown.stdout and "1 of 2 ACP agents answered from an earlier listing" in shown.stdout
    agent, child = map(int, pids.read_text().split())
    assert not running(agent) and not running(child), "the agent that did not answer was left running"
    # Nothing is kept of an agent that did not answer: the next listing asks it again.
    kept = [json.loads(p.read_text())["info"]["name"] for p in (tmp_path / "home" / "cache" / "acp").glob("*.json")]
    assert kept == ["fake-agent"]


def test_each_agent_says_whether_its_sandbox_works(tmp_path: Path):
    """A sandboxed agent is asked inside its sandbox: one that cannot start there (it writes its
    state outside the folders it may write) says so, naming the sandbox; one that starts says the
    sandbox works; an agent without one says it has none."""
    outside = tmp_path / "state-outside"
    outside.mkdir()
    stateful = tmp_path / "stateful-agent"  # writes a lock file outside its folders before it speaks
    stateful.write_text(f"#!/bin/sh\necho lock > {outside}/agent.lock || exit 3\n"
                        f"exec {sys.executable} {FAKE_AGENT} normal\n")
    stateful.chmod(0o755)
    config = tmp_path / "tether.toml"
    config.write_text("\n".join([
        "[agents.boxed]", f"acp = {json.dumps(fake_agent('normal'))}", 'sandbox = "workspace"', "",
        "[agents.stateful]", f"acp = {json.dumps([str(stateful)])}", 'sandbox = "workspace"', "",
        "[agents.open]", f"acp = {json.dumps(fake_agent('normal'))}", "",
    ]))
    shown = cli_here("agents", env=environment(tmp_path, config))
    assert shown.returncode == 0, shown.stderr

    def under(name: str) -> str:
        return under_of(shown.stdout, name)

    assert "sandbox: bubblewrap, works here: it started in it" in under("boxed"), shown.stdout
    assert "sandbox: none" in under("open")
    assert "agents.stateful.acp (in its bubblewrap sandbox): " in under("stateful"), shown.stdout
    assert not (outside / "agent.lock").exists()
    # Outside a sandbox the same program starts: what failed was the sandbox, and it is kept apart.
    config.write_text(config.read_text().replace(f'acp = {json.dumps([str(stateful)])}\nsandbox = "workspace"',
                                                 f'acp = {json.dumps([str(stateful)])}'))
    again = cli_here("agents", env=environment(tmp_path, config))
    assert "fake-agent 1.0.0" in under_of(again.stdout, "stateful")


def under_of(stdout: str, name: str) -> str:
    """The indented lines ``tether agents`` printed under the agent ``name``."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}  "))
    rest = lines[start + 1:]
    return "\n".join(rest[:next((i for i, line in enumerate(rest) if not line.startswith(" ")), len(rest))])
