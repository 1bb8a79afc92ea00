"""The agent file (``tether.toml``): ``tether.agents.config.load_config`` (its shape), each agent
built from it (``Config.agent``: tools, stop conditions, MCP servers, the ACP command, the
workspace), and its ``[notify.*]`` tables (``tether.notify.load_channels``).

The rule: any file, and any table of almost-right keys and values, is a checked
configuration or a :class:`ConfigError` that names the file; nothing else escapes, so every
command that reads the file refuses it in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from tether.agents.config import AgentEntry, ConfigError, MCPEntry, PriceEntry, load_config
from tether.notify import load_channels

from tests.fuzz.strategies import texts

# Values as TOML has them: strings (paths and references among them), numbers, booleans,
# arrays, tables.
refs = st.one_of(st.sampled_from(["tether:read_file", "tether:list_files", "tether:nope", "tether:", ":x", "x",
                                  "fuzz_no_such_module:f", "json:loads", "json:nope", "__main__:f"]),
                 texts.map(lambda t: "fuzz_no_such_module_" + t))
paths = st.one_of(st.sampled_from([".", "..", "/", "~", "~fuzz_no_such_user/x", "~/x", "./missing", "/dev/null",
                                   "\x00", ""]), texts)
urls = st.one_of(st.sampled_from(["http://127.0.0.1:9/v1", "https://x", "http://[::1", "http://[zz]/", "ftp://x",
                                  "http:///x", "http://a:b@c:99999/", "https://ntfy.sh/topic", "http://${NOPE}/"]),
                 texts)
durations = st.one_of(st.sampled_from(["10m", "1h", "0s", "-1m", "1e400s", "99999999999999999999h", "m", ""]), texts)
toml_scalars = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(), texts, refs, paths, urls,
                         durations)
toml_values = st.recursive(toml_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)), max_leaves=6)


def entries(model: Any) -> st.SearchStrategy[dict[str, Any]]:
    """A table with some of ``model``'s keys (values of any TOML type) and maybe a stray key."""
    keys = sorted(model.model_fields)
    return st.dictionaries(st.one_of(st.sampled_from(keys), texts), toml_values, max_size=6)


# An agent that checks but for its references, paths and commands: what reaches Config.agent.
agents = st.fixed_dictionaries({"model": st.just("m")}, optional={
    "tools": st.lists(refs, max_size=2), "stop_when": st.lists(refs, max_size=1), "error_formatter": refs,
    "workspace": paths, "mcp": st.lists(st.sampled_from(["s", "t"]), max_size=2),
    "decision_deadline": durations, "base_url": urls, "auto_approve": st.lists(texts, max_size=2),
})
acp_agents = st.fixed_dictionaries({"acp": st.lists(st.one_of(paths, st.sampled_from(["sh", "true", "./x"])),
                                                    min_size=1, max_size=3)},
                                   optional={"env": st.dictionaries(texts, texts, max_size=2), "workspace": paths})
servers = st.fixed_dictionaries({}, optional={"command": st.one_of(paths, st.just("python")),
                                              "args": st.lists(texts, max_size=2), "cwd": paths, "url": urls,
                                              "env": st.dictionaries(texts, texts, max_size=1)})
almost_right = st.fixed_dictionaries({"agents": st.dictionaries(st.sampled_from(["a", "b"]),
                                                                st.one_of(agents, acp_agents), max_size=2),
                                      "mcp": st.dictionaries(st.sampled_from(["s", "t"]), servers, max_size=2)})

notify_keys = ["kind", "url", "events", "agents", "tools", "links", "link_ttl", "headers", "topic", "priority"]
files = st.fixed_dictionaries({}, optional={
    "agents": st.dictionaries(texts, entries(AgentEntry), max_size=2),
    "mcp": st.dictionaries(texts, entries(MCPEntry), max_size=2),
    "pricing": st.dictionaries(texts, entries(PriceEntry), max_size=2),
    "notify": st.dictionaries(texts, st.dictionaries(st.one_of(st.sampled_from(notify_keys), texts), toml_values,
                                                     max_size=5), max_size=2),
    "stray": toml_values,
})


def toml(value: Any) -> str:
    """``value`` as TOML (inline tables throughout, so any nesting is one line)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # TOML's basic strings take JSON's escapes (a lone surrogate is refused)
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + "}"


def document(data: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(key)} = {toml(value)}\n" for key, value in data.items())


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agent-file")


def check(path: Path) -> None:
    """Everything a command reads of the agent file: each part a result, or a ConfigError
    naming the file."""
    try:
        config = load_config(path)
    except ConfigError as exc:
        assert str(path.resolve()) in str(exc) or str(path) in str(exc)
    else:
        for name in config.names:
            try:
                config.agent(name)
            except ConfigError as exc:
                assert str(config.path) in str(exc)
        for name in config.data.mcp:
            try:
                config.mcp_server(name, where="fuzz")
            except ConfigError as exc:
                assert str(config.path) in str(exc)
    try:
        load_channels(path)
    except ConfigError as exc:
        assert str(path.resolve()) in str(exc)


@given(files)
def test_any_agent_file_is_checked_or_refused_in_one_line(folder: Path, data: dict[str, Any]) -> None:
    path = folder / "tether.toml"
    path.write_text(document(data), encoding="utf-8", errors="surrogatepass")
    check(path)


@given(almost_right)
def test_almost_right_agents_are_built_or_refused_in_one_line(folder: Path, data: dict[str, Any]) -> None:
    path = folder / "agents.toml"
    path.write_text(document(data), encoding="utf-8", errors="surrogatepass")
    check(path)


@given(st.binary(max_size=200))
def test_any_bytes_are_refused_in_one_line_or_read(folder: Path, data: bytes) -> None:
    path = folder / "bytes.toml"
    path.write_bytes(data)
    check(path)


# ---- bugs the campaign found, kept as regressions -----------------------------------------

@pytest.mark.parametrize("text", [
    "a = " + "[" * 5_000 + "]" * 5_000 + "\n",  # tomllib: RecursionError, not TOMLDecodeError
    "x = " + "{a = " * 2_000 + "1" + "}" * 2_000 + "\n",
], ids=["deep-array", "deep-table"])
def test_found_agent_files_are_refused_in_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "tether.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="tether.toml"):
        load_config(path)
    with pytest.raises(ConfigError, match="tether.toml"):
        load_channels(path)


@pytest.mark.parametrize("table", [
    '[agents.a]\nmodel = "m"\nworkspace = "~fuzz_no_such_user/x"\n',  # Path.expanduser: RuntimeError
    '[agents.a]\nacp = ["~fuzz_no_such_user/x"]\n',
    '[agents.a]\nmodel = "m"\nmcp = ["s"]\n[mcp.s]\ncommand = "x"\ncwd = "~fuzz_no_such_user"\n',
    '[agents.a]\nacp = ["."]\nworkspace = "\\u0000"\n',  # resolve(): ValueError, embedded null byte
    '[agents.a]\nacp = ["sh\\u0000"]\n',
], ids=["workspace", "acp-command", "mcp-cwd", "nul-workspace", "nul-command"])
def test_found_paths_are_refused_in_one_line(tmp_path: Path, table: str) -> None:
    path = tmp_path / "tether.toml"
    path.write_text(table)
    with pytest.raises(ConfigError, match="tether.toml"):
        load_config(path).agent("a")
