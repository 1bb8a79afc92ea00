"""``tether replay RUN [--to N]``: a Tether run's recorded tool calls run again with today's
tools, no model asked; the first result that differs is reported, and a tool that is gone is
refused in words (issue 39, item 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tether.agents.tools.base import Tool, ToolContext
from tether.harness import Harness
from tether.store.files.store import RunStore
from tether.workspaces.replaying import replay
from tests.processes.test_rewind_cli import RUN, coder, repo, tree  # noqa: F401 (repo: a fixture)
from tests.support import Scripted, cli_here, home  # noqa: F401 (home: a fixture)


def script() -> Scripted:
    return Scripted([("write_file", {"path": "notes.txt", "content": "v1\n"})],
                    [("read_file", {"path": "notes.txt"})],
                    [("write_file", {"path": "new.txt", "content": "new\n"})], "done")


class Shouting(Tool):
    """Today's read_file, changed: it shouts."""

    def __init__(self, was: Tool) -> None:
        self.was = was
        self.name = was.name
        self.read_only = True

    def schema(self) -> dict[str, Any]:
        return self.was.schema()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        return (await self.was.run(args, ctx)).upper()


async def test_replay_runs_the_recorded_calls_again_and_finds_a_changed_tool(home: Path, repo: Path) -> None:
    store = RunStore(home / "runs")
    async with Harness(store=store, client=script(), workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo), "edit", run_id=RUN)
        agent = h.agent_of(out.state)
    where = ["--runs-dir", str(home / "runs")]
    before = {p.name: p.read_text() for p in tree(home).iterdir() if p.is_file()}
    same = cli_here("replay", RUN, *where)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "3 recorded tool calls run again with today's tools, from its workspace's base" in same.stdout
    assert same.stdout.rstrip().endswith("every result is as recorded")
    assert {p.name: p.read_text() for p in tree(home).iterdir() if p.is_file()} == before  # the run's own: untouched

    tools = {t.name: t for t in agent.tool_list}
    tools["read_file"] = Shouting(tools["read_file"])
    changed = await replay(store.load(RUN), tools)
    first = changed.first_difference
    assert first is not None and (first.step, first.tool) == (2, "read_file")
    assert first.recorded.endswith("v1\n") or "v1" in first.recorded
    assert "V1" in first.now
    assert [c.outcome for c in changed.calls] == ["same", "different", "same"]

    upto = json.loads(cli_here("replay", RUN, "--to", "1", "--json", *where).stdout)
    assert [c["tool"] for c in upto["calls"]] == ["write_file"] and upto["first_difference"] is None


async def test_replay_refuses_a_run_whose_tool_is_gone(home: Path, repo: Path) -> None:
    store = RunStore(home / "runs")
    async with Harness(store=store, client=script(), workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo), "edit", run_id=RUN)
        agent = h.agent_of(out.state)
    tools = {t.name: t for t in agent.tool_list if t.name != "read_file"}
    try:
        await replay(store.load(RUN), tools)
    except Exception as exc:  # noqa: BLE001 - the words are the point
        assert "called read_file, which its agent has no more" in str(exc)
    else:
        raise AssertionError("a replay without read_file was not refused")
