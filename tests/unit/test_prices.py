"""Prices (issue 41, item 1): the agent file's [prices], else genai-prices' bundled data (offline),
else "price unknown" said in words, never a made-up price; ``tether prices`` says which applies."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from tether.agents.config import load_config
from tether.harness import Harness
from tether.observe.report import text_summary
from tether.vocab.prices import explain, price_for
from tests.support import cli_here


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``tether ARGS`` by the CLI's own main in this process (a listing: nothing here is about processes)."""
    return cli_here(*args, cwd=cwd)


def agent_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "tether.toml"
    path.write_text(body)
    return path


def test_a_known_model_is_priced_by_genai_prices_offline(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("a price lookup reached for the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    pricing = price_for("gpt-4o")
    assert pricing.source == "genai-prices" and pricing.ref == "openai:gpt-4o"
    expected = calc_price(Usage(input_tokens=1000, output_tokens=500), model_ref="gpt-4o", provider_id="openai")
    assert pricing.cost(1000, 500) == pytest.approx(float(expected.total_price))
    # A cache read costs what the provider charges for one, not a full input token.
    assert pricing.cost(0, 0, cache_read=1_000_000) == pytest.approx(1.25)


def test_the_agent_files_prices_come_first_and_the_older_pricing_table_still_works(tmp_path):
    path = agent_file(tmp_path, """
[prices."gpt-4o"]
input_per_million = 1.0
output_per_million = 2.0
cache_read_per_million = 0.5

[pricing."my-local"]
input_per_million = 0.2
output_per_million = 0.6
""")
    config = load_config(path)
    mine = price_for("gpt-4o", config)
    assert (mine.source, mine.input_per_million, mine.output_per_million, mine.ref) == ("config", 1.0, 2.0, "")
    assert mine.cost(1_000_000, 1_000_000, cache_read=1_000_000) == pytest.approx(3.5)
    old = price_for("my-local", config)
    assert (old.source, old.input_per_million) == ("config", 0.2)
    assert str(path) in explain("gpt-4o", config).words()


def test_a_bad_price_in_the_agent_file_is_an_error_that_names_the_key(tmp_path):
    path = agent_file(tmp_path, '[prices."gpt-4o"]\ninput_per_million = -1\noutput_per_million = 2\n')
    with pytest.raises(Exception, match="prices.gpt-4o.input_per_million"):
        load_config(path)


async def test_a_model_nobody_prices_is_unknown_its_tokens_counted_and_said_once(harness: Harness):
    async with harness.track("local", "sum it up", model="my-own-finetune") as run:
        await run.usage(1200, 80)
        await run.usage(1300, 90)
        await run.answer("done")
    state = harness.store.load(run.run_id)
    assert state.pricing.unknown and state.cost_usd == 0
    assert (state.prompt_tokens, state.completion_tokens) == (2500, 170)
    words = text_summary(state, 0, 0)
    assert words.count("price unknown for my-own-finetune") == 1 and "$0" not in words
    started = [r for r in harness.store.read_trace(run.run_id) if r["kind"] == "run_started"]
    assert [r.get("price") for r in started] == ["unknown"]  # the trace says it once, where the run starts
    async with harness.track("known", "sum it up", model="gpt-4o-mini") as priced:
        await priced.usage(10, 1)
        await priced.answer("done")
    assert all("price" not in r for r in harness.store.read_trace(priced.run_id))


def test_tether_prices_says_what_applies_and_from_where(tmp_path):
    path = agent_file(tmp_path, """
[agents.cheap]
model = "gpt-4o-mini"
base_url = "https://api.openai.com/v1"

[agents.home]
model = "my-own-finetune"
base_url = "http://127.0.0.1:8080/v1"

[prices."my-own-finetune"]
input_per_million = 0.1
output_per_million = 0.3
""")
    listed = cli("prices", "--config", str(path))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("gpt-4o-mini: $0.15 in / $0.6 out per million tokens") and "genai-prices" in lines[0]
    assert lines[1].startswith("my-own-finetune: $0.1 in / $0.3 out") and str(path) in lines[1]
    unknown = cli("prices", "nobody-sells-this", "--json", cwd=tmp_path)
    assert unknown.returncode == 0, unknown.stderr
    (row,) = json.loads(unknown.stdout)
    assert row["source"] == "unknown" and row["input_per_million"] is None
    said = cli("prices", "nobody-sells-this", cwd=tmp_path).stdout
    assert "price unknown" in said and '[prices."nobody-sells-this"]' in said
