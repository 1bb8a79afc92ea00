"""Shared fixtures: a harness over a temp runs dir and a fresh sample workspace."""

from __future__ import annotations

import asyncio
import gc
import sys
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tether.vocab.events import Event
from tether.harness import Harness
from tether.demo.agents import DEMO


if TYPE_CHECKING:
    from tether.store.postgres.store import PgStore


class Recorder:
    """An event sink that keeps every event and can wake a waiter on a condition."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._changed = asyncio.Event()

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        self._changed.set()

    def kinds(self, run_id: str | None = None) -> list[str]:
        return [e.kind for e in self.events if run_id is None or e.run_id == run_id]

    async def wait_for(self, predicate, timeout: float = 30.0) -> Event:
        """Wait until an event satisfies ``predicate`` (a generous cap fails the test)."""
        async def scan() -> Event:
            seen = 0
            while True:
                for event in self.events[seen:]:
                    if predicate(event):
                        return event
                seen = len(self.events)
                self._changed.clear()
                await self._changed.wait()
        return await asyncio.wait_for(scan(), timeout)


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "workspace"


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def harness(runs_dir: Path, workspace: Path, recorder: Recorder) -> AsyncIterator[Harness]:
    async with Harness(runs_dir, workspace, sinks=[recorder], agent_sets=(DEMO,)) as h:
        yield h


@pytest.fixture(scope="session")
def pg_server() -> Iterator["pg.PgServer"]:
    """A PostgreSQL server of the session's own (tests/pg.py), stopped and removed at the end.
    Without PostgreSQL's binaries: skipped here, an error in CI (``CI`` set)."""
    from tests import pg

    with pg.own_server() as server:
        yield server


@pytest.fixture
def pg(pg_url: str) -> Iterator["PgStore"]:
    """The operator's store on the session's server, emptied of every run first."""
    from tether.store.postgres.store import PgStore

    from tests.support import TABLES

    store = PgStore(pg_url)
    with store._conn() as conn:
        conn.execute(store.q("TRUNCATE " + ", ".join(f"{{s}}.{t}" for t in TABLES)))
        conn.execute(store.q("ALTER SEQUENCE {s}.rule_numbers RESTART"))  # rule ids from R1 again
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(scope="session")
def pg_url(pg_server) -> str:
    """The operator's URL of the session's server (``postgresql://tether:…@127.0.0.1:PORT/tether``)."""
    return pg_server.url


# ``make test`` runs the tests on several workers (pytest-xdist). The slowest files go first,
# so the end of the run is not one long test on one worker while the others idle; and the
# workers steal (``--dist worksteal``): xdist's default hands each worker a quarter of its share
# at once, consecutive tests, so one worker kept the slow files' tail while the others idled.
SLOW_FIRST = (
    "tests/local_model/", "tests/console/test_console_workers.py", "tests/campaign/", "tests/console/test_tour",
    "tests/processes/test_worker", "tests/processes/test_wheel.py", "tests/integrations/", "tests/acp/test_acp_server.py",
    "tests/console/test_tui_acp.py", "tests/processes/test_mcp_runs.py", "tests/processes/test_pg_cli.py",
    "tests/processes/test_approvals_processes.py", "tests/processes/test_persistence.py",
    "tests/console/test_console_store.py", "tests/processes/test_rules_cli.py", "tests/processes/test_decisions.py",
    "tests/browser/",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((i for i, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)), len(SLOW_FIRST))

    items.sort(key=rank)  # stable: within a rank, and for the rest, the order of collection


def pytest_configure(config: pytest.Config) -> None:
    # At the end of a session pytest collects the whole heap five times over, to bring out the
    # exceptions of objects that finalize late (``__del__``). In a test worker that has run
    # its share of the suite the heap is 600,000 objects and one full collection 1.3 CPU-s:
    # five in each of the four workers, all at the end of the run, where nothing else overlaps
    # them. One collection still finalizes every object left in a cycle and reports it.
    from _pytest.unraisableexception import gc_collect_iterations_key  # pytest's own knob (its pytester sets it)

    config.stash[gc_collect_iterations_key] = 1


# The console freezes the heap it starts with (tether.tui.app, console_ready) after a full
# collection, which in a console process is its modules and widgets. In a test worker it is
# also the whole collected suite (390,000 objects): each Pilot app's start then spent 0.3
# CPU-s collecting it. The apps the tests start collect the young generations only; the
# freeze, its undoing and the thresholds are the console's own.
_TEST_GC = types.SimpleNamespace(collect=lambda *_: gc.collect(1), freeze=gc.freeze, unfreeze=gc.unfreeze,
                                 get_threshold=gc.get_threshold, set_threshold=gc.set_threshold)


@pytest.fixture(autouse=True)
def _console_collects_young(monkeypatch: pytest.MonkeyPatch) -> None:
    app = sys.modules.get("tether.tui.app")  # imported with a test module that starts the console
    if app is not None:
        monkeypatch.setattr(app, "gc", _TEST_GC)
