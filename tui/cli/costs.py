"""``tether prices``: what a model's tokens cost and where the price comes from
(docs/costs.md). The agent file's ``[prices]``, else genai-prices' bundled data, else
"price unknown"."""

from __future__ import annotations

import argparse
import asyncio
import json

from tether.tui.cli import context


async def prices(args: argparse.Namespace) -> int:
    """``tether prices [MODEL] [--base-url URL] [--json]``."""
    from tether.run.prices import explain

    config = context.config(args)
    if args.model:
        asked = [(args.model, args.base_url)]
    elif config is not None:
        asked = []
        for name in config.names:
            entry = config.data.agents[name]
            if entry.model and (entry.model, entry.base_url) not in asked:
                asked.append((entry.model, entry.base_url))
        asked += [(model, None) for model in (*config.data.prices, *config.data.pricing)
                  if all(model != m for m, _ in asked)]
    else:
        print("give a model (tether prices MODEL), or an agent file with agents (--config FILE)")
        return 2
    answers = await asyncio.to_thread(lambda: [explain(model, config, url) for model, url in asked])
    if args.json:
        print(json.dumps([answer.to_dict() for answer in answers]))
    else:
        for answer in answers:
            print(answer.words())
    return 0


COMMANDS = {"prices": prices}
