"""The console's header says when notifications fail, whichever process sends them, and
stops saying it once they go again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tether.harness import Harness
from tether.store.files.store import RunStore
from tether.demo.agents import DEMO
from tests.notify.conftest import QUICK, Receiver, channel, sending
from tests.support import SIZE, finish, still_console, wait_for


async def test_the_header_shows_the_senders_failures_then_clears_them(tmp_path: Path):
    flaky = Receiver(failing=2)
    await flaky.start()
    store = RunStore(tmp_path / "runs")  # the sender's own store object, as another process's
    hook = channel("ops", {"kind": "webhook", "url": f"{flaky.url}/hook?key=HEADERSECRET", "events": ["completed"]})
    app = still_console(runs_dir=tmp_path / "runs", workspace=tmp_path / "workspace")
    try:
        async with app.run_test(size=SIZE) as pilot, \
                sending(store, [hook], settings=dataclasses.replace(QUICK, first_retry_s=1.0, max_retry_s=1.0)):
            await app.store_ready()
            async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as h:
                await h.run(h.new_run("plan").run_id)
            await wait_for(pilot, lambda: "⚠ webhook 'ops': " in app.sub_title, "the failure in the header")
            assert "HTTP 500" in app.sub_title and "HEADERSECRET" not in app.sub_title
            await wait_for(pilot, lambda: "⚠" not in app.sub_title, "the header cleared")
            assert len(flaky.posts) == 1
            await finish(pilot, app)
    finally:
        await flaky.stop()
