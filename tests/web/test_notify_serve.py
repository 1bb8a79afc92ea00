"""``tether serve`` sends the store's notifications when the agent file has ``[notify.*]``
tables, and the links they carry decide through it."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.test_utils import TestServer

from tether.approvals import DecisionQuery
from tether.vocab.state import Status
from tether.store.files.store import RunStore

from tests.web.conftest import serving


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_an_approval_notification_carries_a_link_that_approves_once(tmp_path: Path):
    received: list[dict] = []
    arrived = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        received.append(await request.json())
        arrived.set()
        return web.Response(status=204)

    receiver = web.Application()
    receiver.router.add_post("/hook", hook)
    sink = TestServer(receiver, host="127.0.0.1")
    await sink.start_server()
    config = tmp_path / "tether.toml"
    config.write_text(f'[notify.hook]\nkind = "webhook"\nurl = "{sink.make_url("/hook")}"\nevents = ["approval"]\n'
                      'links = "bearer"\n')
    port = free_port()
    try:
        async for served in serving(RunStore(tmp_path / "runs"), tmp_path, notify=True, port=port,
                                    config_path=config, public_url=f"http://127.0.0.1:{port}"):
            run_id = await served.waiting_run()
            await asyncio.wait_for(arrived.wait(), 60)
            (sent,) = [r for r in received if r.get("event") == "approval"]
            assert sent["run_id"] == run_id and sent["tool"] == "delete_file"
            approve = urlsplit(sent["links"]["approve"])
            assert approve.netloc == f"127.0.0.1:{port}" and approve.path.startswith("/l/")
            client = served.client()  # no login: the channel's links are bearer links
            try:
                first = await client.post(approve.path, data={})
                assert first.status == 200, await first.text()
                await served.settled()
                second = await client.post(approve.path, data={})
                assert second.status == 403 and "already used" in await second.text()
            finally:
                await client.close()
            assert served.store.load(run_id).status is Status.COMPLETED
            (record,) = served.store.decisions(DecisionQuery())
            assert (record.verdict, record.by) == ("approved", "link")
    finally:
        await sink.close()
