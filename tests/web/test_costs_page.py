"""/costs (issue 41): what the runs cost, server-drawn SVG (no JavaScript needed), escaped, behind
the login; on the file store and on PostgreSQL."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from tether.agents.config import load_config
from tether.approvals.budgets import from_config
from tether.vocab.state import AgentRef, Pricing, RunState, Status
from tests import fleet_costs
from tests.web.conftest import Served, logged_in, pg_web, web  # noqa: F401 (fixtures)


def spent(served: Served, run_id: str, agent: str, cost: float, *, price: str = "config") -> None:
    state = RunState(run_id=run_id, model="gpt-4o-mini", cost_usd=cost, prompt_tokens=100, completion_tokens=10,
                     status=Status.COMPLETED, agent=AgentRef(name=agent, source="config", fingerprint="f"),
                     pricing=Pricing(0.0, 0.0, source="unknown") if price == "unknown" else Pricing(source=price),
                     messages=[{"role": "user", "content": "go"}])
    served.store.create(state)


async def costs_page(served: Served) -> str:
    spent(served, "r1", "triage", 1.5)
    spent(served, "r2", "triage", 0.5)
    spent(served, "r3", "<script>alert(1)</script>", 0.25)
    spent(served, "r4", "local", 0.0, price="unknown")
    client = await logged_in(served, "ana")
    try:
        response = await client.get("/costs")
        assert response.status == 200
        return await response.text()
    finally:
        await client.close()


def check(page: str) -> None:
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'data-testid="costs-total">$2.2500<' in page
    assert "1 run with no price (tokens counted, not dollars)" in page
    day = re.search(r'<svg[^>]*data-testid="day-chart".*?</svg>', page, re.S)
    assert day is not None and day.group(0).count("<rect") == 30
    agents = re.search(r'<svg[^>]*data-testid="agent-chart".*?</svg>', page, re.S)
    assert agents is not None
    widths = [float(w) for w in re.findall(r'<rect x="100" y="[\d.]+" width="([\d.]+)"', agents.group(0))]
    assert widths[0] == 150.0 and widths[1] == 150.0 * 0.25 / 2.0  # dearest first, to scale
    assert '<a href="/runs/r1">r1</a> ($1.5000)' in page  # the dearest run of triage
    assert "unknown" in html.unescape(page)
    dearest = re.search(r'<table[^>]*data-testid="dearest-table".*?</table>', page, re.S)
    assert dearest is not None and ">The 4 dearest runs<" in page
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", dearest.group(0), re.S)
    cells = [re.split(r"</td>\s*<td>", row) for row in rows]
    assert [c[0] for c in cells] == [f'<a href="/runs/{r}">{r}</a>' for r in ("r1", "r2", "r3", "r4")]
    assert cells[0][1:6] == ["triage", "gpt-4o-mini", "$1.5000", "100 in / 10 out", "completed"]
    assert cells[2][1] == "&lt;script&gt;alert(1)&lt;/script&gt;"  # the agent's name, escaped
    assert cells[3][3] == "unknown"  # no price: never a made-up $0


async def test_the_costs_page_draws_spend_as_svg_escaped(web: Served) -> None:
    check(await costs_page(web))


async def test_the_costs_page_on_postgresql(pg_web: Served) -> None:
    check(await costs_page(pg_web))


async def test_the_costs_page_is_behind_the_login(web: Served) -> None:
    client = web.client()
    try:
        response = await client.get("/costs", allow_redirects=False)
        body = await response.text()
    finally:
        await client.close()
    assert response.status == 401 and "costs-total" not in body


class HTMLSnapshot(SingleFileSnapshotExtension):
    """A page's HTML as a file of its own (``__snapshots__/test_costs_page/TEST.html``), which
    a browser opens to look at."""

    _file_extension = "html"
    _write_mode = WriteMode.TEXT


async def test_the_costs_page_of_a_fixed_fleet_is_as_its_snapshot(
        web: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snapshot: Any) -> None:
    """/costs of a fixed fleet seen at a fixed time (tests/fleet_costs.py), the whole page as
    its saved HTML, the login's form token aside: the 30 days' bars, the agents' and models'
    bars with their dearest runs, the dearest runs with their ages, a run nobody priced, and
    three budgets (ok, warning, reached). Regenerate with ``--snapshot-update`` after a
    deliberate change, and open the .html before committing it."""
    fleet_costs.frozen(monkeypatch)
    fleet_costs.make_runs(web.store)
    web.harness.fleet = from_config(load_config(fleet_costs.agent_file(tmp_path)).data.budgets)
    client = await logged_in(web, "ana")
    try:
        response = await client.get("/costs")
        assert response.status == 200
        page = await response.text()
    finally:
        await client.close()
    assert 'name="csrf" value="' in page
    page = re.sub(r'name="csrf" value="[^"]*"', 'name="csrf" value="(the form token)"', page)
    assert page == snapshot(extension_class=HTMLSnapshot)
