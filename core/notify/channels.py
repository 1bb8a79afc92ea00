"""``[notify.NAME]`` tables of ``tether.toml``: where notifications go, and which.

```toml
[notify.phone]
kind = "ntfy"                      # webhook | ntfy | slack
url = "https://ntfy.example.com"   # ntfy: the server (topic below, or as the URL's path)
topic = "${NTFY_TOPIC}"
priority = "high"                  # ntfy: min, low, default, high, max (or 1-5)
events = ["approval", "failed", "orphaned"]   # also budget, completed
agents = ["triage"]                # only these agents' runs (default: all)
tools = ["delete_file"]            # approvals of these tools only (default: all)
links = "login"                    # or "bearer": the link decides without a login
link_ttl = "1h"
headers = { Authorization = "Bearer ${NTFY_TOKEN}" }
```

Checked when read, like the agents: a wrong kind, a missing URL, an unknown event or key
is an error naming the file and the key. ``${VAR}`` in ``url``, ``topic`` and header
values is filled in from the environment when the file is read (a variable that is not
set is an error), and what it stood for is a secret: never logged, never in a status line.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tether.agents import configfile
from tether.agents.config import ConfigError, find_config
from tether.approvals import RuleError, parse_duration

Kind = Literal["webhook", "ntfy", "slack"]
EVENTS = ("approval", "budget", "failed", "orphaned", "completed")
DEFAULT_EVENTS = ("approval", "failed", "orphaned")
_PRIORITIES = {"min": 1, "low": 2, "default": 3, "high": 4, "max": 5, "urgent": 5}
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    kind: Kind
    url: str = Field(min_length=1)
    events: list[str] = list(DEFAULT_EVENTS)
    agents: list[str] = []
    tools: list[str] = []
    links: Literal["login", "bearer"] = "login"
    link_ttl: str = "1h"
    headers: dict[str, str] = {}
    topic: str | None = None
    priority: int | str | None = None

    @field_validator("events")
    @classmethod
    def _events(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in EVENTS:
                close = difflib.get_close_matches(name, EVENTS, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"the events are {', '.join(EVENTS)}"
                raise ValueError(f"no event {name!r}: {hint}")
        if not value:
            raise ValueError(f"name at least one event ({', '.join(EVENTS)}), or remove the table")
        return value

    @field_validator("link_ttl")
    @classmethod
    def _ttl(cls, value: str) -> str:
        try:
            parse_duration(value)
        except RuleError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("priority")
    @classmethod
    def _priority(cls, value: int | str | None) -> int | str | None:
        if value is None:
            return value
        if isinstance(value, str) and value.lower() not in _PRIORITIES:
            raise ValueError(f"must be one of {', '.join(_PRIORITIES)} or 1-5")
        if isinstance(value, int) and not 1 <= value <= 5:
            raise ValueError("must be 1 (min) to 5 (max)")
        return value


@dataclass(frozen=True)
class NotifyChannel:
    """One ``[notify.NAME]`` table, checked, with its ``${VAR}`` filled in.

    ``secrets`` are the strings never to show: the URL's path and query (a Slack webhook's
    or an ntfy topic's URL is its password), the topic, the header values, and whatever the
    environment filled in."""

    name: str
    kind: Kind
    url: str
    events: frozenset[str]
    agents: frozenset[str] = frozenset()
    tools: frozenset[str] = frozenset()
    links: Literal["login", "bearer"] = "login"
    link_ttl_s: float = 3600.0
    headers: dict[str, str] = field(default_factory=dict)
    topic: str | None = None
    priority: int | None = None
    secrets: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """How logs and status lines name it: ``ntfy 'phone'``."""
        return f"{self.kind} {self.name!r}"

    @property
    def bearer(self) -> bool:
        return self.links == "bearer"

    def wants(self, event: str, agent: str | None, tool: str | None) -> bool:
        """Whether a notice of ``event`` about a run of ``agent`` (and, for an approval, a
        call of ``tool``) goes to this channel. ``tools`` filters the events that are about a
        call (approvals); the others are about the run and pass it."""
        if event not in self.events:
            return False
        if self.agents and agent not in self.agents:
            return False
        return not (self.tools and tool is not None and tool not in self.tools)


def _fill(text: str, where: str, found: list[str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        value = os.environ.get(name)
        if value is None:
            raise ConfigError(f"{where} names ${{{name}}}, which is not set in Tether's environment: set it, "
                              "or write the value")
        found.append(value)
        return value

    return _ENV_REF.sub(one, text)


def _words(path: Path, name: str, exc: ValidationError) -> str:
    error = exc.errors()[0]
    key = f"notify.{name}." + ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        close = difflib.get_close_matches(str(error["loc"][-1]), list(_Entry.model_fields), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(_Entry.model_fields)}"
        return f"{path}: unknown key {key!r}: {hint}"
    if error["type"] == "missing":
        return f"{path}: {key} is missing: add it"
    if error["type"] == "literal_error" and error["loc"][-1] == "kind":
        return f"{path}: {key}: no kind {error.get('input')!r}: use webhook, ntfy or slack"
    got = error.get("input")
    shown = f" (got {got!r})" if not isinstance(got, (dict, list)) else ""
    words = str(error["ctx"]["error"]) if error["type"] == "value_error" else error["msg"].lower()
    return f"{path}: {key}: {words}{shown}"


def _http(url: str, where: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: must be an http:// or https:// URL")


def channel_of(path: Path, name: str, raw: Any) -> NotifyChannel:
    """One table, checked (a :class:`ConfigError` naming the file and the key)."""
    where = f"{path}: notify.{name}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table ([notify.{name}] with kind and url)")
    try:
        entry = _Entry.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_words(path, name, exc)) from None

    found: list[str] = []
    url = _fill(entry.url, f"{where}.url", found)
    _http(url, f"{where}.url")
    headers = {k: _fill(v, f"{where}.headers.{k}", found) for k, v in entry.headers.items()}
    topic = _fill(entry.topic, f"{where}.topic", found) if entry.topic is not None else None
    if entry.kind != "ntfy" and (topic is not None or entry.priority is not None):
        raise ConfigError(f"{where}: topic and priority are ntfy's: remove them, or use kind = \"ntfy\"")
    if entry.kind == "ntfy" and topic is None:
        parts = urlsplit(url)
        segments = [s for s in parts.path.split("/") if s]
        if len(segments) != 1:
            raise ConfigError(f"{where}: ntfy needs a topic: add topic = \"...\", or end the url with it "
                              "(https://ntfy.sh/TOPIC)")
        topic = segments[0]
        url = f"{parts.scheme}://{parts.netloc}/"
    priority = entry.priority
    if isinstance(priority, str):
        priority = _PRIORITIES[priority.lower()]
    parts = urlsplit(url)
    hidden = [s for s in (parts.path if len(parts.path) > 1 else "", parts.query, topic or "", parts.password or "",
                          *headers.values(), *found) if s]
    return NotifyChannel(name=name, kind=entry.kind, url=url, events=frozenset(entry.events),
                         agents=frozenset(entry.agents), tools=frozenset(entry.tools), links=entry.links,
                         link_ttl_s=parse_duration(entry.link_ttl), headers=headers, topic=topic,
                         priority=priority, secrets=tuple(sorted(set(hidden), key=len, reverse=True)))


def load_channels(config_path: Path | str | None = None) -> list[NotifyChannel]:
    """The ``[notify.*]`` tables of the agent file in force (``config_path``, else
    ``$TETHER_CONFIG``, else ``./tether.toml``), checked; none without a file."""
    path = find_config(config_path)
    if path is None:
        return []
    path = Path(path).expanduser().resolve()
    raw = configfile.read_toml(path)
    tables = raw.get("notify", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: notify must be tables, [notify.NAME] with kind and url")
    return [channel_of(path, name, table) for name, table in tables.items()]
