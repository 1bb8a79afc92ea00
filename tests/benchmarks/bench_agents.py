"""``tether agents`` with five ACP agents: cold (every agent asked, side by side) and warm (what
each answered kept until its program changes), against the listing as it was (one agent
after another) measured in this process.

The agents: OpenCode and Qwen Code (``make agents`` installs them; the offline configs of
``tether demo --acp``), and the fake agent of ``tests/acp/fake_agent.py`` to make five; without
the real ones, five fake agents (said so). Per sample, interleaved:

* **one after another, in this process** (the baseline): each agent's ``initialize`` by
  :func:`tether.acp.probe`, awaited in turn, as ``tether agents`` asked them before; the sum,
  without a process start;
* **cold**: ``tether agents`` as a new process on a fresh ``TETHER_HOME`` (nothing kept);
* **warm**: ``tether agents`` again on the same home (every answer kept);
* **no agent file**: ``tether agents`` without one (the demo's agents alone): the command's
  own start-up, the floor a warm listing stands on.

The median of the samples; one listing is run first and not counted (it warms the agents'
own caches and the page cache). No timing is asserted; docs/performance.md has a run's.

Run: ``.venv/bin/python -m tests.benchmarks --only agents`` or
``.venv/bin/python -m tests.benchmarks.bench_agents [--samples N]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tether.acp import probe
from tether.agents.config import load_config
from tether.demo.acp import missing, seed_workspace, write_agent_file
from tests.acp.conftest import fake_agent
from tests.benchmarks.peers import scratch_dir

AGENTS = 5
SAMPLES = 5


def agent_file(folder: Path) -> tuple[Path, str]:
    """Five ACP agents in one agent file, and which they are."""
    path = folder / "tether.toml"
    real = missing() is None
    if real:  # OpenCode and Qwen Code, as tether demo --acp declares them (no model call is made)
        write_agent_file(path, base_url="http://127.0.0.1:9/v1", home=folder / "agents",
                         workspace=seed_workspace(folder / "project"))
    fakes = AGENTS - 2 if real else AGENTS
    with path.open("a") as f:
        for n in range(fakes):
            f.write(f"\n[agents.fake-{n}]\nacp = {json.dumps(fake_agent('normal'))}\n")
    return path, (f"OpenCode, Qwen Code and {fakes} fake agents" if real
                  else f"{fakes} fake agents ({missing()})")


def listing(home: Path, config: Path | None) -> float:
    """Seconds for ``tether agents`` as a new process on ``home`` (and in it: without ``config``,
    a home with no ``tether.toml`` is a listing without an agent file)."""
    home.mkdir(exist_ok=True)
    env = {**os.environ, "TETHER_HOME": str(home)}
    env.pop("TETHER_CONFIG", None)
    args = [sys.executable, "-m", "tether.tui.cli", "agents", *(["--config", str(config)] if config else [])]
    started = time.perf_counter()
    shown = subprocess.run(args, env=env, cwd=home, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if shown.returncode != 0 or ".acp: " in shown.stdout:  # an agent that failed is said so on that key
        raise RuntimeError(f"tether agents did not list every agent: {shown.stdout}{shown.stderr}")
    return elapsed


async def one_after_another(config: Path) -> float:
    """Seconds for each agent's ``initialize``, asked in turn in this process."""
    agents = load_config(config).agents()
    started = time.perf_counter()
    for agent in agents.values():
        assert agent.acp is not None
        env, _ = agent.acp.resolved_env()
        await probe(agent.acp.argv, env)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=SAMPLES)
    args = parser.parse_args(argv)
    figures: dict[str, list[float]] = {"serial": [], "cold": [], "warm": [], "floor": []}
    with scratch_dir("agents") as tmp_dir:
        tmp = Path(tmp_dir)
        config, which = agent_file(tmp)
        listing(tmp / "home-warm-up", config)
        for n in range(args.samples):
            home = tmp / f"home-{n}"
            figures["serial"].append(asyncio.run(one_after_another(config)))
            figures["cold"].append(listing(home, config))
            figures["warm"].append(listing(home, config))
            figures["floor"].append(listing(tmp / "home-warm-up", None))
    s, cold, warm, floor = (statistics.median(figures[k]) for k in ("serial", "cold", "warm", "floor"))
    print(f"tether agents with {AGENTS} ACP agents ({which}), {os.cpu_count()} cores, median of {args.samples}:")
    print(f"  one after another, in this process (the listing before; no process start): {s:.2f} s")
    print(f"  cold, a new process, every agent asked side by side: {cold:.2f} s ({cold / s:.2f}x one after another)")
    print(f"  warm, every answer kept: {warm:.2f} s ({warm / cold:.2f}x cold); "
          f"no agent file (the command's start-up): {floor:.2f} s (warm is {warm / floor:.2f}x that)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
