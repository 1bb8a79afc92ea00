"""OpenCode and Qwen Code at once in one console (headless, Textual's pilot), offline against
a scripted endpoint on loopback: both ask permission for a write, the operator approves each
from the console's dialog (where the agent's diff shows), both writes land, and no agent
process is left. Without the agents (no npm) this skips with one reason; with ``CI`` it fails.
"""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Static

from tether.config import load_config
from tether.provider.server import running_app
from tether.state import NeedsApproval, Status
from tether.tui.components.dialogs import ApproveDialog, NewRunRequest
from tests.acp import agents
from tests.acp.endpoint import ScriptedEndpoint
from tests.acp.procs import alive_in
from tests.support import SIZE, finish, make_app, open_armed, wait_for

CAP_S = 120.0


def agent_file(tmp_path: Path, base_url: str) -> Path:
    lines = []
    for name in ("opencode", "qwen"):
        home = tmp_path / f"home-{name}"
        home.mkdir()
        workspace = tmp_path / f"ws-{name}"
        workspace.mkdir()
        launch = agents.launch_opencode(home, base_url) if name == "opencode" else agents.launch_qwen(home, base_url)
        env = ", ".join(f"{key} = {json.dumps(value)}" for key, value in launch.env.items())
        lines += [f"[agents.{name}]", f"acp = {json.dumps(list(launch.command))}",
                  f"workspace = {json.dumps(str(workspace))}", f"env = {{ {env} }}", ""]
    path = tmp_path / "tether.toml"
    path.write_text("\n".join(lines))
    return path


def waits(app, rid: str) -> bool:
    st = app.states.get(rid)
    return st is not None and isinstance(st.interruption, NeedsApproval)


async def test_opencode_and_qwen_side_by_side_in_one_console(tmp_path: Path) -> None:
    agents.require_agents()
    endpoint = ScriptedEndpoint()
    async with running_app(endpoint.app()) as base_url:
        config = load_config(agent_file(tmp_path, base_url))
        app = make_app(tmp_path, config=config)
        try:
            async with app.run_test(size=SIZE) as pilot:
                rids = {}
                for name in ("opencode", "qwen"):
                    target = tmp_path / f"ws-{name}" / "hello.txt"
                    rids[name] = app.create_run(NewRunRequest("", f"WRITE {target} CONTENT hello from {name}",
                                                              agent=name))
                for name, rid in rids.items():
                    await wait_for(pilot, lambda r=rid: waits(app, r), f"{name} to ask permission", CAP_S)
                for name, rid in rids.items():
                    app.select(rid)
                    await pilot.pause()
                    dialog = await open_armed(pilot, app, "a", ApproveDialog)
                    assert f"+hello from {name}" in str(dialog.query_one("#diff", Static).render())
                    await pilot.press("enter")
                    await wait_for(pilot, lambda r=rid: app.states[r].status is Status.COMPLETED,
                                   f"{name} to finish", CAP_S)
                await finish(pilot, app)
        finally:
            await app.harness.aclose()
    for name, rid in rids.items():
        assert (tmp_path / f"ws-{name}" / "hello.txt").read_text() == f"hello from {name}"
        final = app.harness.store.load(rid)
        assert final.status is Status.COMPLETED and [d.verdict for d in final.approvals.values()] == ["approved"]
        assert not alive_in(tmp_path / f"ws-{name}")
