"""A Claude Code session's folder as its run's workspace (kind ``none``; docs/workspaces.md,
"Every source of runs"): ``tether diff`` and ``tether runs`` show what the session changed
in its git repository since its start, not what was uncommitted before it; nothing is made,
and nothing is discarded. Against the stand-in for Claude Code, on both stores."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from tether.store.protocol import Store
from tests.integrations.test_claude_code_hooks import RUN_ID, Claude, where  # noqa: F401 (where: a fixture)
from tests.support import git

CAP_S = 120.0


async def tether_cli(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", *args, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), CAP_S)
    return proc.returncode or 0, out.decode()


async def test_the_sessions_changes_in_its_repository_show_in_tether_diff(where: tuple[Store, str],
                                                                          tmp_path: Path) -> None:
    store, name = where
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("one\n")
    (repo / "old.txt").write_text("old\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    (repo / "wip.txt").write_text("the user's, before the session\n")  # not the session's change
    index = (repo / ".git" / "index").read_bytes()
    env = {**os.environ, "TETHER_STORE": name, "TETHER_HOME": str(tmp_path / "home")}
    if str(Path.cwd()) not in env.get("PYTHONPATH", ""):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path.cwd()), env.get("PYTHONPATH")) if p)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.integrations.fake_claude",
                                                "--deadline", "60", env=env, cwd=repo,
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                start_new_session=True)
    try:
        claude = Claude(proc, repo)
        await claude.hook("SessionStart", source="startup")
        assert (await claude.answer())["code"] == 0
        ws = store.load(RUN_ID).run_workspace
        assert ws is not None and ws.kind == "none" and ws.path == str(repo.resolve()) and ws.branch is None
        # What Claude Code's Write and Bash tools do: files changed in its folder.
        (repo / "notes.txt").write_text("one\ntwo\n")
        (repo / "new.txt").write_text("new\n")
        (repo / "old.txt").unlink()
        await claude.hook("PostToolUse", tool_name="Write", tool_input={"file_path": str(repo / "new.txt")},
                          tool_use_id="t1", tool_response={"success": True})
        assert (await claude.answer())["code"] == 0
        await claude.hook("Stop")
        assert (await claude.answer())["code"] == 0

        code, stat = await tether_cli(env, "diff", RUN_ID, "--stat")
        assert code == 0, stat
        assert "notes.txt" in stat and "new.txt" in stat and "old.txt" in stat, stat
        assert "wip.txt" not in stat, "what was uncommitted before the session is not its change"
        code, shown = await tether_cli(env, "diff", RUN_ID, "notes.txt")
        assert code == 0 and "+two" in shown, shown
        code, shown = await tether_cli(env, "show", RUN_ID)
        assert f"workspace: its session's own folder {repo.resolve()}" in shown, shown
        code, listed = await tether_cli(env, "runs")
        line = next(x for x in listed.splitlines() if x.startswith(RUN_ID))
        assert "+2 \u22121 in 3 files" in line, listed
        await claude.hook("SessionEnd", reason="exit")
        assert (await claude.answer())["code"] == 0
        for _ in range(int(CAP_S / 0.05)):  # its hook ends the run from a detached process
            owner = store.owner(RUN_ID)
            if store.load(RUN_ID).status.value == "completed" and (owner is None or not owner.alive):
                break
            await asyncio.sleep(0.05)
        code, said = await tether_cli(env, "discard", RUN_ID, "--yes")
        assert code != 0 and "removes nothing" in said, said
        code, listing = await tether_cli(env, "workspaces")
        assert RUN_ID not in listing, listing
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
    assert (repo / "notes.txt").read_text() == "one\ntwo\n" and (repo / "new.txt").exists()
    assert (repo / ".git" / "index").read_bytes() == index, "the user's index is untouched"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
