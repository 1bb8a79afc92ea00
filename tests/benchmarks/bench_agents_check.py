"""``tether agents --check`` with five real ACP agents (OpenCode, Qwen Code, Claude, Codex,
Gemini CLI; ``make agents``), cold, against the same checks one agent after another in this
process (the baseline: each agent started and ``initialize``d in turn, without a process start).

The agents run offline against ``tether provider --coding`` (the configs of
``tether.demo.acp`` and ``tether.demo.acp_agents``). The median of the samples; the goal
(issue 40) is five agents in under 10 s cold. No timing is asserted; docs/performance.md
has a run's. Without the real agents it says so and measures nothing.

Run: ``.venv/bin/python -m tests.benchmarks --only agents-check``
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
from tether.demo.acp import launch_opencode, launch_qwen, missing
from tether.demo.acp_agents import launch_claude, launch_codex, launch_gemini, missing_new
from tether.demo.provider.coding import endpoint_process
from tests.benchmarks.peers import scratch_dir

SAMPLES = 3


def agent_file(folder: Path, url: str) -> Path:
    root = url.removesuffix("/v1")
    lines: list[str] = []
    for launch in (launch_opencode(folder / "opencode", url), launch_qwen(folder / "qwen", url),
                   launch_claude(folder / "claude", root), launch_codex(folder / "codex", root),
                   launch_gemini(folder / "gemini", root)):
        lines += [f"[agents.{launch.name}]", f"acp = {json.dumps(launch.command)}",
                  "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in launch.env.items()) + " }",
                  *(["fs = false"] if launch.name == "gemini" else []), ""]
    path = folder / "tether.toml"
    path.write_text("\n".join(lines))
    return path


async def one_after_another(config: Path) -> float:
    agents = load_config(config).agents()
    started = time.perf_counter()
    for agent in agents.values():
        assert agent.acp is not None
        env, _ = agent.acp.resolved_env()
        await probe(agent.acp.argv, env)
    return time.perf_counter() - started


def check(config: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tether.tui.cli", "agents", "--check", "--config", str(config)],
                          capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"tether agents --check found a problem: {done.stdout}{done.stderr}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=SAMPLES)
    args = parser.parse_args(argv)
    why = missing() or missing_new()
    if why:
        print(f"tether agents --check with five real agents: not measured: {why}")
        return 0
    serial, cold = [], []
    with scratch_dir("agents-check") as tmp, endpoint_process() as url:
        config = agent_file(Path(tmp), url)
        check(config)  # warms the agents' own caches and the page cache: not counted
        for _ in range(args.samples):
            serial.append(asyncio.run(one_after_another(config)))
            cold.append(check(config))
    s, c = statistics.median(serial), statistics.median(cold)
    print(f"tether agents --check, five real ACP agents, {os.cpu_count()} cores, median of {args.samples}:")
    print(f"  initialize one after another, in this process: {s:.2f} s")
    print(f"  tether agents --check, a new process, side by side: {c:.2f} s ({c / s:.2f}x one after another; "
          "goal under 10 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
