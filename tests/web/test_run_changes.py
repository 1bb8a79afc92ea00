"""A run's page shows what it changed in its own workspace and each file's diff, read when the
page is asked for, server-rendered and escaped: no JavaScript needed (issue 38, item 3)."""

from __future__ import annotations

import html
import re
import subprocess
from pathlib import Path

from tether.harness import Harness
from tests.support import Scripted, home  # noqa: F401 (home: a fixture)
from tests.unit.test_workspaces import coder, repo  # noqa: F401 (repo: a fixture)
from tests.web.conftest import Served, logged_in, web  # noqa: F401 (web: a fixture)


async def test_the_run_page_lists_the_changed_files_with_their_diffs_escaped(
        web: Served, home: Path, repo: Path) -> None:
    async with Harness(store=web.store, workspace=home / "demo", client=Scripted("nothing to do"),
                       workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo), "look")
    ws = out.state.run_workspace
    assert ws is not None and ws.path is not None
    tree = Path(ws.path)
    client = await logged_in(web, "ana")
    try:
        page = await (await client.get(f"/runs/{out.state.run_id}")).text()
        assert 'data-testid="changes-none">no changes yet' in page
        # Written by a shell command, after the run ended: the page reads the workspace as it is now.
        subprocess.run(["sh", "-c", "printf 'one\\n<script>alert(1)</script>\\n' > notes.txt && rm old.txt"],
                       cwd=tree, check=True)
        page = await (await client.get(f"/runs/{out.state.run_id}")).text()
    finally:
        await client.close()
    assert 'data-testid="changes-stat">+1 \u22122 in 2 files<' in page
    files = re.findall(r'<span class="mark">(\w)</span>\s*<span class="path">([^<]+)</span>', page)
    assert files == [("M", "notes.txt"), ("D", "old.txt")]
    assert '<span class="d-add">+&lt;script&gt;alert(1)&lt;/script&gt;</span>' in page
    assert "<script>alert(1)" not in page
    assert '<span class="d-del">-two</span>' in page and '<span class="d-del">-old</span>' in page
    assert html.unescape(page).count("diff --git a/notes.txt b/notes.txt") == 1


async def test_a_run_without_a_workspace_has_no_changes_section(web: Served) -> None:
    run_id = await web.waiting_run()
    client = await logged_in(web, "ana")
    try:
        page = await (await client.get(f"/runs/{run_id}")).text()
    finally:
        await client.close()
    assert 'id="changes"' not in page and 'data-testid="transcript"' in page


async def test_the_run_page_lists_its_checkpoints_newest_first(web: Served, home: Path, repo: Path) -> None:
    model = Scripted([("write_file", {"path": "notes.txt", "content": "one\n2\n"})],
                     [("delete_file", {"path": "old.txt"})], "done")
    async with Harness(store=web.store, workspace=home / "demo", client=model,
                       workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo), "edit")
    client = await logged_in(web, "ana")
    try:
        page = await (await client.get(f"/runs/{out.state.run_id}")).text()
    finally:
        await client.close()
    steps = re.findall(r'<li class="checkpoint" data-testid="checkpoint" value="(\d+)"><span class="step">\d+</span> '
                       r'<span class="when">[^<]+</span> <span class="what">([^<]+)</span>', page)
    assert [(int(n), what.split(" ")[0]) for n, what in steps] == [(2, "delete_file"), (1, "write_file")]
    assert '<span class="mark">D</span> old.txt <span class="add">+0</span> <span class="del">\u22121</span>' in page


async def test_a_forks_page_says_what_it_was_forked_from(web: Served, home: Path, repo: Path) -> None:
    from tether.workspaces.forking import fork

    model = Scripted([("write_file", {"path": "notes.txt", "content": "one\n2\n"})], "done")
    async with Harness(store=web.store, workspace=home / "demo", client=model,
                       workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo), "edit")
    web.store.create(await fork(web.store.load(out.state.run_id), 1, "the-fork", home / "workspaces"))
    client = await logged_in(web, "ana")
    try:
        page = await (await client.get("/runs/the-fork")).text()
    finally:
        await client.close()
    assert (f'<dd data-testid="forked-from"><a href="/runs/{out.state.run_id}">{out.state.run_id} at checkpoint 1</a>'
            in page)
