"""``tether run --isolate``, ``diff``, ``runs``, ``workspaces`` and ``discard`` on real git
repositories, and a crash at each step of making and discarding a workspace: the next command
finishes it or says so (docs/workspaces.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tether.agents.agent import Agent, Isolation
from tether.harness import Harness
from tether.vocab.state import Policies
from tether.store.files.store import RunStore
from tests.campaign.shim import CRASH_EXIT_CODE
from tests.support import Scripted, cli_here, cli_here_async, crashing, git, home  # noqa: F401 (home: a fixture)

if TYPE_CHECKING:
    from tether.store.postgres.store import PgStore

RUN = "w"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The demo's files, committed: the destructive scenario deletes access.log."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for name, text in (("access.log", "GET /\n"), ("errors.log", "worker 7 timed out\n"), ("notes.txt", "notes\n")):
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    return repo


def where(home: Path) -> list[str]:
    return ["--runs-dir", str(home / "runs")]


def isolated(repo: Path, home: Path) -> list[str]:
    """``tether run`` of the destructive scenario in a worktree of ``repo``, its deletion approved."""
    return ["run", "destructive", "--run-id", RUN, "--workspace", str(repo), "--isolate", "worktree",
            "--auto-approve", "delete_file", *where(home)]


def workspace_of(home: Path) -> Path:
    return (home / "workspaces" / RUN).resolve()


def test_a_run_with_isolate_worktree_shows_its_changes_in_runs_diff_and_workspaces(home: Path, repo: Path) -> None:
    status = git(repo, "status", "--porcelain")
    done = cli_here(*isolated(repo, home))
    assert done.returncode == 0, done.stderr
    assert (repo / "access.log").exists() and not (workspace_of(home) / "access.log").exists()
    assert git(repo, "status", "--porcelain") == status and git(repo, "symbolic-ref", "HEAD") == "refs/heads/main\n"

    listed = cli_here("runs", *where(home))
    assert "+0 \u22121 in 1 file" in listed.stdout.splitlines()[0]
    row = json.loads(cli_here("runs", "--json", *where(home)).stdout)[0]["workspace"]
    assert row["kind"] == "worktree" and row["path"] == str(workspace_of(home)) and row["stage"] == "ready"
    assert json.loads(cli_here("show", RUN, "--json", *where(home)).stdout)["workspace"]["branch"] == f"tether/{RUN}"
    stat = cli_here("diff", RUN, "--stat", *where(home))
    assert stat.stdout.splitlines() == ["deleted  +0 \u22121  access.log", "+0 \u22121 in 1 file"]
    whole = cli_here("diff", RUN, *where(home))
    assert whole.stdout.startswith("diff --git a/access.log b/access.log\ndeleted file mode 100644")
    assert "-GET /" in whole.stdout
    one = json.loads(cli_here("diff", RUN, "notes.txt", "--json", *where(home)).stdout)
    assert one["files"] == [] and one["diff"] == "" and one["workspace"]["branch"] == f"tether/{RUN}"

    survey = json.loads(cli_here("workspaces", "--json", *where(home)).stdout)
    row, = survey["workspaces"]
    assert row["run_id"] == RUN and row["status"] == "completed" and row["stage"] == "ready"
    assert row["size"] > 0 and row["age_s"] >= 0 and row["problem"] is None
    assert {k: row["changes"][k] for k in ("files", "added", "deleted")} == {"files": 1, "added": 0, "deleted": 1}
    assert survey["strays"] == []
    text = cli_here("workspaces", *where(home)).stdout
    assert text.startswith(f"{RUN} ") and "+0 \u22121 in 1 file" in text and f"(branch tether/{RUN})" in text


def test_worktrees_and_folders_no_run_owns_are_reported_and_so_is_a_workspace_gone(home: Path, repo: Path) -> None:
    assert cli_here(*isolated(repo, home)).returncode == 0
    git(repo, "worktree", "add", "-q", "-b", "tether/ghost", str(home / "workspaces" / "ghost"))
    git(repo, "branch", "tether/left-over")
    (home / "workspaces" / "junk").mkdir()
    survey = json.loads(cli_here("workspaces", "--json", *where(home)).stdout)
    strays = {(s["what"], s["branch"] or s["path"]) for s in survey["strays"]}
    assert strays == {("worktree", "tether/ghost"), ("branch", "tether/left-over"),
                      ("folder", str(home / "workspaces" / "junk"))}
    ghost = next(s for s in survey["strays"] if s["what"] == "worktree")
    assert f"worktree remove --force {home / 'workspaces' / 'ghost'}" in ghost["words"]
    assert survey["workspaces"][0]["problem"] is None

    gitdir = (workspace_of(home) / ".git").read_text().split("gitdir:")[1].strip()
    subprocess.run(["rm", "-rf", gitdir], check=True)  # git forgets the worktree; its folder stays
    row, = json.loads(cli_here("workspaces", "--json", *where(home)).stdout)["workspaces"]
    assert row["problem"] == (f"git does not know {workspace_of(home)} as a worktree any more; tether discard {RUN} "
                              "removes what is left")

    subprocess.run(["rm", "-rf", str(workspace_of(home))], check=True)  # removed by hand, outside Tether
    row, = json.loads(cli_here("workspaces", "--json", *where(home)).stdout)["workspaces"]
    assert row["problem"] == f"its folder is gone: tether discard {RUN} forgets it"
    refused = cli_here("resume", RUN, "--message", "more", *where(home))
    assert refused.returncode == 2 and f"its workspace {workspace_of(home)} is gone" in refused.stderr


def test_discard_asks_first_then_removes_the_workspace_and_branch_and_keeps_the_transcript(
        home: Path, repo: Path) -> None:
    assert cli_here(*isolated(repo, home)).returncode == 0
    kept = cli_here("discard", RUN, *where(home), stdin="n\n")
    assert kept.returncode == 1 and "Remove" in kept.stderr and "nothing was removed" in kept.stderr
    assert workspace_of(home).is_dir()
    unasked = cli_here("discard", RUN, *where(home), stdin="")
    assert unasked.returncode == 2 and "give --yes" in unasked.stderr and workspace_of(home).is_dir()

    done = cli_here("discard", RUN, "--yes", *where(home))
    assert done.returncode == 0, done.stderr
    assert f"removed {workspace_of(home)} and the branch tether/{RUN}; its transcript stays" in done.stdout
    assert not workspace_of(home).exists() and git(repo, "branch", "--list", "tether/*") == ""
    assert "tether/" not in git(repo, "worktree", "list")
    assert not (home / "workspaces" / ".tether" / RUN).exists()
    shown = cli_here("show", RUN, *where(home))
    assert "Deleted access.log" in shown.stdout and "(discarded)" in shown.stdout
    assert "(workspace discarded)" in cli_here("runs", *where(home)).stdout
    assert any(r["kind"] == "workspace_discarded" for r in RunStore(home / "runs").read_trace(RUN))
    for refused in (cli_here("resume", RUN, "--message", "more", *where(home)), cli_here("diff", RUN, *where(home))):
        assert refused.returncode == 2 and "its workspace was discarded" in refused.stderr
    again = cli_here("discard", RUN, "--yes", *where(home))
    assert again.returncode == 0 and "discarded already" in again.stdout


def test_discard_refuses_a_live_run_and_a_run_without_a_workspace_in_words(home: Path, repo: Path) -> None:
    assert cli_here(*isolated(repo, home)).returncode == 0
    store = RunStore(home / "runs")
    _, handle = store.open(RUN)  # this process runs it now
    try:
        live = cli_here("discard", RUN, "--yes", *where(home))
    finally:
        handle.release()
    assert live.returncode == 2 and f"run {RUN} is running (" in live.stderr
    assert f"stop it first (tether stop {RUN}), then discard its workspace; nothing was removed" in live.stderr
    assert workspace_of(home).is_dir()
    assert cli_here("run", "plan", "--run-id", "plain", "--workspace", str(repo), *where(home)).returncode == 0
    none = cli_here("discard", "plain", "--yes", *where(home))
    assert none.returncode == 2 and "run plain has no workspace of its own: nothing to discard" in none.stderr


# ---- crashes: the next command finishes or says so -----------------------------------------------

@pytest.mark.parametrize("at", ["workspace_creating:1", "workspace_made:1"])
def test_a_crash_while_the_workspace_is_made_is_finished_by_the_next_resume(home: Path, repo: Path, at: str) -> None:
    crashed = crashing(at, *isolated(repo, home))
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    row, = json.loads(cli_here("workspaces", "--json", *where(home)).stdout)["workspaces"]
    assert row["stage"] == "creating"
    assert row["problem"] == f"its making was cut short: tether resume {RUN} makes it again"
    resumed = cli_here("resume", RUN, *where(home))
    assert resumed.returncode == 0, resumed.stderr
    assert not (workspace_of(home) / "access.log").exists() and (workspace_of(home) / "notes.txt").exists()
    assert git(repo, "worktree", "list").count("tether/") == 1 and git(repo, "status", "--porcelain") == ""
    survey = json.loads(cli_here("workspaces", "--json", *where(home)).stdout)
    assert survey["strays"] == [] and survey["workspaces"][0]["stage"] == "ready"


def test_a_run_killed_mid_run_goes_on_in_its_own_worktree_when_resumed(home: Path, repo: Path) -> None:
    """Killed (no cleanup) just before its deletion: the next process adopts the run and goes on in
    the worktree it had, not a second one, and the repository is untouched."""
    crashed = crashing("before_tool:2", *isolated(repo, home))
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    assert (workspace_of(home) / "access.log").exists()  # the deletion had not happened
    before = json.loads(cli_here("show", RUN, "--json", *where(home)).stdout)["workspace"]
    resumed = cli_here("resume", RUN, *where(home))
    assert resumed.returncode == 0, resumed.stderr
    after = json.loads(cli_here("show", RUN, "--json", *where(home)).stdout)
    assert after["status"] == "completed"
    assert {k: after["workspace"][k] for k in ("path", "branch", "made_at")} == \
        {k: before[k] for k in ("path", "branch", "made_at")}
    assert not (workspace_of(home) / "access.log").exists() and (repo / "access.log").exists()
    assert git(repo, "worktree", "list").count("tether/") == 1 and git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("at", ["workspace_discarding:1", "workspace_removed:1"])
def test_a_crash_while_discarding_is_finished_by_the_next_discard(home: Path, repo: Path, at: str) -> None:
    assert cli_here(*isolated(repo, home)).returncode == 0
    crashed = crashing(at, "discard", RUN, "--yes", *where(home))
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    row, = json.loads(cli_here("workspaces", "--json", *where(home)).stdout)["workspaces"]
    assert row["problem"] == f"its discard was cut short: tether discard {RUN} finishes it"
    refused = cli_here("resume", RUN, "--message", "more", *where(home))
    assert refused.returncode == 2 and f"tether discard {RUN} finishes it" in refused.stderr
    done = cli_here("discard", RUN, "--yes", *where(home))
    assert done.returncode == 0, done.stderr
    assert not workspace_of(home).exists() and git(repo, "branch", "--list", "tether/*") == ""
    assert json.loads(cli_here("workspaces", "--json", *where(home)).stdout)["strays"] == []


def test_an_agent_files_isolation_and_setup_through_the_cli(home: Path, repo: Path, tmp_path: Path) -> None:
    config = tmp_path / "tether.toml"
    config.write_text(f'[agents.coder]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nworkspace = "{repo}"\n'
                      'tools = ["tether:read_file"]\nisolation = "worktree"\nbase = "main"\n'
                      'setup = ["echo installing; echo no such target >&2; exit 4"]\nchecks = ["true"]\n')
    listed = cli_here("agents", "--config", str(config))
    assert "each run in a worktree of its own on tether/RUN_ID, from main; setup: echo installing; echo no " \
           "such target >&2; exit 4; checks: true" in listed.stdout
    done = cli_here("run", "--agent", "coder", "--prompt", "go", "--run-id", RUN, "--config", str(config),
                    *where(home))
    assert done.returncode == 1
    assert "the setup command 'echo installing; echo no such target >&2; exit 4' exited with 4: no such target" \
        in done.stdout
    assert f"The workspace is kept at {workspace_of(home)} for a look" in done.stdout
    shown = cli_here("show", RUN, *where(home)).stdout
    assert "(exit 4," in shown and "  | installing\n  | no such target\n" in shown
    assert f"on tether/{RUN} from {git(repo, 'rev-parse', 'main')[:12]}" in shown and "(made)" in shown
    assert (workspace_of(home) / "notes.txt").exists()


def test_run_isolate_copy_of_the_demo_folder(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    done = cli_here("run", "destructive", "--run-id", RUN, "--workspace", str(folder), "--isolate", "copy",
                    "--auto-approve", "delete_file", *where(home))
    assert done.returncode == 0, done.stderr
    assert (folder / "access.log").exists() and not (workspace_of(home) / "access.log").exists()
    assert cli_here("diff", RUN, "--stat", *where(home)).stdout.splitlines()[0].startswith("deleted  +0 \u2212")


async def test_the_postgresql_store_keeps_a_runs_workspace_and_what_it_changed(
        home: Path, repo: Path, pg: PgStore, pg_url: str) -> None:
    agent = Agent(name="coder", model="m", tools=["tether:write_file"], workspace=repo,
                  policies=Policies(auto_approve=["write_file"]), isolation=Isolation("worktree"))
    model = Scripted([("write_file", {"path": "notes.txt", "content": "notes\nmore\n"})], "done")
    async with Harness(store=pg, client=model, workspaces_dir=home / "workspaces") as h:
        out = await h.start(agent, "edit", run_id=RUN)
    assert pg.load(RUN).run_workspace == out.state.run_workspace
    summary, = pg.summaries()
    assert summary.workspace is not None and summary.workspace["branch"] == f"tether/{RUN}"
    assert {k: summary.workspace["changes"][k] for k in ("files", "added", "deleted")} == \
        {"files": 1, "added": 1, "deleted": 0}
    listed = await cli_here_async("runs", "--store", pg_url)
    assert "+1 \u22120 in 1 file" in listed.stdout
    stat = await cli_here_async("diff", RUN, "--stat", "--store", pg_url)
    assert stat.stdout.splitlines() == ["changed  +1 \u22120  notes.txt", "+1 \u22120 in 1 file"]
