"""The crash campaign on PostgreSQL with queue workers (tests/campaign/workers.py), reduced
to fit ``make test``; ``make campaign`` runs every point.

(In a file of its own, after tests/console/test_console_store.py, whose tests check that the test
process has no children left: the session's PostgreSQL server is one, from its first use.)
"""

from __future__ import annotations

import pytest


# A reduced set of SIGKILL points, by committed trace lines (a line is committed with the
# next save, or by the store's trace timer): plan early (its first tool call) and midway (its
# second turn), destructive while it waits for the approval and once the approved delete is
# under way, repeat_write between its two writes.
WORKER_POINTS = {"plan": [2, 4], "destructive": [7, 8], "repeat_write": [4]}


@pytest.fixture(scope="module")
def worker_campaign(pg_url: str, tmp_path_factory: pytest.TempPathFactory):
    from tests.campaign.workers import WorkerCampaign
    from tests.workerproc import clean_slate

    clean_slate(pg_url)
    with WorkerCampaign(pg_url, tmp_path_factory.mktemp("workers")) as c:
        yield c


@pytest.mark.parametrize("name", sorted(WORKER_POINTS))
def test_a_sigkilled_worker_loses_nothing_and_pays_nothing_twice(worker_campaign, name: str):
    from tests.campaign.workers import failures, table

    result = worker_campaign.sweep(name, WORKER_POINTS[name])
    assert result.points and all(p.crashes for p in result.points), "no worker was killed"
    broken = failures([result])
    assert not broken, f"\n{table([result])}\n{broken}"
