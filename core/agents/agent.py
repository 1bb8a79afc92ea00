"""Agents: everything a process needs to run a run, and nothing that is saved.

An :class:`Agent` names a model and its endpoint, the tools it is offered (plain
functions, built-ins, MCP servers), its instructions, prices and stop conditions. A run
saves only an :class:`~tether.vocab.state.AgentRef`: the agent's name, the file it came from,
a fingerprint of its tools and instructions, and its definition *by reference*
(``module:function`` for tools and stop conditions, the variable that holds the API key,
never the key). So any process, the CLI, a console or a worker on another host, can
rebuild the agent that a run was started with, and says in words when it cannot: a tool
that is gone or whose schema changed refuses the operation before anything is used up.

References resolve with the agent file's folder and the current directory on the
import path (``tether:NAME`` names a built-in tool).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from tether.vocab.state import AgentRef, Limits, Policies, Pricing, RunState
from tether.agents.tools.base import Tool
from tether.agents.tools.builtin import DeleteFile, ListFiles, ReadFile, WriteFile
from tether.agents.mcp.server import MCPServer
from tether.agents.subagent import ResearchTool

DEFAULT_INSTRUCTIONS = (
    "You are an agent working on a folder of files through tools. Use the tools to find "
    "out what you need, then answer the user in one or two sentences."
)

StopCondition = Callable[[RunState], "str | None"]
"""Given the run so far, a reason to stop it (it ends ``interrupted``), or None to go on."""
ErrorFormatter = Callable[[BaseException, str], str]
"""Given a tool's exception and the tool's name, the text the model reads instead."""
ToolLike = Tool | Callable[..., Any] | str


class AgentError(ValueError):
    """An agent that cannot be built or rebuilt; the message says what and how to fix it."""


def _builtin_tools() -> dict[str, Callable[[], Tool]]:
    return {"list_files": ListFiles, "read_file": ReadFile, "write_file": WriteFile, "delete_file": DeleteFile,
            "research": ResearchTool}


FILE_TOOLS = frozenset({"list_files", "read_file", "write_file", "delete_file"})
"""The built-in tools that work on the agent's workspace (so it must have one)."""


# ---- references: "module:function" ------------------------------------------------

def resolve_ref(ref: str, *, roots: Iterable[str | Path] = ()) -> Any:
    """The object ``module:attribute`` names (``tether:NAME`` is a built-in tool).

    The module is imported with ``roots`` and the current directory on the import path,
    where a user's tool modules live."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise AgentError(f"{ref!r} is not a reference: write module:function, e.g. mytools:get_ticket")
    if module_name == "tether":
        builtins = _builtin_tools()
        if attr not in builtins:
            raise AgentError(f"tether has no built-in tool {attr!r}; the built-in tools are: "
                             + ", ".join(sorted(builtins)))
        return builtins[attr]()
    if module_name == "__main__":
        raise AgentError(f"{ref} was defined in the program that started the run, which another process "
                         "cannot import: move it to a module")
    for root in [*map(str, roots), os.getcwd()]:
        if root not in sys.path:
            sys.path.insert(0, root)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            where = ", ".join(dict.fromkeys([*map(str, roots), os.getcwd()]))
            raise AgentError(f"no module named {module_name!r} (looked in {where}): "
                             "check the name, or run from the folder that holds it") from None
        raise AgentError(f"importing {module_name} failed: {exc}") from exc
    except Exception as exc:  # the user's module raised while importing
        raise AgentError(f"importing {module_name} failed: {type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AgentError(f"module {module_name} has no {attr!r}") from None
    return obj


def ref_of(obj: Any) -> str | None:
    """How to name ``obj`` so that :func:`resolve_ref` gives it back, or None (a lambda,
    a nested function). A function of ``__main__`` gets a reference that only this
    process can use, so another process says so instead of guessing."""
    target = getattr(obj, "__wrapped__", obj)
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        return None
    return f"{module}:{qualname}"


def as_tool(obj: ToolLike, *, roots: Iterable[str | Path] = ()) -> Tool:
    """A tool from what an agent lists: a tool, a tool class, a plain function, or a reference."""
    ref: str | None = None
    if isinstance(obj, str):
        ref = obj
        obj = resolve_ref(obj, roots=roots)
    if isinstance(obj, Tool):
        tool = obj
        if tool.ref is None and "ref" not in vars(tool):  # a Tool subclass's instance: saved as its class
            tool.ref = ref_of(type(tool))
    elif inspect.isclass(obj) and issubclass(obj, Tool):
        tool = obj()
        if tool.ref is None:
            tool.ref = ref_of(obj)
    elif callable(obj) and not inspect.isclass(obj):
        # lazy: pydantic, for a function tool alone: tether agents and tether rules list the
        # built-in tools without it (tests/processes/test_cold_start.py)
        from tether.agents.tools.function import function_tool

        try:
            tool = function_tool(obj)
        except TypeError as exc:
            raise AgentError(f"{ref or ref_of(obj) or obj!r} is not a valid tool: {exc}") from None
    else:
        raise AgentError(f"{ref or obj!r} is not a tool: expected a function, a @tether.tool or a Tool, "
                         f"got {type(obj).__name__}")
    if ref is not None:
        tool.ref = ref
    return tool


def as_callable(obj: Callable[..., Any] | str, what: str, roots: Iterable[str | Path] = ()) -> Callable[..., Any]:
    """A stop condition or an error formatter: a callable, or a reference to one."""
    if isinstance(obj, str):
        obj = resolve_ref(obj, roots=roots)
    if not callable(obj):
        raise AgentError(f"the {what} {obj!r} is not callable")
    return obj


def _schema_hash(tool: Tool) -> str:
    """A tool as the model and the approval policy see it: schema, read-only, approval."""
    shape = {"schema": tool.schema(), "read_only": tool.read_only, "needs_approval": tool.needs_approval}
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def tool_hashes(tools: Iterable[Tool]) -> dict[str, str]:
    return {tool.name: _schema_hash(tool) for tool in tools}


def fingerprint(instructions: str, hashes: Mapping[str, str]) -> str:
    data = json.dumps({"instructions": instructions, "tools": dict(sorted(hashes.items()))}, sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def changed_tools(saved: AgentRef, tools: Mapping[str, Tool]) -> list[str]:
    """What changed since the run was made, in words: tools gone, or with another schema
    or policy. Tools added since are no reason to refuse (the model may use them)."""
    now = tool_hashes(tools.values())
    problems = [f"tool {name} is gone" for name in saved.tools if name not in now]
    problems += [f"tool {name} changed (its schema or approval policy is not the one the run was made with)"
                 for name, digest in saved.tools.items() if name in now and now[name] != digest]
    return problems


# ---- an agent that speaks ACP -----------------------------------------------------------

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class AcpCommand:
    """An agent process that speaks the Agent Client Protocol (OpenCode, Qwen Code, Gemini
    CLI...): Tether starts ``argv`` and drives its session instead of its own loop.

    ``env`` is added to the agent's environment. A value may name variables of Tether's
    own environment (``"${OPENAI_API_KEY}"``): a run saves the value as written, never what
    it stood for, and what came from the environment is redacted like an API key.
    ``cancel_grace_s`` is how long a Stop waits for the agent to end its turn before its
    process group is killed. ``tell_rejections``: ACP has no field for why a call was
    rejected, so the operator's words go in as the next prompt of the same session.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cancel_grace_s: float = 5.0
    tell_rejections: bool = True
    fs: bool = True
    """Whether the client's ``fs/*`` is offered (Gemini CLI cannot create a file through it)."""
    mode: str | None = None
    """A session mode set with ``session/set_mode`` after ``session/new`` (Codex: ``auto``)."""
    model: str | None = None
    """The agent file's ``model``, chosen with ``session/set_config_option`` where the agent lists
    a model option (:mod:`tether.acp.config`)."""

    def __post_init__(self) -> None:
        if self.mode is not None and (not isinstance(self.mode, str) or not self.mode.strip()):
            raise AgentError("mode must name one of the agent's session modes, such as \"auto\"")
        if not self.argv or not all(isinstance(a, str) and a for a in self.argv):
            raise AgentError("acp must be the agent's command and its arguments, such as [\"opencode\", \"acp\"]")
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "env", dict(self.env))

    def resolved_env(self) -> tuple[dict[str, str], tuple[str, ...]]:
        """The environment to add, with ``${VAR}`` filled in from this process's, and the
        values that came from it (secrets). A variable that is not set is an error in words."""
        out: dict[str, str] = {}
        secrets: list[str] = []
        for key, template in self.env.items():
            def fill(match: re.Match[str]) -> str:
                name = match.group(1)
                if name not in os.environ:
                    raise AgentError(f"env.{key} names ${{{name}}}, which is not set in Tether's environment")
                secrets.append(os.environ[name])
                return os.environ[name]

            out[key] = _ENV_REF.sub(fill, template)
        return out, tuple(s for s in secrets if s)

    def spec(self) -> dict[str, Any]:
        return {"argv": list(self.argv), "env": dict(self.env), "cancel_grace_s": self.cancel_grace_s,
                "tell_rejections": self.tell_rejections, "fs": self.fs, "mode": self.mode}


# ---- a workspace of each run's own -------------------------------------------------------

ISOLATIONS = ("none", "worktree", "copy")


@dataclass(frozen=True, slots=True)
class Isolation:
    """Whether each run of the agent works in a workspace of its own (:mod:`tether.workspaces`).

    ``kind``: ``"none"`` (the runs share the agent's folder), ``"worktree"`` (a git worktree
    on the branch ``tether/RUN_ID``, from ``base``, a ref: the current HEAD by default), or
    ``"copy"`` (a copy of a folder that is not a repository). ``setup``: shell commands run in
    the new workspace before the agent starts. ``checks``: commands a merge runs first."""

    kind: Literal["none", "worktree", "copy"] = "none"
    base: str | None = None
    setup: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    ignored: bool = False
    """Checkpoints take the workspace's ignored files too (agent file: ``checkpoint_ignored``)."""

    def __post_init__(self) -> None:
        if self.kind not in ISOLATIONS:
            raise AgentError(f"isolation must be one of {', '.join(ISOLATIONS)}, got {self.kind!r}")
        for what in ("setup", "checks"):
            commands = getattr(self, what)
            if isinstance(commands, str) or not all(isinstance(c, str) and c.strip() for c in commands):
                raise AgentError(f"{what} must be a list of shell commands, such as [\"make deps\"]")
            object.__setattr__(self, what, tuple(commands))
        if self.base is not None and (not self.base.strip() or self.base.startswith("-")):
            raise AgentError(f"base must name a commit, a branch or a tag, got {self.base!r}")

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind, "base": self.base, "setup": list(self.setup), "checks": list(self.checks),
                "ignored": self.ignored}


# ---- the agent ----------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Agent:
    """A model, its endpoint and the tools it is offered, with the rules of its runs.

    ``tools`` takes plain functions (made into tools from their type hints), tools made
    with :func:`tether.tool`, built-in :class:`~tether.agents.tools.base.Tool` objects, or
    ``module:function`` references. ``base_url=None`` is the embedded scripted provider.
    ``api_key_env`` names the variable that holds the key: the key itself is never saved.
    ``pricing=None`` is the assumed default price. ``stop_when`` and ``error_formatter``
    are saved with each run by reference, so they must be module-level functions for a
    run to be resumed by another process. ``prompt`` is the task when none is given.
    """

    name: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    instructions: str = DEFAULT_INSTRUCTIONS
    tools: Sequence[ToolLike] = ()
    mcp_servers: Sequence[MCPServer] = ()
    limits: Limits = field(default_factory=Limits)
    policies: Policies = field(default_factory=Policies)
    pricing: Pricing | None = None
    stop_when: Sequence[StopCondition | str] = ()
    error_formatter: ErrorFormatter | str | None = None
    workspace: Path | str | None = None
    prompt: str | None = None
    config: Path | None = None
    """The agent file that declares it (set when loaded from one)."""
    source: Literal["demo", "config", "library"] = "library"
    import_roots: tuple[str, ...] = ()
    """Folders put on the import path to resolve its references (the agent file's folder)."""
    acp: AcpCommand | None = None
    """An ACP agent's command: its runs are driven by that process, with its own tools."""
    sandbox: Literal["workspace"] | None = None
    """``"workspace"``: the processes started for its runs (an ACP agent, MCP servers) may write
    only the workspace, their state folders and a private temp folder (tether.agents.sandbox)."""
    isolation: Isolation = field(default_factory=Isolation)
    """Whether each run works in a workspace of its own (a worktree, a copy) or in ``workspace``."""

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise AgentError("an agent needs a name")
        if not self.model or not isinstance(self.model, str):
            raise AgentError(f"agent {self.name} needs a model")
        if self.sandbox not in (None, "workspace"):
            raise AgentError(f"agent {self.name}: sandbox must be \"workspace\" (or left out), not {self.sandbox!r}")
        if self.acp is not None and (self.tools or self.mcp_servers or self.stop_when or self.base_url):
            raise AgentError(f"agent {self.name} speaks ACP: it brings its own model and tools, so it takes "
                             "no tools, mcp, stop_when or base_url")
        roots = self.import_roots
        tools = tuple(as_tool(t, roots=roots) for t in self.tools)
        seen: set[str] = set()
        for tool in tools:
            if tool.name in seen:
                raise AgentError(f"agent {self.name} has two tools named {tool.name!r}")
            seen.add(tool.name)
        workspace = Path(self.workspace).expanduser() if self.workspace is not None else None
        uses_files = sorted(FILE_TOOLS & seen)
        if uses_files and workspace is None:
            raise AgentError(f"agent {self.name} uses {', '.join(uses_files)} but has no workspace: "
                             "give it the folder those tools may touch (workspace = \"./folder\")")
        if self.isolation.kind != "none":
            if workspace is None:
                raise AgentError(f"agent {self.name} has isolation = {self.isolation.kind!r} but no workspace: "
                                 "give it the folder each run gets its own copy of (workspace = \"./folder\")")
        stops = tuple(as_callable(s, "stop condition", roots) for s in self.stop_when)
        formatter = (None if self.error_formatter is None
                     else as_callable(self.error_formatter, "error formatter", roots))
        for name in {s.name for s in self.mcp_servers if hasattr(s, "name")}:
            if sum(1 for s in self.mcp_servers if s.name == name) > 1:
                raise AgentError(f"agent {self.name} lists the MCP server {name!r} twice")
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "stop_when", stops)
        object.__setattr__(self, "error_formatter", formatter)
        object.__setattr__(self, "workspace", workspace)
        object.__setattr__(self, "mcp_servers", tuple(self.mcp_servers))

    # ---- what a run saves ---------------------------------------------------------
    @property
    def tool_list(self) -> tuple[Tool, ...]:
        return self.tools  # type: ignore[return-value]

    def spec(self) -> dict[str, Any]:
        """The agent by reference: enough for another process to rebuild it, no secrets."""
        unsaved = [t.name for t in self.tool_list if not t.ref or t.ref.startswith("__main__:")]
        stops = [ref_of(s) for s in self.stop_when]  # type: ignore[union-attr]
        formatter = ref_of(self.error_formatter) if self.error_formatter is not None else None
        return {
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "instructions": self.instructions,
            "tools": [t.ref for t in self.tool_list if t.name not in unsaved],
            "unsaved": unsaved
            + [f"stop condition {getattr(s, '__qualname__', s)!r}" for s, r in zip(self.stop_when, stops)
               if not r or r.startswith("__main__:")]
            + ([f"error formatter {getattr(self.error_formatter, '__qualname__', '?')!r}"]
               if self.error_formatter is not None and (not formatter or formatter.startswith("__main__:"))
               else []),
            "stop_when": [r for r in stops if r],
            "error_formatter": formatter,
            "mcp": [_mcp_spec(s) for s in self.mcp_servers],
            "workspace": str(self.workspace) if self.workspace is not None else None,
            "prompt": self.prompt,
            "pricing": None if self.pricing is None else {"input_per_million": self.pricing.input_per_million,
                                                            "output_per_million": self.pricing.output_per_million},
            "import_roots": list(dict.fromkeys([*self.import_roots, *self._module_roots(), os.getcwd()])),
            **({"acp": self.acp.spec()} if self.acp is not None else {}),
            **({"sandbox": self.sandbox} if self.sandbox is not None else {}),
            **({"isolation": self.isolation.spec()} if self.isolation.kind != "none" else {}),
        }

    def _module_roots(self) -> list[str]:
        """The import-path folder each referenced module came from, so another process,
        started elsewhere, imports the same modules."""
        objects = [*self.tool_list, *self.stop_when, *([self.error_formatter] if self.error_formatter else [])]
        refs = [getattr(o, "ref", None) or ref_of(o) for o in objects]
        return [root for ref in refs if ref and (root := _import_root(ref.partition(":")[0]))]

    def ref(self, tools: Mapping[str, Tool] | None = None) -> AgentRef:
        """What a run made with this agent remembers. ``tools``: the catalog the run is
        offered (its MCP tools included, once listed); by default the agent's own tools."""
        hashes = tool_hashes((tools or {t.name: t for t in self.tool_list}).values())
        return AgentRef(
            name=self.name,
            source=self.source,
            fingerprint=fingerprint(self.instructions, hashes),
            tools=hashes,
            config=str(self.config) if self.config is not None else None,
            spec=self.spec(),
        )

    @classmethod
    def from_spec(cls, name: str, spec: Mapping[str, Any], *,
                  source: Literal["demo", "config", "library"] = "library") -> "Agent":
        """Rebuild an agent a run saved by reference (:meth:`spec`)."""
        unsaved = list(spec.get("unsaved") or ())
        if unsaved:
            raise AgentError(f"agent {name} cannot be rebuilt in this process: "
                             + ", ".join(map(str, unsaved))
                             + " came from a lambda, a nested function or the program that started the run; "
                             "define them at module level (or in tether.toml) and start a new run")
        servers = []
        for data in spec.get("mcp") or ():
            env = {}
            for key in data.get("env_keys") or ():
                if key not in os.environ:
                    raise AgentError(f"agent {name}: the MCP server {data['name']} needs ${key}, which a run "
                                     "does not save; set it in this process's environment")
                env[key] = os.environ[key]
            kw = {k: v for k, v in data.items() if k != "env_keys"}
            kw["args"] = tuple(kw.get("args") or ())
            servers.append(MCPServer(**kw, env=env))
        pricing = spec.get("pricing")
        acp = spec.get("acp")
        isolation = spec.get("isolation")
        return cls(
            isolation=Isolation() if not isolation else Isolation(
                isolation["kind"], isolation.get("base"), tuple(isolation.get("setup") or ()),
                tuple(isolation.get("checks") or ()), bool(isolation.get("ignored", False))),
            acp=None if acp is None else AcpCommand(tuple(acp["argv"]), dict(acp.get("env") or {}),
                                                    float(acp.get("cancel_grace_s", 5.0)),
                                                    bool(acp.get("tell_rejections", True)),
                                                    bool(acp.get("fs", True)), acp.get("mode")),
            name=name,
            model=spec["model"],
            base_url=spec.get("base_url"),
            api_key_env=spec.get("api_key_env"),
            instructions=spec.get("instructions") or DEFAULT_INSTRUCTIONS,
            tools=list(spec.get("tools") or ()),
            mcp_servers=servers,
            stop_when=list(spec.get("stop_when") or ()),
            error_formatter=spec.get("error_formatter"),
            workspace=spec.get("workspace"),
            prompt=spec.get("prompt"),
            pricing=Pricing(**pricing) if pricing else None,
            import_roots=tuple(spec.get("import_roots") or ()),
            source=source,
            sandbox=spec.get("sandbox"),
        )

    def with_endpoint(self, base_url: str | None) -> "Agent":
        """The same agent asking another endpoint (the scripted provider served over HTTP)."""
        return replace(self, base_url=base_url)

    def describe_tools(self) -> list[dict[str, Any]]:
        """Each local tool with where it comes from and whether it needs approval (``tether agents``)."""
        return [{"name": t.name, "source": t.source, "ref": t.ref, "read_only": t.read_only,
                 "needs_approval": t.needs_approval, "idempotent": t.idempotent} for t in self.tool_list]


def _import_root(module_name: str) -> str | None:
    """The folder on the import path that ``module_name`` was imported from (None for the
    package itself and for modules with no file)."""
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not path or module_name == "__main__" or module_name.split(".")[0] == "tether":
        return None
    root = Path(path).resolve().parent
    depth = module_name.count(".") + (1 if Path(path).name == "__init__.py" else 0)
    for _ in range(depth):
        root = root.parent
    return str(root)


def _mcp_spec(server: MCPServer) -> dict[str, Any]:
    """An MCP server as a run saves it: its environment by name only (it may hold secrets)."""
    out: dict[str, Any] = {}
    for f in fields(server):  # type: ignore[arg-type]
        value = getattr(server, f.name)
        if f.name == "env":
            out["env_keys"] = sorted(value)
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = value
    return out
