"""One model call's cost by genai-prices, when it is made: below :mod:`tether.vocab.state`, which
imports it when a run's price is genai-prices' (:mod:`tether.vocab.prices` finds the price)."""

from __future__ import annotations

import datetime as _dt


def priced_call(ref: str, prompt_tokens: int, completion_tokens: int, cache_read: int = 0,
                cache_write: int = 0) -> float | None:
    """One call's cost by genai-prices, at the time it is made (tiers and dated prices apply);
    ``prompt_tokens`` are those not read from or written to a cache. None if it cannot say."""
    provider, _, model = ref.partition(":")
    try:
        # lazy: genai-prices loads pydantic, kept out of tether stop and runs (tests/processes/test_cold_start.py)
        from genai_prices import Usage, calc_price

        usage = Usage(input_tokens=prompt_tokens + cache_read + cache_write, output_tokens=completion_tokens,
                      cache_read_tokens=cache_read or None, cache_write_tokens=cache_write or None)
        got = calc_price(usage, model_ref=model, provider_id=provider,
                         genai_request_timestamp=_dt.datetime.now(_dt.timezone.utc))
    except (ImportError, LookupError, ValueError):
        return None
    return float(got.total_price)
