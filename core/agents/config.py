"""Agent files: ``tether.toml`` declares agents, MCP servers and per-model prices.

Found as ``--config FILE``, else ``$TETHER_CONFIG``, else ``./tether.toml``; without
one, the demo agents are all there is. The file's shape is checked with pydantic models
that refuse unknown keys, so a typo is an error that names the file, the key and the
fix, before any run is created, never a setting silently ignored. Paths in the file
(``workspace``, an MCP server's ``cwd``) are relative to the file's folder, and the
folder is on the import path for ``module:function`` references, with the current
directory. An MCP server's ``command = "python"`` is the Python that runs Tether, so a
server installed beside Tether is found however Tether was started.

```toml
[agents.triage]
model = "qwen2.5-7b-instruct"
base_url = "http://127.0.0.1:8080/v1"
api_key_env = "TRIAGE_API_KEY"
instructions = "You triage tickets."
tools = ["mytools:get_ticket", "tether:read_file"]
workspace = "./tickets"
mcp = ["time"]
max_turns = 20
budget_usd = 0.50
stop_when = ["mytools:too_many_errors"]

[mcp.time]
command = "python"
args = ["-m", "mcp_server_time"]
trust_annotations = true

[prices."qwen2.5-7b-instruct"]   # else genai-prices' price, else "price unknown"
input_per_million = 0.20
output_per_million = 0.60
```
"""

from __future__ import annotations

import difflib
import os
import shutil
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tether.agents.agent import DEFAULT_INSTRUCTIONS, AcpCommand, Agent, AgentError, Isolation, as_callable, as_tool
from tether.agents import configfile
from tether.agents.configfile import ConfigError
from tether.vocab.state import Limits, Policies, Pricing
from tether.agents.mcp.server import MCPServer
from tether.agents.sandbox import SandboxUnavailable, available_backend
from tether.agents.workspace import find_repo
from tether.vocab.prices import configured
from tether.vocab.rules import RuleError, parse_duration

find_config = configfile.find_config  # where callers have always found it


# ---- the file's shape ------------------------------------------------------------------

class _Entry(BaseModel):
    # No NaN or infinity: a NaN budget never binds, and neither is JSON in the journal.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _http_url(value: str | None) -> str | None:
    """An endpoint's URL, checked where the file is read, so that a wrong one is an error
    naming the file and the key rather than the first request's."""
    if value is None:
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL, such as http://127.0.0.1:8080/v1")
    return value


class AgentEntry(_Entry):
    model: str | None = Field(default=None, min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None
    instructions: str = DEFAULT_INSTRUCTIONS
    prompt: str | None = None
    tools: list[str] = []
    workspace: str | None = None
    mcp: list[str] = []
    max_turns: int | None = Field(default=Limits().max_turns, ge=1)
    budget_usd: float | None = Field(default=None, gt=0)
    budget_mode: Literal["soft", "strict", "turns-only"] = "soft"
    max_tokens: int = Field(default=Limits().max_tokens, ge=1)
    tool_errors: Literal["fatal", "generic", "descriptive"] = "descriptive"
    triage: bool = True
    dedupe: Literal["off", "read-only", "all"] = "read-only"
    auto_approve: list[str] = []
    stop_when: list[str] = []
    error_formatter: str | None = None
    # How long a call waits for people (a duration: "10m"), then what happens: it is
    # rejected (the default), the run stops, or someone else is asked (one more deadline).
    decision_deadline: str | None = None
    on_deadline: Literal["reject", "stop", "escalate"] = "reject"

    # An agent that speaks ACP (tether.acp): its command, its environment, its Stop's grace.
    acp: list[str] | None = None
    env: dict[str, str] = {}
    cancel_grace_s: float = Field(default=5.0, gt=0, le=600)
    tell_rejections: bool = True
    fs: bool = True  # offer the client's fs/* (false: the agent writes itself; Gemini CLI)
    mode: str | None = Field(default=None, min_length=1)  # session/set_mode after session/new
    # The processes started for its runs write only the workspace (tether.agents.sandbox).
    sandbox: Literal["workspace", "none"] = "none"

    # A workspace of each run's own (tether.workspaces): a git worktree or a copy of ``workspace``.
    isolation: Literal["none", "worktree", "copy"] = "none"
    base: str | None = Field(default=None, min_length=1)
    setup: list[str] = []
    checks: list[str] = []
    checkpoint_ignored: bool = False  # checkpoints (and rewinds) take ignored files too

    _base_url = field_validator("base_url")(_http_url)

    @field_validator("decision_deadline")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_duration(value)
            except RuleError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("setup", "checks")
    @classmethod
    def _commands(cls, value: list[str]) -> list[str]:
        if not all(command.strip() for command in value):
            raise ValueError("an empty command: write each as a shell command line, such as \"make deps\"")
        return value

    @model_validator(mode="after")
    def _acp_or_model(self) -> "AgentEntry":
        if self.isolation == "none" and (self.base is not None or self.setup or self.checks
                                         or self.checkpoint_ignored):
            keys = [key for key in ("base", "setup", "checks", "checkpoint_ignored") if getattr(self, key)]
            raise ValueError(f"{', '.join(keys)} apply to a run's own workspace: add isolation = \"worktree\" "
                             "(or \"copy\"), or remove them")
        if self.isolation != "none" and self.workspace is None:
            raise ValueError(f"isolation = \"{self.isolation}\" needs the folder each run works on: add "
                             "workspace = \"./folder\"")
        if self.isolation == "copy" and self.base is not None:
            raise ValueError("base names a commit of a repository: a copy starts from the folder as it is; "
                             "remove base, or use isolation = \"worktree\"")
        if self.acp is None:
            if self.model is None:
                raise ValueError("model is missing: add it (or acp = [COMMAND, ...] for an ACP agent)")
            if self.env:
                raise ValueError("env applies to an ACP agent's process only: remove it, or add acp = [...]")
            if self.budget_mode == "turns-only":
                raise ValueError("budget_mode = \"turns-only\" is for an ACP agent that reports no usage: Tether "
                                 "counts this agent's tokens itself; use soft or strict")
            return self
        if not self.acp or not all(self.acp):
            raise ValueError("acp must name the agent's command and its arguments, such as [\"opencode\", \"acp\"]")
        mine = [key for key in ("base_url", "api_key_env", "error_formatter") if getattr(self, key) is not None]
        mine += [key for key in ("tools", "mcp", "stop_when") if getattr(self, key)]
        if mine:
            raise ValueError(f"an ACP agent brings its own model and tools: remove {', '.join(mine)}")
        return self


class MCPEntry(_Entry):
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = None
    trust_annotations: bool = False
    startup_timeout_s: float = Field(default=20.0, gt=0)

    _url = field_validator("url")(_http_url)


class PriceEntry(_Entry):
    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)
    cache_read_per_million: float | None = Field(default=None, ge=0)
    cache_write_per_million: float | None = Field(default=None, ge=0)


class BudgetEntry(_Entry):
    """``[budgets.NAME]``: a fleet budget (tether.approvals.budgets)."""

    agent: str | None = None
    model: str | None = None
    source: str | None = None
    per: Literal["day", "week", "month"] = "day"
    usd: float = Field(gt=0)
    on_exceed: Literal["stop", "refuse", "ask"] = "stop"
    warn_at: float = Field(default=0.8, gt=0, lt=1)

    @model_validator(mode="after")
    def _one_scope(self) -> "BudgetEntry":
        given = [key for key in ("agent", "model", "source") if getattr(self, key) is not None]
        if len(given) > 1:
            raise ValueError(f"a budget covers one agent, one model or one source, not {' and '.join(given)}: "
                             "keep one (or none, for every run)")
        return self


class ConfigFile(_Entry):
    agents: dict[str, AgentEntry] = {}
    mcp: dict[str, MCPEntry] = {}
    prices: dict[str, PriceEntry] = {}  # [prices."MODEL"]; [pricing."MODEL"] is its older name
    pricing: dict[str, PriceEntry] = {}
    budgets: dict[str, BudgetEntry] = {}  # fleet budgets across runs
    # [notify.NAME] tables: checked by tether.notify.channels, where notifications are sent from.
    notify: dict[str, dict[str, Any]] = {}


_FIXES = {
    "missing": "add it",
    "extra_forbidden": "remove it or fix its spelling",
}


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The section model a key sits in, to suggest what was meant."""
    sections: dict[str, type[BaseModel]] = {"agents": AgentEntry, "mcp": MCPEntry, "pricing": PriceEntry,
                                         "prices": PriceEntry, "budgets": BudgetEntry}
    if len(loc) == 1:
        return ConfigFile
    if len(loc) >= 3 and loc[0] in sections:
        return sections[str(loc[0])]
    return None


def _one_line(path: Path, exc: ValidationError) -> str:
    error = exc.errors()[0]
    loc = tuple(error["loc"])
    key = _loc(loc)
    if error["type"] == "extra_forbidden":
        model = _model_at(loc)
        known = sorted(model.model_fields) if model else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
        return f"{path}: unknown key {key!r}: {hint}"
    if error["type"] == "missing":
        return f"{path}: {key} is missing: add it"
    got = error.get("input")
    shown = f" (got {got!r})" if not isinstance(got, (dict, list)) else ""
    # A validator's own words, without pydantic's "Value error, " in front of them.
    words = str(error["ctx"]["error"]) if error["type"] == "value_error" else error["msg"].lower()
    return f"{path}: {key}: {words}{shown}"


# ---- the loaded configuration ----------------------------------------------------------

@dataclass
class Config:
    """An agent file, checked; its agents are built when first asked for (importing
    their tool modules), or all at once by :meth:`agents`."""

    path: Path
    data: ConfigFile
    _built: dict[str, Agent] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.data.agents)

    def pricing(self, model: str) -> Pricing | None:
        """The file's price for ``model`` (``[prices]``, else the older ``[pricing]``), or None."""
        entry = self.data.prices.get(model) or self.data.pricing.get(model)
        return None if entry is None else configured(entry)

    def agent(self, name: str) -> Agent:
        """The agent ``name``, or a :class:`ConfigError` that says what is wrong with it."""
        if name in self._built:
            return self._built[name]
        entry = self.data.agents.get(name)
        if entry is None:
            known = ", ".join(self.names) or "none"
            raise ConfigError(f"{self.path}: no agent {name!r} (agents in this file: {known})")
        agent = self._build(name, entry)
        self._built[name] = agent
        return agent

    def agent_for_run(self, name: str, *, mode: str | None = None, model: str | None = None) -> Agent:
        """The ACP agent ``name`` with a session mode and a model chosen for one run (New run,
        ``tether run --mode/--model``) instead of the file's ``mode`` and ``model``: set on its
        session as the file's would be, and the run is named and priced by that model. A
        ConfigError in words for an agent that is not an ACP agent."""
        agent = self.agent(name)
        if mode is None and model is None:
            return agent
        if agent.acp is None:
            raise ConfigError(f"{self.path}: agent {name} is not an ACP agent: a session mode or model is chosen "
                              "for an ACP agent's session only")
        acp = replace(agent.acp, mode=mode if mode is not None else agent.acp.mode,
                      model=model if model is not None else agent.acp.model)
        if model is None:
            return replace(agent, acp=acp)
        return replace(agent, acp=acp, model=model, pricing=self.pricing(model))

    def agents(self) -> dict[str, Agent]:
        """Every agent, built (the first error raised)."""
        return {name: self.agent(name) for name in self.names}

    def mcp_server(self, name: str, *, where: str) -> MCPServer:
        entry = self.data.mcp.get(name)
        if entry is None:
            known = ", ".join(self.data.mcp) or "none is declared"
            raise ConfigError(f"{self.path}: {where}: no MCP server {name!r}: declare [mcp.{name}] "
                              f"or remove it from the list (servers in this file: {known})")
        cwd = str(self._path(entry.cwd, f"mcp.{name}.cwd")) if entry.cwd else None
        # "python" is the Python that runs Tether, where a server installed beside it is.
        command = sys.executable if entry.command in ("python", "python3") else entry.command
        try:
            return MCPServer(name=name, command=command, args=tuple(entry.args), env=dict(entry.env),
                             cwd=cwd, url=entry.url, trust_annotations=entry.trust_annotations,
                             startup_timeout_s=entry.startup_timeout_s)
        except ValueError as exc:
            raise ConfigError(f"{self.path}: mcp.{name}: {exc}") from None

    def _path(self, value: str, key: str) -> Path:
        if "\0" in value:
            raise ConfigError(f"{self.path}: {key}: {value!r} is not a path (it holds a NUL character)")
        try:
            path = Path(value).expanduser()
        except RuntimeError:  # ~NAME of no user on this machine
            raise ConfigError(f"{self.path}: {key}: {value!r} starts with the home folder of no user here: "
                              "fix the path") from None
        return path if path.is_absolute() else (self.path.parent / path).resolve()

    def _build(self, name: str, entry: AgentEntry) -> Agent:
        where = f"agents.{name}"
        workspace = None
        if entry.workspace is not None:
            workspace = self._path(entry.workspace, f"{where}.workspace")
            if not workspace.is_dir():
                raise ConfigError(f"{self.path}: {where}.workspace: {workspace} is not a folder: "
                                  "create it or fix the path")
        if entry.isolation == "worktree" and workspace is not None:
            if find_repo(workspace) is None:
                raise ConfigError(f"{self.path}: {where}.isolation: \"worktree\" needs a git repository, and "
                                  f"{workspace} is not in one: use isolation = \"copy\", or make it a repository "
                                  "(git init)")
        isolation = Isolation(entry.isolation, entry.base, tuple(entry.setup), tuple(entry.checks),
                              entry.checkpoint_ignored)
        servers = [self.mcp_server(server, where=f"{where}.mcp") for server in entry.mcp]
        limits = Limits(max_turns=entry.max_turns, budget_usd=entry.budget_usd, budget_mode=entry.budget_mode,
                        max_tokens=entry.max_tokens)
        policies = Policies(tool_errors=entry.tool_errors, triage=entry.triage, dedupe=entry.dedupe,
                            auto_approve=list(entry.auto_approve),
                            decision_deadline_s=parse_duration(entry.decision_deadline)
                            if entry.decision_deadline else None, on_deadline=entry.on_deadline)
        roots = (str(self.path.parent),)
        # Resolved here, key by key, so that an error names the key it comes from.
        tools = [self._resolve(lambda r=ref: as_tool(r, roots=roots), f"{where}.tools") for ref in entry.tools]
        stops = [self._resolve(lambda r=ref: as_callable(r, "stop condition", roots), f"{where}.stop_when")
                 for ref in entry.stop_when]
        formatter = (None if entry.error_formatter is None else self._resolve(
            lambda: as_callable(entry.error_formatter, "error formatter", roots), f"{where}.error_formatter"))
        acp = None
        if entry.acp is not None:
            command = self._command(entry.acp[0], f"{where}.acp")
            acp = self._resolve(lambda: AcpCommand((command, *entry.acp[1:]), dict(entry.env),  # type: ignore[index]
                                                   entry.cancel_grace_s, entry.tell_rejections, entry.fs,
                                                   entry.mode, entry.model), f"{where}.acp")
        sandbox = None
        if entry.sandbox == "workspace":
            try:
                available_backend()
            except SandboxUnavailable as exc:
                raise ConfigError(f"{self.path}: {where}.sandbox: {exc}") from None
            sandbox = "workspace"
        model = entry.model or f"acp:{Path(entry.acp[0]).name}" if entry.acp else entry.model
        try:
            return Agent(
                name=name, model=model, base_url=entry.base_url, api_key_env=entry.api_key_env, acp=acp,
                instructions=entry.instructions, tools=tools, mcp_servers=servers, limits=limits,
                policies=policies, pricing=self.pricing(entry.model), stop_when=stops,
                error_formatter=formatter, workspace=workspace, prompt=entry.prompt,
                config=self.path, source="config", import_roots=roots, sandbox=sandbox, isolation=isolation,
            )
        except AgentError as exc:
            raise ConfigError(f"{self.path}: {where}: {exc}") from None

    def _command(self, command: str, key: str) -> str:
        """An agent's command as a path: one with a slash is relative to the file's folder,
        any other is looked for on PATH, now, so that a missing one is this file's error."""
        if "\0" in command:
            raise ConfigError(f"{self.path}: {key}: {command!r} is not a command (it holds a NUL character)")
        found = str(self._path(command, key)) if "/" in command else shutil.which(command)
        if found is None or not os.access(found, os.X_OK) or not Path(found).is_file():
            raise ConfigError(f"{self.path}: {key}: no command {command!r} here: install it, put it on PATH, "
                              "or give its path")
        return found

    def _resolve(self, build: Any, key: str) -> Any:
        try:
            return build()
        except AgentError as exc:
            raise ConfigError(f"{self.path}: {key}: {exc}") from None


def load_config(path: Path | str) -> Config:
    """Read and check an agent file (its shape; agents are built on demand)."""
    path = Path(path).expanduser().resolve()
    raw = configfile.read_toml(path)
    try:
        data = ConfigFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_one_line(path, exc)) from None
    return Config(path, data)
