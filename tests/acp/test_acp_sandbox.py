"""The OS sandbox (tether.agents.sandbox): an agent that does its own file I/O writes only its
workspace, its state folders and a private temp folder, under bubblewrap and under Landlock.

The fake agent's ``escape`` mode writes with its own file I/O, as OpenCode, Claude and Codex do,
so Tether's ``fs/*`` guard never sees the write: only the sandbox can stop it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tether.acp import AcpSession
from tether.acp.events import TextChunk
from tether.agents import sandbox
from tether.agents.sandbox import BACKENDS, Sandbox, SandboxUnavailable

from tests.acp.conftest import fake_agent
from tests.acp.procs import alive_in

REFUSED = {"bubblewrap": "Read-only file system", "landlock": "Permission denied"}


def _text(seen: list) -> str:
    return "".join(e.text for e in seen if isinstance(e, TextChunk))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.mark.parametrize("wanted", BACKENDS)
def test_both_backends_work_on_this_machine(wanted: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI installs bubblewrap, and the kernel offers Landlock: neither may be skipped silently."""
    monkeypatch.setenv(sandbox.BACKEND_ENV, wanted)
    assert sandbox.available_backend() == wanted


async def test_an_agent_writing_by_itself_is_kept_in_its_folders(backend: str, tmp_path: Path,
                                                                  fake_env: dict) -> None:
    workspace, home, outside = tmp_path / "ws", tmp_path / "agent-home", tmp_path / "elsewhere"
    workspace.mkdir()
    outside.mkdir()
    env = {**fake_env, "HOME": str(home)}
    box = sandbox.for_agent(workspace, env, backend=backend)  # type: ignore[arg-type]
    seen: list = []
    targets = [outside / "outside.txt", home / "state.txt", Path("/etc/tether-escape.txt")]
    async with AcpSession(fake_agent("escape"), workspace=workspace, env=env, on_event=seen.append,
                          sandbox=box) as session:
        await session.new_session()
        await session.prompt("ESCAPE " + " ".join(map(str, targets)))
    said = _text(seen)
    assert f"refused {outside / 'outside.txt'}: {REFUSED[backend]}" in said
    assert f"refused /etc/tether-escape.txt: {REFUSED[backend]}" in said
    assert not (outside / "outside.txt").exists() and not Path("/etc/tether-escape.txt").exists()
    # What it may write: its workspace, the HOME its env names, its private TMPDIR.
    assert (workspace / "inside.txt").read_text() == "written by the agent itself\n"
    assert (home / "state.txt").exists()
    assert f"wrote {box.tmp / 'scratch.txt'}" in said
    assert not box.tmp.exists()  # the private temp folder went with the session
    assert not alive_in(workspace)


def test_the_launcher_keeps_a_shell_and_its_children_inside(backend: str, tmp_path: Path) -> None:
    """An MCP server (and anything it starts) runs under the same launcher options."""
    workspace, outside = tmp_path / "ws", tmp_path / "out"
    workspace.mkdir()
    outside.mkdir()
    box = Sandbox(backend, (workspace,), workspace)  # type: ignore[arg-type]
    script = f"echo in > {workspace}/a && (sh -c 'echo out > {outside}/b') ; echo done"
    done = subprocess.run([sys.executable, "-m", "tether.agents.mcp_launcher", *box.options(), "--",
                           "sh", "-c", script], cwd=workspace, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "done"
    assert REFUSED[backend] in done.stderr
    assert (workspace / "a").exists() and not (outside / "b").exists()


def test_no_sandbox_here_is_refused_in_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.BACKEND_ENV, "chroot")
    with pytest.raises(SandboxUnavailable, match="TETHER_SANDBOX_BACKEND='chroot' is not a sandbox"):
        sandbox.available_backend()


def _agent_file(tmp_path: Path, fake_env: dict, extra: str = "") -> Path:
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    config = tmp_path / "tether.toml"
    env = {**fake_env, "HOME": str(tmp_path / "agent-home")}
    config.write_text(textwrap.dedent(f"""
        [agents.escaper]
        acp = {json.dumps(fake_agent("escape"))}
        workspace = "./repo"
        env = {{ {", ".join(f'{k} = {json.dumps(v)}' for k, v in env.items())} }}
        {extra}
    """))
    return config


def _tether(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "TETHER_HOME": str(tmp_path / "home"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "tether.tui.cli", *args], capture_output=True, text=True,
                          env=full, cwd=tmp_path, timeout=120)


def test_a_sandboxed_run_is_refused_where_no_sandbox_works(tmp_path: Path, fake_env: dict) -> None:
    """A run never goes on silently unsandboxed: with bubblewrap asked for and no bwrap on PATH,
    the agent file is refused at load time, naming the key, and no run is made."""
    config = _agent_file(tmp_path, fake_env, 'sandbox = "workspace"')
    bin_dir = tmp_path / "bin"  # a PATH with a python but no bwrap
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    done = _tether(tmp_path, "run", "--agent", "escaper", "--config", str(config), "--prompt", "hi",
                   env={"PATH": str(bin_dir), sandbox.BACKEND_ENV: "bubblewrap"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "agents.escaper.sandbox" in done.stderr
    assert "bubblewrap (bwrap) is not installed" in done.stderr
    assert _tether(tmp_path, "runs", "--json").stdout.strip() in ("", "[]")


@pytest.mark.parametrize("how", ["agent file", "--sandbox"])
def test_a_sandboxed_acp_run_records_its_sandbox_and_writes_nothing_outside(how: str, tmp_path: Path,
                                                                            fake_env: dict) -> None:
    config = _agent_file(tmp_path, fake_env, 'sandbox = "workspace"' if how == "agent file" else "")
    outside = tmp_path / "outside.txt"
    flags = ["--sandbox"] if how == "--sandbox" else []
    done = _tether(tmp_path, "run", "--agent", "escaper", "--config", str(config), *flags, "--json",
                   "--prompt", f"ESCAPE {outside}")
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    assert not outside.exists()
    assert (tmp_path / "repo" / "inside.txt").exists()
    trace = [json.loads(line) for line in
             (tmp_path / "home" / "runs" / run_id / "trace.jsonl").read_text().splitlines()]
    session = next(r for r in trace if r["kind"] == "agent_session")
    assert session["sandbox"]["backend"] in BACKENDS
    assert str(tmp_path / "repo") in session["sandbox"]["writable"]
    shown = _tether(tmp_path, "show", run_id).stdout
    assert "refused " + str(outside) in shown
    assert "sandbox:" in shown and str(tmp_path / "repo") in shown


async def test_a_sandboxed_agents_mcp_server_writes_only_its_workspace(backend: str, tmp_path: Path) -> None:
    from tether.agents.mcp.catalog import mcp_tools
    from tether.agents.mcp.server import MCPServer
    from tether.agents.tools.base import ToolContext
    from tether.vocab.cancel import CancelSignal
    from tests.support import SERVERS

    workspace, outside = tmp_path / "ws", tmp_path / "out"
    workspace.mkdir()
    outside.mkdir()
    box = sandbox.for_agent(workspace, backend=backend)  # type: ignore[arg-type]
    server = MCPServer("writer", command=sys.executable, args=(str(SERVERS), "writer"))
    ctx = ToolContext(run_id="run-1", call_id="c1", signal=CancelSignal(), progress=lambda _: None,
                      workspace=None, ledger=None)  # type: ignore[arg-type]
    async with mcp_tools([server], stderr_dir=tmp_path / "logs", sandbox=box) as tools:
        write = next(t for t in tools if t.name == "write")
        inside = await write.run({"path": str(workspace / "a.txt"), "text": "x"}, ctx)
        escaped = await write.run({"path": str(outside / "b.txt"), "text": "x"}, ctx)
    assert inside == f"wrote {workspace / 'a.txt'}"
    assert escaped == f"refused {outside / 'b.txt'}: {REFUSED[backend]}"
    assert not (outside / "b.txt").exists()
    assert not box.tmp.exists()


def test_a_sandboxed_agent_that_writes_a_refused_file_itself_is_kept_out_and_show_says_so(tmp_path: Path,
                                                                                        fake_env: dict) -> None:
    """The audit's escape with the fake agent (it writes itself after Tether's refusal, as
    OpenCode does): sandboxed, nothing is written, and the transcript says why."""
    from tests.acp.fake_agent import ESCAPE_PATH

    config = _agent_file(tmp_path, fake_env, 'sandbox = "workspace"').read_text()
    (tmp_path / "tether.toml").write_text(config.replace(json.dumps(fake_agent("escape")),
                                                         json.dumps(fake_agent("write-itself"))))
    done = _tether(tmp_path, "run", "--agent", "escaper", "--config", str(tmp_path / "tether.toml"), "--json",
                   "--prompt", "write it")
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    escaped = os.path.normpath(tmp_path / "repo" / ESCAPE_PATH)
    assert not os.path.exists(escaped)
    shown = _tether(tmp_path, "show", run_id).stdout
    assert (f"[warning] Tether refused the write of {escaped}, outside the workspace, and the agent's "
            f"{sandbox.available_backend()} sandbox kept it from writing the file itself") in shown, shown
