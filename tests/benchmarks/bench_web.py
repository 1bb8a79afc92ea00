"""``tether serve`` measured (issue 26): how soon a phone hears of a waiting call, how soon a
link's click has the run going on, the approvals page's first paint with 200 calls waiting,
and the server's memory with 50 pages open.

Each figure is taken against a real ``tether serve`` process on loopback over a temp file
store; the runs that wait are made in this process (Tether's loop on the in-process scripted
provider, ``destructive``), as a run in any other process would put them on the store.

* **approval_required → notification received**: the ``approval_required`` event's time in
  the run's trace, to the moment a webhook receiver on loopback has the notification
  (``[notify.NAME]``, kind ``webhook``). p50 / p99 over N calls, one after the other.
* **link clicked → run going on**: the notification's approve link POSTed (``links =
  "bearer"``, as an ntfy action button does), to the time of the run's next step in its trace
  (the approved call's ``tool_start``, written by the server, which goes on with a run no
  process holds). p50 / p99.
* **first paint, 200 calls waiting**: Chromium, phone-sized (390×844), the approvals page
  loaded again and again; the browser's own first-contentful-paint, median of the loads. The
  page lists the newest 50 and says how many more; ``?all=1`` draws all 200.
* **memory with 50 pages open**: the server's resident memory (VmRSS) idle, and with 50 pages
  open (each one the page's GET and its live-updates stream, ``/events``, held open).

No timing is asserted anywhere; docs/performance.md has a run's figures.

Run: ``.venv/bin/python -m tests.benchmarks --only web`` or
``.venv/bin/python -m tests.benchmarks.bench_web [--calls N] [--waiting N] [--pages N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from tether.harness import Harness
from tether.store.files.store import RunStore
from tether.store.trace import read_trace
from tether.demo.agents import DEMO
from tests.benchmarks.bench_stop import percentile
from tests.browser.support import CHROMIUM, PASSWORDS, Served, WebhookReceiver, block_the_network, log_in, until


def _event_ts(runs: Path, run_id: str, kind: str, name: str | None = None) -> float | None:
    """The time of the run's first ``kind`` event (of the tool ``name``), from its trace."""
    path = runs / run_id / "trace.jsonl"
    if not path.exists():
        return None
    return next((float(r["ts"]) for r in read_trace(path)
                 if r["kind"] == kind and (name is None or r.get("name") == name)), None)


async def _waiting_runs(runs: Path, ws: Path, n: int, prefix: str) -> list[str]:
    """``n`` runs of ``destructive`` saved waiting for approval of delete_file, one after the other."""
    made = []
    async with Harness(workspace=ws, store=RunStore(runs), agent_sets=(DEMO,)) as harness:
        for i in range(n):
            state = harness.new_run("destructive", run_id=f"{prefix}{i:03d}")
            await harness.run(state.run_id)
            made.append(state.run_id)
    return made


async def notified_and_clicked(tmp: Path, calls: int) -> tuple[list[float], list[float]]:
    """Seconds from approval_required to the webhook, and from the link's POST to the run going on."""
    tmp.mkdir()
    receiver = WebhookReceiver()
    config = tmp / "tether.toml"
    config.write_text(f'[notify.bench]\nkind = "webhook"\nurl = "{receiver.url}"\nevents = ["approval"]\n'
                      'links = "bearer"\n')
    served = await asyncio.to_thread(Served, tmp, "", config=config)
    heard, going = [], []
    try:
        async with aiohttp.ClientSession() as http:
            for i in range(calls):
                run_id = (await _waiting_runs(served.runs, served.ws, 1, f"n{i:03d}-"))[0]
                asked = _event_ts(served.runs, run_id, "approval_required")
                assert asked is not None
                body = await asyncio.to_thread(until, lambda: next(
                    ((at, b) for at, b in receiver.bodies if b.get("run_id") == run_id), None), "the notification")
                heard.append(body[0] - asked)
                clicked = time.time()
                async with http.post(body[1]["links"]["approve"]) as answer:
                    assert answer.status < 400, await answer.text()
                started = await asyncio.to_thread(
                    until, lambda: _event_ts(served.runs, run_id, "tool_start", "delete_file"), "the run going on")
                going.append(started - clicked)
    finally:
        await asyncio.to_thread(served.stop)
        receiver.close()
    return heard, going


def first_paints(served: Served, loads: int) -> tuple[float, float]:
    """Median first-contentful-paint (ms) of the approvals page, and of ``?all=1``, on a phone."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2,
                                          is_mobile=True, has_touch=True)
            block_the_network(context)
            page = context.new_page()
            log_in(page, served.url, "ana")
            page.get_by_test_id("approval").first.wait_for()
            figures = []
            for path in ("/", "/?all=1"):
                paints = []
                for _ in range(loads):
                    page.goto(served.url + path)
                    paints.append(page.evaluate(
                        "() => new Promise(done => new PerformanceObserver((list, obs) => {"
                        " const p = list.getEntriesByName('first-contentful-paint')[0];"
                        " if (p) { obs.disconnect(); done(p.startTime); } })"
                        ".observe({type: 'paint', buffered: true}))"))
                figures.append(statistics.median(paints))
            return figures[0], figures[1]
        finally:
            browser.close()


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert found is not None
    return int(found.group(1)) / 1024


async def memory_with_pages(served: Served, pages: int) -> tuple[float, float]:
    """The server's RSS (MiB) idle, and with ``pages`` pages open (each its GET and its /events)."""
    jar = aiohttp.CookieJar(unsafe=True)  # a cookie of 127.0.0.1
    async with aiohttp.ClientSession(served.url, cookie_jar=jar) as http:
        login = await (await http.get("/login")).text()
        csrf = re.search(r'name="csrf" value="([^"]+)"', login)
        assert csrf is not None
        async with http.post("/login", data={"csrf": csrf.group(1), "name": "ana", "password": PASSWORDS["ana"],
                                             "next": "/"}) as answer:
            assert answer.status == 200, await answer.text()
        await asyncio.sleep(1.0)
        idle = _rss_mib(served.process.pid)
        streams = []
        try:
            for _ in range(pages):
                async with http.get("/") as page:
                    await page.read()
                stream = await http.get("/events", headers={"Accept": "text/event-stream"})
                assert stream.status == 200, stream.status
                streams.append(stream)
            await asyncio.sleep(1.0)
            busy = _rss_mib(served.process.pid)
        finally:
            for stream in streams:
                stream.close()
    return idle, busy


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_web")
    parser.add_argument("--calls", type=int, default=30, help="calls notified and approved by link")
    parser.add_argument("--waiting", type=int, default=200, help="calls waiting for the first paint")
    parser.add_argument("--pages", type=int, default=50, help="pages open for the memory figure")
    parser.add_argument("--loads", type=int, default=7, help="page loads per first-paint figure")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        heard, going = asyncio.run(notified_and_clicked(Path(tmp) / "notify", args.calls))
    print(f"approval_required -> notification received (webhook on loopback, {args.calls} calls): "
          f"p50 {percentile(heard, 50) * 1000:,.0f} ms, p99 {percentile(heard, 99) * 1000:,.0f} ms")
    cold, warm = going[0], going[1:] or going  # the first click also loads what deciding and going on need
    print(f"link clicked -> run going on (approve link POSTed, {len(warm)} calls after the first): "
          f"p50 {percentile(warm, 50) * 1000:,.0f} ms, p99 {percentile(warm, 99) * 1000:,.0f} ms; "
          f"the first click: {cold * 1000:,.0f} ms")
    if not CHROMIUM.exists():
        print(f"approvals page first paint, server memory: not measured (no Chromium at {CHROMIUM})")
        return
    with tempfile.TemporaryDirectory() as tmp:
        served = Served(Path(tmp), "")
        try:
            asyncio.run(_waiting_runs(served.runs, served.ws, args.waiting, "w"))
            newest, everything = first_paints(served, args.loads)
            idle, busy = asyncio.run(memory_with_pages(served, args.pages))
        finally:
            served.stop()
    print(f"approvals page, first paint on a phone (Chromium 390x844), {args.waiting} calls waiting, "
          f"median of {args.loads} loads: {newest:,.0f} ms (the newest 50); {everything:,.0f} ms (?all=1, all of them)")
    print(f"tether serve memory (RSS): {idle:,.0f} MiB idle with {args.waiting} calls waiting; "
          f"{busy:,.0f} MiB with {args.pages} pages open (+{(busy - idle) * 1024 / args.pages:,.0f} KiB a page)")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
