"""``python -m tests.campaign`` (``make campaign``): crashes (of runs, of workers, of a run's own
workspace: its making, merge and discard), faults, hostile input; a table each.

Exits 1 if any crash point, fault case or hostile case fails, after printing them all.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.campaign import crash, faults, hostile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.campaign", description=__doc__)
    parser.add_argument("--scenario", action="append", choices=sorted(crash.SCENARIOS),
                        help="crash only these scenarios (repeatable; default all four)")
    parser.add_argument("--quick", action="store_true", help="single crashes only: no second crash, no SIGKILL")
    parser.add_argument("--workers", type=int, help="crash cells run in parallel (default: CPUs, at least 2)")
    parser.add_argument("--skip", action="append", default=[], choices=["crash", "faults", "hostile", "workers",
                                                                          "workspaces"])
    args = parser.parse_args(argv)
    tables: list[str] = []
    broken = False
    with tempfile.TemporaryDirectory(prefix="tether-campaign-") as scratch:
        root = Path(scratch)
        if "crash" not in args.skip:
            modes = (crash.CRASH,) if args.quick else (crash.CRASH, crash.DOUBLE, crash.SIGKILL)
            started = time.monotonic()
            with crash.Campaign(root / "crash", args.workers) as campaign:
                results = []
                for name in args.scenario or crash.SCENARIOS:
                    results.append(campaign.sweep(name, modes=modes))
                    print(f"crash campaign: {name} done", file=sys.stderr)
            failed = crash.failures(results)
            broken |= bool(failed)
            tables.append(f"## Crash campaign ({time.monotonic() - started:.0f} s)\n\n{crash.table(results)}"
                          + (f"\n\nFailed crash points:\n{failed}" if failed else ""))
        if "workspaces" not in args.skip:
            broken |= _workspaces(root / "workspaces", args.workers, tables)
        if "workers" not in args.skip:
            broken |= _workers(root / "workers", tables)
        if "faults" not in args.skip:
            rows = faults.run_all(root / "faults")
            broken |= not all(ok for *_, ok in rows)
            tables.append("## Fault campaign\n\n" + crash.markdown(
                ["fault class", "handled how", "result"], [[f, h, r] for f, h, r, _ in rows]))
        if "hostile" not in args.skip:
            rows, failed_cases = hostile.run_all()
            broken |= bool(failed_cases)
            total = [sum(r[1] for r in rows), sum(r[2] for r in rows)]
            tables.append("## Hostile input\n\n" + crash.markdown(
                ["hostile input", "cases", "refused as specified"],
                [[kind, str(n), str(ok)] for kind, n, ok in rows] + [["total", str(total[0]), str(total[1])]])
                + ("\n\nFailing hostile cases:\n" + "\n".join(f"- {c}" for c in failed_cases) if failed_cases else ""))
    print("\n\n".join(tables))
    return 1 if broken else 0


def _workspaces(root: Path, workers: int | None, tables: list[str]) -> bool:
    """A crash at every boundary of a workspace's making, merge and discard (once, and again
    in the command that finishes it: tests/campaign/workspaces.py); True when a point failed."""
    from tests.campaign import workspaces

    started = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    cells = workspaces.sweep(root, workers=workers or 2)
    failed = workspaces.failures(cells)
    tables.append(f"## Crash campaign of a run's workspace ({time.monotonic() - started:.0f} s)\n\n"
                  + workspaces.table(cells) + (f"\n\nFailed points:\n{failed}" if failed else ""))
    return bool(failed)


def _workers(root: Path, tables: list[str]) -> bool:
    """The crash campaign on PostgreSQL with queue workers (tests/campaign/workers.py), on a
    server of its own; True when a point failed."""
    from tests import pg
    from tests.campaign import workers

    started = time.monotonic()
    server = pg.start()
    try:
        with workers.WorkerCampaign(server.url, root) as campaign:
            results = []
            for name in workers.SCENARIOS:
                results.append(campaign.sweep(name))
                print(f"worker campaign: {name} done", file=sys.stderr)
    finally:
        server.stop()
    failed = workers.failures(results)
    tables.append(f"## Crash campaign on PostgreSQL workers ({time.monotonic() - started:.0f} s)\n\n"
                  + workers.table(results) + (f"\n\nFailed points:\n{failed}" if failed else ""))
    return bool(failed)


if __name__ == "__main__":
    sys.exit(main())
