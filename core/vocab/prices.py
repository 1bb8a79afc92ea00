"""What a model's tokens cost, and where that price comes from (docs/costs.md).

A run's price is, in this order:

1. the agent file's ``[prices."MODEL"]`` (or the older ``[pricing."MODEL"]``): ``config``;
2. pydantic's ``genai-prices`` for the model (and the provider its endpoint is): its bundled,
   dated data, read offline; each call is priced when it is made, so a tiered or a changed
   price applies as the provider charges it: ``genai-prices``;
3. else the price is ``unknown``: the tokens are counted, the dollars are not, and that is
   said once (the run's header, ``tether show``, ``tether costs``), never a made-up $0.

``genai-prices`` is imported when a price is first looked up (it takes a few hundred ms), never
by a command that prices nothing.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from tether.vocab.state import Pricing

UNKNOWN_HINT = 'add [prices."{model}"] with input_per_million and output_per_million to the agent file'


@dataclass(frozen=True, slots=True)
class PriceAnswer:
    """``tether prices MODEL``: what Tether charges for MODEL and where the price comes from."""

    model: str
    pricing: Pricing
    detail: str

    def to_dict(self) -> dict[str, Any]:
        p = self.pricing
        known = not p.unknown
        return {"model": self.model, "source": p.source, "ref": p.ref or None, "detail": self.detail,
                "input_per_million": p.input_per_million if known else None,
                "output_per_million": p.output_per_million if known else None,
                "cache_read_per_million": p.cache_read_per_million, "cache_write_per_million": p.cache_write_per_million}

    def words(self) -> str:
        p = self.pricing
        if p.unknown:
            return f"{self.model}: price unknown ({self.detail}); tokens are counted, dollars are not: " \
                   + UNKNOWN_HINT.format(model=self.model)
        cache = ""
        if p.cache_read_per_million is not None:
            cache += f", cache read ${p.cache_read_per_million:g}"
        if p.cache_write_per_million is not None:
            cache += f", cache write ${p.cache_write_per_million:g}"
        return (f"{self.model}: ${p.input_per_million:g} in / ${p.output_per_million:g} out per million tokens"
                f"{cache}; from {p.source} ({self.detail})")


def configured(entry: Any) -> Pricing:
    """A price from the agent file's ``[prices]`` or ``[pricing]`` entry."""
    return Pricing(entry.input_per_million, entry.output_per_million, source="config",
                   cache_read_per_million=getattr(entry, "cache_read_per_million", None),
                   cache_write_per_million=getattr(entry, "cache_write_per_million", None))


def provider_of(base_url: str | None) -> str | None:
    """The endpoint's host, for genai-prices to tell providers apart (api.openai.com, ...)."""
    if not base_url:
        return None
    host = urlsplit(base_url).hostname or ""
    return None if host in ("", "localhost") or host.startswith("127.") else base_url


def lookup(model: str, base_url: str | None = None) -> PriceAnswer:
    """genai-prices' price of ``model`` now, else an unknown price. Never the network."""
    found = _lookup(model, provider_of(base_url))
    if found is None:
        return PriceAnswer(model, Pricing(0.0, 0.0, source="unknown"), "not in the agent file nor in genai-prices "
                                                                        f"{_version()}")
    return found


@functools.lru_cache(maxsize=256)
def _lookup(model: str, api_url: str | None) -> PriceAnswer | None:
    try:
        # lazy: genai-prices loads pydantic, kept out of tether stop and runs (tests/processes/test_cold_start.py)
        from genai_prices import Usage, calc_price
    except ImportError:  # pragma: no cover - a dependency; said as unknown if it is missing
        return None
    for url in (api_url, None) if api_url else (None,):
        try:
            got = calc_price(Usage(input_tokens=0, output_tokens=0), model_ref=model, provider_api_url=url)
        except LookupError:
            continue
        mp = got.model_price
        ref = f"{got.provider.id}:{model}"
        pricing = Pricing(_base(mp.input_mtok), _base(mp.output_mtok), source="genai-prices", ref=ref,
                          cache_read_per_million=_base(mp.cache_read_mtok) if mp.cache_read_mtok is not None else None,
                          cache_write_per_million=_base(mp.cache_write_mtok) if mp.cache_write_mtok is not None else None)
        return PriceAnswer(model, pricing, f"genai-prices {_version()}: {got.provider.name}'s {got.model.name}")
    return None


def _base(price: Any) -> float:
    """A per-million price, or a tiered one's first tier (the calls are priced by tier)."""
    if price is None:
        return 0.0
    return float(getattr(price, "base", price))


@functools.lru_cache(maxsize=1)
def _version() -> str:
    """genai-prices' version, from the package :func:`_lookup` imported (None there: it is not
    installed). Not importlib.metadata: loading it at import cost every ``tether`` process's start."""
    package = sys.modules.get("genai_prices")
    return "(not installed)" if package is None else str(getattr(package, "__version__", "(unknown version)"))


def price_for(model: str, config: Any = None, base_url: str | None = None) -> Pricing:
    """The price a run of ``model`` is charged: the agent file's, else genai-prices', else unknown."""
    if config is not None:
        mine = config.pricing(model)
        if mine is not None:
            return mine
    return replace(lookup(model, base_url).pricing)  # a run's own copy: the lookup's is shared


def explain(model: str, config: Any = None, base_url: str | None = None) -> PriceAnswer:
    """``tether prices MODEL``."""
    if config is not None:
        mine = config.pricing(model)
        if mine is not None:
            return PriceAnswer(model, mine, f"{config.path}")
    return lookup(model, base_url)
