"""``tether rewind RUN --to N`` and ``--undo`` on both stores, with real git worktrees: a
shell-made change rewound and brought back, the transcript cut and put back, a resume that
goes on from the checkpoint, a live run refused, and a crash at each point of a rewind
finished by the next command (docs/checkpoints.md)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tether.agents.agent import Agent, Isolation
from tether.harness import Harness
from tether.vocab.state import Policies, Status
from tether.store.files.store import RunStore
from tests.campaign.shim import CRASH_EXIT_CODE
from tests.support import Scripted, cli_here, cli_here_async, crashing, git, home  # noqa: F401 (home: a fixture)

RUN = "r"
TOOLS = ["tether:read_file", "tether:write_file", "tether:delete_file"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("v0\n")
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    return repo


@pytest.fixture(params=["files", "postgres"])
def place(request: pytest.FixtureRequest, home: Path) -> tuple[Any, list[str]]:
    """The store, and the CLI's option naming it."""
    if request.param == "files":
        return RunStore(home / "runs"), ["--runs-dir", str(home / "runs")]
    pg = request.getfixturevalue("pg")
    return pg, ["--store", request.getfixturevalue("pg_url")]


def coder(repo: Path) -> Agent:
    return Agent(name="coder", model="m", tools=TOOLS, workspace=repo, isolation=Isolation("worktree"),
                 policies=Policies(auto_approve=["write_file", "delete_file"]))


def script(*more: Any) -> Scripted:
    return Scripted([("write_file", {"path": "notes.txt", "content": "v1\n"})],
                    [("write_file", {"path": "new.txt", "content": "new\n"})], "done", *more)


def tree(home: Path) -> Path:
    return (home / "workspaces" / RUN).resolve()


def files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.is_file() and p.name != ".git"}


async def test_a_shell_made_change_is_rewound_and_brought_back_by_undo_and_a_resume_goes_on_from_n(
        home: Path, repo: Path, place: tuple[Any, list[str]]) -> None:
    store, where = place
    model = script("again")
    async with Harness(store=store, client=model, workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo), "edit", run_id=RUN)
        assert out.state.status is Status.COMPLETED, out.state.error
        full = out.state.messages
        cps = json.loads((await cli_here_async("checkpoints", RUN, "--json", *where)).stdout)["checkpoints"]
        assert [c["step"] for c in cps] == [1, 2]
        # What a shell command does behind the tools' back: Tether takes it back all the same.
        subprocess.run(["sh", "-c", "echo by a shell > made.txt; rm notes.txt; echo kept > build.log"],
                       cwd=tree(home), check=True)
        before = files(tree(home))
        users = git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")

        done = await cli_here_async("rewind", RUN, "--to", "1", *where)
        assert done.returncode == 0, done.stderr
        assert f"run {RUN} rewound to checkpoint 1" in done.stdout and f"tether rewind {RUN} --undo" in done.stdout
        assert files(tree(home)) == {".gitignore": "*.log\n", "build.log": "kept\n", "notes.txt": "v1\n"}
        state = store.load(RUN)
        assert state.messages == full[:cps[0]["messages"]] and state.status is Status.INTERRUPTED
        assert state.run_workspace is not None and state.run_workspace.changes is not None
        assert state.run_workspace.changes["files"] == 1, "the listing's counts, as the files are now"
        spent = lambda s: (s.turns, s.prompt_tokens, s.completion_tokens, s.cost_usd)  # noqa: E731
        assert spent(state) == spent(out.state) and out.state.prompt_tokens > 0, "a rewind never unspends"
        shown = (await cli_here_async("show", RUN, *where)).stdout
        assert "rewind 1: back to checkpoint 1" in shown and "(rewound)" not in shown
        shown_json = json.loads((await cli_here_async("show", RUN, "--json", *where)).stdout)
        assert [(r["id"], r["kind"], r["to"], r["stage"]) for r in shown_json["rewinds"]] == [(1, "rewind", 1, "restored")]
        everything = (await cli_here_async("show", RUN, "--all", *where)).stdout
        assert "(rewound) [assistant] write_file(" in everything and "(rewound) [assistant] done" in everything

        undone = await cli_here_async("rewind", RUN, "--undo", *where)
        assert undone.returncode == 0, undone.stderr
        assert "rewind 1 undone" in undone.stdout
        assert files(tree(home)) == before
        state = store.load(RUN)
        assert state.messages == full and state.status is Status.COMPLETED
        assert (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")) == users

        # Rewound again, then resumed: the model is sent the transcript exactly as it was at checkpoint 1.
        assert (await cli_here_async("rewind", RUN, "--to", "1", *where)).returncode == 0
        sent_before = len(model.requests)
        again = await h.run(RUN)
        assert again.state.status is Status.COMPLETED, again.state.error
        assert model.requests[sent_before][1][:cps[0]["messages"]] == json.loads(json.dumps(full[:cps[0]["messages"]]))
        assert len(model.requests[sent_before][1]) == cps[0]["messages"]
    assert [r["id"] for r in store.load(RUN).rewinds] == [1, 2, 3]


async def test_a_live_run_is_refused_in_words_and_bad_steps_too(home: Path, repo: Path) -> None:
    store = RunStore(home / "runs")
    async with Harness(store=store, client=script(), workspaces_dir=home / "workspaces") as h:
        await h.start(coder(repo), "edit", run_id=RUN)
    where = ["--runs-dir", str(home / "runs")]
    _, handle = store.open(RUN)  # this process runs it now
    try:
        live = cli_here("rewind", RUN, "--to", "1", *where)
    finally:
        handle.release()
    assert live.returncode == 2 and f"run {RUN} is running (" in live.stderr
    assert f"stop it first (tether stop {RUN}), then rewind it; nothing was changed" in live.stderr
    missing = cli_here("rewind", RUN, "--to", "9", *where)
    assert missing.returncode == 2 and f"run {RUN} has no checkpoint 9: tether checkpoints {RUN} lists them" in missing.stderr
    nothing = cli_here("rewind", RUN, "--undo", *where)
    assert nothing.returncode == 2 and "was never rewound" in nothing.stderr
    assert files(tree(home))["notes.txt"] == "v1\n" and "new.txt" in files(tree(home))


@pytest.mark.parametrize("at", ["rewind_recorded:1", "rewind_restored:1"])
async def test_a_crash_mid_rewind_is_finished_by_the_next_command(home: Path, repo: Path, at: str) -> None:
    store = RunStore(home / "runs")
    async with Harness(store=store, client=script(), workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo), "edit", run_id=RUN)
    where = ["--runs-dir", str(home / "runs")]
    crashed = crashing(at, "rewind", RUN, "--to", "0", *where)
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    assert "cut short" in cli_here("show", RUN, *where).stdout
    refused = cli_here("resume", RUN, "--message", "more", *where)
    assert refused.returncode == 2 and f"a rewind of it was cut short; tether rewind {RUN} --undo" in refused.stderr
    done = cli_here("rewind", RUN, "--undo", *where)
    assert done.returncode == 0, done.stderr
    assert "a rewind cut short was finished" in done.stdout and "rewind 1 undone" in done.stdout
    assert files(tree(home))["notes.txt"] == "v1\n" and files(tree(home))["new.txt"] == "new\n"
    assert store.load(RUN).messages == out.state.messages
    back = cli_here("rewind", RUN, "--to", "0", *where)
    assert back.returncode == 0, back.stderr
    assert files(tree(home)) == {".gitignore": "*.log\n", "notes.txt": "v0\n"}
    assert [m["role"] for m in store.load(RUN).messages] == ["system", "user"]


@pytest.mark.parametrize("kind", ["worktree", "copy"])
async def test_a_fork_starts_at_checkpoint_n_with_the_exact_transcript_prefix_and_resumes_with_a_message(
        home: Path, repo: Path, tmp_path: Path, kind: str) -> None:
    store = RunStore(home / "runs")
    where = ["--runs-dir", str(home / "runs")]
    model = script([("write_file", {"path": "fork.txt", "content": "mine\n"})], "forked and done")
    agent = coder(repo)
    if kind == "copy":
        plain = tmp_path / "plain"
        plain.mkdir()
        (plain / "notes.txt").write_text("v0\n")
        agent = replace(agent, workspace=plain, isolation=Isolation("copy"))
    async with Harness(store=store, client=model, workspaces_dir=home / "workspaces") as h:
        out = await h.start(agent, "edit", run_id=RUN)
        cps = json.loads((await cli_here_async("checkpoints", RUN, "--json", *where)).stdout)["checkpoints"]
        made = await cli_here_async("fork", RUN, "--at", "1", "--run-id", "f", *where)
        assert made.returncode == 0, made.stderr
        assert "run f forked from r at checkpoint 1" in made.stdout and "tether resume f" in made.stdout
        fork = store.load("f")
        assert fork.messages == out.state.messages[:cps[0]["messages"]]
        assert fork.forked_from is not None and fork.forked_from["run_id"] == RUN and fork.forked_from["step"] == 1
        assert json.loads((await cli_here_async("show", "f", "--json", *where)).stdout)["forked_from"]["run_id"] == RUN
        assert "forked from r at checkpoint 1" in (await cli_here_async("show", "f", *where)).stdout
        listed = {line.split()[0]: line for line in (await cli_here_async("runs", *where)).stdout.splitlines()}
        assert "fork of r@1" in listed["f"] and "fork of" not in listed[RUN]  # the lineage in the runs list
        rows = {r["run_id"]: r for r in json.loads((await cli_here_async("runs", "--json", *where)).stdout)}
        assert rows["f"]["forked_from"] == {"run_id": RUN, "step": 1} and rows[RUN]["forked_from"] is None
        sent = len(model.requests)
        went = await h.run("f", message="go on in the fork")
        assert went.state.status is Status.COMPLETED, went.state.error
        asked = model.requests[sent][1]
        assert asked[:-1] == json.loads(json.dumps(out.state.messages[:cps[0]["messages"]]))
        assert asked[-1] == {"role": "user", "content": "go on in the fork"}
    forked_tree = (home / "workspaces" / "f").resolve()
    assert files(forked_tree)["notes.txt"] == "v1\n" and "new.txt" not in files(forked_tree)
    assert files(forked_tree)["fork.txt"] == "mine\n"
    assert "fork.txt" not in files(tree(home)) and files(tree(home))["new.txt"] == "new\n"  # the origin's, untouched
    assert [c["step"] for c in json.loads(cli_here("checkpoints", "f", "--json", *where).stdout)["checkpoints"]] == [1]
    missing = cli_here("fork", RUN, "--at", "7", *where)
    assert missing.returncode == 2 and "has no checkpoint 7" in missing.stderr


async def test_diff_of_two_runs_shows_what_each_changed_and_where_they_differ(home: Path, repo: Path) -> None:
    store = RunStore(home / "runs")
    where = ["--runs-dir", str(home / "runs")]
    model = script([("write_file", {"path": "fork.txt", "content": "mine\n"})], "forked and done")
    async with Harness(store=store, client=model, workspaces_dir=home / "workspaces") as h:
        await h.start(coder(repo), "edit", run_id=RUN)
        assert (await cli_here_async("fork", RUN, "--at", "1", "--run-id", "f", *where)).returncode == 0
        await h.run("f", message="go on")
    stat = cli_here("diff", RUN, "f", "--stat", *where)
    assert stat.returncode == 0, stat.stderr
    lines = stat.stdout.splitlines()
    assert lines[0] == f"{RUN}: +2 \u22121 in 2 files against its base"
    assert lines[1] == "f: +1 \u22120 in 1 file against its base"  # its base: checkpoint 1
    assert lines[2] == f"where they differ ({RUN} -> f):"
    assert {(line.split()[0], line.split()[-1]) for line in lines[3:]} == {("added", "fork.txt"), ("deleted", "new.txt")}
    whole = cli_here("diff", RUN, "f", *where)
    assert "+++ b/fork.txt" in whole.stdout and "--- a/new.txt" in whole.stdout
    assert json.loads(cli_here("diff", RUN, "f", "--json", *where).stdout)["runs"] == [RUN, "f"]


async def test_a_fork_may_go_on_with_another_agent_and_a_message(home: Path, repo: Path, tmp_path: Path) -> None:
    config = tmp_path / "tether.toml"
    config.write_text(f'[agents.other]\nmodel = "m2"\nbase_url = "http://127.0.0.1:9/v1"\nworkspace = "{repo}"\n'
                      'tools = ["tether:read_file", "tether:write_file", "tether:delete_file"]\n'
                      'isolation = "worktree"\nauto_approve = ["write_file"]\n')
    store = RunStore(home / "runs")
    where = ["--runs-dir", str(home / "runs")]
    model = script("the other agent's answer")
    async with Harness(store=store, client=model, workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo), "edit", run_id=RUN)
        made = await cli_here_async("fork", RUN, "--at", "2", "--run-id", "f", "--agent", "other", "--message",
                                    "now you", "--config", str(config), *where)
        assert made.returncode == 0, made.stderr
        assert "with agent other (m2)" in made.stdout and "and your message" in made.stdout
        fork = store.load("f")
        assert fork.model == "m2" and fork.agent is not None and fork.agent.name == "other"
        assert fork.status is Status.INTERRUPTED and fork.messages[-1] == {"role": "user", "content": "now you"}
        sent = len(model.requests)
        went = await h.run("f")
        assert went.state.status is Status.COMPLETED, went.state.error
        assert model.requests[sent][1][-1] == {"role": "user", "content": "now you"}
        assert model.requests[sent][1][:-1] == json.loads(json.dumps(out.state.messages[:fork.forked_from["messages"]]))  # type: ignore[index]
    unknown = cli_here("fork", RUN, "--at", "1", "--agent", "nobody", "--config", str(config), *where)
    assert unknown.returncode == 2 and "nobody" in unknown.stderr
