"""``tether agents add NAME`` and ``tether agents --check`` (:mod:`tether.agents.install`,
:mod:`tether.acp.doctor`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from tether.tui.cli import context
from tether.agents.configfile import find_config
from tether.acp.doctor import check_agents
from tether.agents.install import InstallError, KNOWN, add
from tether.harness import tether_home
from tether.vocab.text import clean


async def add_or_check(args: argparse.Namespace) -> int:

    if args.action == "add":
        if not args.agent_name:
            print(f"tether agents add: name an agent: {', '.join(KNOWN)}")
            return 2
        config = find_config(getattr(args, "config", None)) or Path("tether.toml")
        started = time.perf_counter()
        try:
            text = await asyncio.to_thread(add, args.agent_name, tether_home(), config, registry=args.registry,
                                           base_url=args.base_url)
        except InstallError as exc:
            print(clean(f"tether agents add: {exc}"))
            return 1
        known = KNOWN[args.agent_name]
        print(clean(f"installed {known.package}@{known.version} in {time.perf_counter() - started:.1f} s; "
                    f"added [agents.{args.agent_name}] to {config}:"))
        print(clean(text.rstrip()))
        print(clean(f"set {known.key} in Tether's environment (the file names it, never its value)"))
        return 0

    config = context.config(args)
    if config is None:
        print("no agent file: write ./tether.toml (or give --config FILE), or run tether agents add NAME")
        return 2
    started = time.perf_counter()
    findings = await check_agents(config, args.timeout or 30.0)
    took = time.perf_counter() - started
    if args.json:
        print(json.dumps({"agents": [f.to_dict() for f in findings], "seconds": round(took, 2)}))
    else:
        for found in findings:
            what = f"{found.agent} {found.version}" if found.agent else "not started"
            timing = f", initialize in {found.initialize_ms:g} ms" if found.initialize_ms is not None else ""
            features = f"; features: {', '.join(found.features) or 'none'}" if found.agent else ""
            print(clean(f"{found.name}: {'ok' if not found.problems else 'PROBLEM'} ({what}{timing}){features}"))
            for kind, words in found.problems:
                print(clean(f"  {kind}: {words}"))
        print(f"checked {len(findings)} agent(s) side by side in {took:.1f} s")
    return 0 if all(not f.problems for f in findings) else 1
