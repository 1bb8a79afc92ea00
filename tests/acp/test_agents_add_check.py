"""``tether agents add NAME`` against a stand-in registry (a folder of packed packages), and
``tether agents --check``: each failure kind in one line with its fix (not installed, wrong
version, no auth, offline, initialize failure), and an agent that works."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acp.conftest import FAKE_AGENT
from tether.models.processes import free_port
from tests.support import cli_here


def pack(registry: Path, tmp: Path, package: str, version: str, mode: str = "normal") -> None:
    """A package named and versioned as Tether pins it, whose program is the fake ACP agent."""
    folder = tmp / f"pkg-{mode}"
    folder.mkdir()
    script = folder / "agent.sh"
    pythonpath = os.environ.get("PYTHONPATH", "")
    script.write_text(f"#!/bin/sh\nPYTHONPATH={pythonpath} exec {sys.executable} {FAKE_AGENT} {mode}\n")
    script.chmod(0o755)
    bin_name = package.rsplit("/", 1)[-1]
    (folder / "package.json").write_text(json.dumps({"name": package, "version": version, "bin": {bin_name: "agent.sh"}}))
    subprocess.run(["npm", "pack", "--pack-destination", str(registry)], cwd=folder, check=True, capture_output=True)


@pytest.fixture
def place(tmp_path: Path, monkeypatch):
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    registry = tmp_path / "registry"
    registry.mkdir()
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TETHER_CONFIG", raising=False)
    return registry, tmp_path / "tether.toml"


def check(config: Path, env: dict | None = None) -> tuple[int, dict]:
    done = cli_here("agents", "--check", "--json", "--timeout", "20", "--config", str(config),
                    env={**os.environ, **(env or {})})
    return done.returncode, {a["name"]: a for a in json.loads(done.stdout)["agents"]}


def test_add_installs_the_pin_and_writes_the_entry_and_check_says_what_is_wrong(tmp_path: Path, place):
    registry, config = place
    pack(registry, tmp_path, "@zed-industries/codex-acp", "0.16.0")
    added = cli_here("agents", "add", "codex", "--registry", str(registry), "--config", str(config))
    assert added.returncode == 0, added.stdout + added.stderr
    assert "installed @zed-industries/codex-acp@0.16.0" in added.stdout
    entry = config.read_text()
    assert '[agents.codex]' in entry and 'OPENAI_API_KEY = "${OPENAI_API_KEY}"' in entry and 'mode = "read-only"' in entry
    assert str(tmp_path / "home" / "agents" / "codex" / "home") in entry, "its own HOME"
    # Codex's built-in OpenAI provider wants a login ("Authentication required", whatever
    # OPENAI_API_KEY holds): the entry's provider reads the key from the variable instead.
    codex_config = (tmp_path / "home" / "agents" / "codex" / "home" / ".codex" / "config.toml").read_text()
    assert 'model_provider = "endpoint"' in codex_config and 'env_key = "OPENAI_API_KEY"' in codex_config
    assert 'base_url = "https://api.openai.com/v1"' in codex_config and "sk-" not in codex_config
    again = cli_here("agents", "add", "codex", "--registry", str(registry), "--config", str(config))
    assert again.returncode == 1 and "already has [agents.codex]" in again.stdout

    # Codex's shell sandbox runs bwrap from PATH: the check only looks it up, so a stub will do
    stub = tmp_path / "stub-bin"
    stub.mkdir()
    (stub / "bwrap").write_text("#!/bin/sh\nexit 0\n")
    (stub / "bwrap").chmod(0o755)
    without = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                              if d and not os.access(os.path.join(d, "bwrap"), os.X_OK))
    code, found = check(config, {"OPENAI_API_KEY": "sk-test", "PATH": f"{stub}{os.pathsep}{without}"})
    assert code == 0 and found["codex"]["ok"], found
    assert found["codex"]["agent"] == "fake-agent" and found["codex"]["initialize_ms"] > 0
    no_bwrap = cli_here("agents", "--check", "--config", str(config),
                        env={**os.environ, "OPENAI_API_KEY": "sk-test", "PATH": without})
    assert no_bwrap.returncode == 1
    assert "  shell sandbox: bwrap is not on PATH: Codex's own shell sandbox needs it, every shell command of " \
           "Codex fails (exit 101) without it; fix: install bubblewrap" in no_bwrap.stdout, no_bwrap.stdout

    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = cli_here("agents", "--check", "--config", str(config), env=env)
    assert done.returncode == 1
    assert "  no auth: env.OPENAI_API_KEY names ${OPENAI_API_KEY}, which is not set" in done.stdout, done.stdout
    assert "fix: export it" in done.stdout

    installed = tmp_path / "home" / "agents" / "codex" / "node_modules" / "@zed-industries" / "codex-acp" / "package.json"
    installed.write_text(installed.read_text().replace('"0.16.0"', '"0.15.0"'))
    code, found = check(config, {"OPENAI_API_KEY": "sk-test", "PATH": f"{stub}{os.pathsep}{without}"})
    [(kind, words)] = [(p["kind"], p["text"]) for p in found["codex"]["problems"]]
    assert kind == "wrong version" and "0.15.0 is installed, Tether pins 0.16.0" in words


def test_check_names_each_failure_kind(tmp_path: Path, place):
    _, config = place
    login = tmp_path / "login.sh"
    login.write_text(f"#!/bin/sh\nPYTHONPATH={os.environ.get('PYTHONPATH', '')} exec {sys.executable} {FAKE_AGENT} auth\n")
    login.chmod(0o755)
    fine = tmp_path / "fine.sh"
    fine.write_text(login.read_text().replace(" auth\n", " normal\n"))
    fine.chmod(0o755)
    closed = free_port()
    config.write_text(
        '[agents.gone]\nacp = ["no-such-agent-anywhere"]\n\n'
        f'[agents.login]\nacp = ["{login}"]\n\n'
        '[agents.notacp]\nacp = ["/bin/false"]\n\n'
        f'[agents.gemini]\nacp = ["{fine}"]\nenv = {{ GOOGLE_GEMINI_BASE_URL = "http://127.0.0.1:{closed}" }}\n')
    code, found = check(config)
    assert code == 1
    kinds = {name: [p["kind"] for p in a["problems"]] for name, a in found.items()}
    assert kinds == {"gone": ["not installed"], "login": ["no auth"], "notacp": ["initialize failure"],
                     "gemini": ["offline"]}, found
    assert "fix: install it, or fix agents.gone.acp" in found["gone"]["problems"][0]["text"]
    assert "needs a login" in found["login"]["problems"][0]["text"]
    assert f"127.0.0.1:{closed} does not answer" in found["gemini"]["problems"][0]["text"]


def test_add_says_in_one_line_what_it_cannot_do(tmp_path: Path, place):
    registry, config = place
    unknown = cli_here("agents", "add", "nosuch", "--config", str(config))
    assert unknown.returncode == 1 and "the known agents are claude, codex, gemini, opencode, qwen" in unknown.stdout
    missing = cli_here("agents", "add", "gemini", "--registry", str(registry), "--config", str(config))
    assert missing.returncode == 1 and "has no google-gemini-cli-0.61.0.tgz" in missing.stdout
    no_npm = cli_here("agents", "add", "gemini", "--config", str(config), env={**os.environ, "PATH": str(tmp_path)})
    assert no_npm.returncode == 1 and "npm is not installed" in no_npm.stdout
    assert len(no_npm.stdout.strip().splitlines()) == 1
    assert not config.exists(), "nothing written when nothing was installed"


def test_check_reports_the_sandbox_the_endpoints_the_model_and_the_features(tmp_path: Path, monkeypatch):
    """Without npm: fake agents in the agent file. One in a sandbox with its endpoint up (its
    features list the sandbox, the endpoint and, as Claude, its usage); one whose model the
    agent does not offer; one whose endpoint (a variable of any name) is down; and the
    sandboxed one again where no sandbox works."""
    import socket

    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TETHER_CONFIG", raising=False)

    def script(mode: str) -> Path:
        path = tmp_path / f"{mode}.sh"
        path.write_text(f"#!/bin/sh\nPYTHONPATH={os.environ.get('PYTHONPATH', '')} exec {sys.executable} "
                        f"{FAKE_AGENT} {mode}\n")
        path.chmod(0o755)
        return path

    closed = free_port()
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(8)
        port = listening.getsockname()[1]
        config = tmp_path / "tether.toml"
        config.write_text(
            f'[agents.claude]\nacp = ["{script("normal")}"]\nsandbox = "workspace"\n'
            f'env = {{ ANTHROPIC_BASE_URL = "http://127.0.0.1:{port}" }}\n\n'
            f'[agents.picky]\nacp = ["{script("sessions")}"]\nmodel = "gpt-9"\n\n'
            f'[agents.down]\nacp = ["{script("normal")}"]\nenv = {{ LLM_ENDPOINT = "http://127.0.0.1:{closed}/v1" }}\n')
        code, found = check(config)
    assert code == 1
    assert found["claude"]["ok"], found["claude"]
    features = found["claude"]["features"]
    assert any(f.startswith("sandbox ") for f in features), features
    assert f"endpoint 127.0.0.1:{port} answers" in features and "usage: usage_update with cost" in features
    [(kind, words)] = [(p["kind"], p["text"]) for p in found["picky"]["problems"]]
    assert kind == "model" and "does not offer the model 'gpt-9'" in words and "fake-small, fake-large" in words
    assert {"loadSession", "session/list", "session/resume", "session/close"} <= set(found["picky"]["features"])
    [(kind, words)] = [(p["kind"], p["text"]) for p in found["down"]["problems"]]
    assert kind == "offline" and f"127.0.0.1:{closed}/v1 does not answer" in words and "LLM_ENDPOINT" in words

    code, found = check(config, {"TETHER_SANDBOX_BACKEND": "nonsense"})
    [(kind, words)] = [(p["kind"], p["text"]) for p in found["claude"]["problems"]]
    assert kind == "sandbox" and "nonsense" in words and 'sandbox = "none"' in words, words
