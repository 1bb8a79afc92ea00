"""The run page's Merge and Discard (issue 38, item 4): plain forms with the session's CSRF
token, done by the same operation as ``tether merge``/``tether discard``, answered in words."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tether.harness import Harness
from tests.support import Scripted, git, home  # noqa: F401 (home: a fixture)
from tests.unit.test_workspaces import coder, repo  # noqa: F401 (repo: a fixture)
from tests.web.conftest import Served, csrf_of, logged_in, web  # noqa: F401 (web: a fixture)


async def a_run(web: Served, home: Path, repo: Path, write: str = "printf 'made\\n' > made.txt") -> tuple[str, Path]:
    async with Harness(store=web.store, workspace=home / "demo", client=Scripted("nothing to do"),
                       workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo), "look")
    ws = out.state.run_workspace
    assert ws is not None and ws.path is not None
    subprocess.run(["sh", "-c", write], cwd=ws.path, check=True)
    return out.state.run_id, Path(ws.path)


def said(page: str) -> tuple[str, str]:
    title = re.search(r"<h1>([^<]*)</h1>", page)
    words = re.search(r'data-testid="words-text">([^<]*)<', page)
    assert title is not None and words is not None, page
    return title.group(1), words.group(1)


async def test_merge_asks_a_decision_then_approve_on_the_approvals_page_merges_it(
        web: Served, home: Path, repo: Path) -> None:
    run_id, _ = await a_run(web, home, repo)
    client = await logged_in(web, "ana")
    try:
        page = await (await client.get(f"/runs/{run_id}")).text()
        assert 'data-testid="merge-form"' in page and 'data-testid="discard"' in page
        token = await csrf_of(client, f"/runs/{run_id}")
        forged = await client.post(f"/runs/{run_id}/merge", data={"csrf": "made-up"})
        assert forged.status == 403 and not (repo / "made.txt").exists()
        answer = await client.post(f"/runs/{run_id}/merge", data={"csrf": token, "into": ""})
        assert answer.status == 200
        title, words = said(await answer.text())
        assert title == "Asked: waiting for a decision"
        assert f"run {run_id}: its merge into main waits for a decision by a person" in words
        approvals = await (await client.get("/")).text()
        assert f'/runs/{run_id}' in approvals and "merge" in approvals
        call = re.search(r'name="call" value="([^"]+)"', approvals)
        bound = re.search(r'name="hash" value="([^"]+)"', approvals)
        assert call is not None and bound is not None
        decided = await client.post("/decide", data={"csrf": token, "run": run_id, "call": call.group(1),
                                                     "hash": bound.group(1), "verdict": "approve", "back": "/"})
        assert decided.status == 200, await decided.text()
    finally:
        await client.close()
    assert (repo / "made.txt").read_text() == "made\n"
    assert "Merge the work of the Tether run" in git(repo, "log", "-1", "--format=%s", "main")


async def test_a_conflict_is_said_in_words_and_nothing_changes(web: Served, home: Path, repo: Path) -> None:
    run_id, _ = await a_run(web, home, repo, "printf 'theirs\\n' > old.txt")
    (repo / "old.txt").write_text("ours\n")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "ours", "old.txt")
    before = git(repo, "rev-parse", "main")
    client = await logged_in(web, "ana")
    try:
        token = await csrf_of(client, f"/runs/{run_id}")
        answer = await client.post(f"/runs/{run_id}/merge", data={"csrf": token, "into": "main", "squash": "1"})
        assert answer.status == 409
        title, words = said(await answer.text())
    finally:
        await client.close()
    assert title == "Not merged"
    assert f"run {run_id} cannot be merged into main: it conflicts with main in old.txt" in words
    assert git(repo, "rev-parse", "main") == before


async def test_discard_asks_on_its_own_page_then_removes_the_workspace(web: Served, home: Path, repo: Path) -> None:
    run_id, tree = await a_run(web, home, repo)
    client = await logged_in(web, "ana")
    try:
        question = await (await client.get(f"/runs/{run_id}/discard")).text()
        assert f"Remove {tree} and the branch tether/{run_id} of run {run_id}" in question
        token = await csrf_of(client, f"/runs/{run_id}/discard")
        unconfirmed = await client.post(f"/runs/{run_id}/discard", data={"csrf": token})
        assert unconfirmed.status == 400 and tree.is_dir()
        answer = await client.post(f"/runs/{run_id}/discard", data={"csrf": token, "confirm": "yes"})
        assert answer.status == 200
        title, words = said(await answer.text())
        page = await (await client.get(f"/runs/{run_id}")).text()
    finally:
        await client.close()
    assert title == "Discarded" and words == f"run {run_id}: removed {tree} and the branch tether/{run_id}; its transcript stays"
    assert not tree.exists()
    assert 'data-testid="merge-form"' not in page and 'data-testid="discard"' not in page
    assert "its workspace was discarded" in page


async def test_a_watcher_sees_no_merge_button_and_cannot_post_one(web: Served, home: Path, repo: Path) -> None:
    run_id, tree = await a_run(web, home, repo)
    client = await logged_in(web, "walt")
    try:
        page = await (await client.get(f"/runs/{run_id}")).text()
        assert 'data-testid="merge-form"' not in page
        token = await csrf_of(client, f"/runs/{run_id}")
        answer = await client.post(f"/runs/{run_id}/merge", data={"csrf": token})
        refused = await client.post(f"/runs/{run_id}/discard", data={"csrf": token, "confirm": "yes"})
    finally:
        await client.close()
    assert answer.status == 403 and refused.status == 403 and tree.is_dir() and not (repo / "made.txt").exists()
