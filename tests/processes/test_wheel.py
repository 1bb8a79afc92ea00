"""The wheel a user installs: ``python -m build`` makes one from the checkout that installs
into a clean venv, and from that venv, away from the checkout, ``tether --help``, ``tether
run plan`` and the console work: the tokenizer's rank file, the TCSS and the demo data are
all inside the wheel.

One build and one install serve the session, whichever xdist workers run these tests (they
are their slow part, most of it pip). The build runs without isolation, with the test extra's
setuptools, wheel and build, on a copy of the checkout's files, so nothing is written into the
checkout and no stale ``build/`` there can leak into the wheel.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO, Terminal, processes_with


CAP_S = 120.0  # the cap on any one step; none is timed


@dataclass
class Installed:
    wheel: Path
    source: Path  # the copy of the checkout the wheel was built from
    venv: Path
    home: Path  # TETHER_HOME
    cwd: Path  # where the commands run: outside the checkout

    def env(self, **extra: str) -> dict[str, str]:
        """This environment without anything that could lead Python back to the checkout
        (PYTHONPATH, the test venv) or to the operator's own runs (TETHER_*)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTHON", "TETHER_")) and k != "VIRTUAL_ENV"}
        return {**env, "TETHER_HOME": str(self.home), **extra}

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, cwd=self.cwd, env=self.env(), timeout=CAP_S)


def _checked(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=600)
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def _build_and_install(root: Path) -> None:
    # What a clean clone holds, plus files not yet added (git's ignore rules leave out .venv,
    # build/, *.egg-info and the like).
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, cwd=REPO, check=True).stdout
    source = root / "source"
    for name in filter(None, listed.split("\0")):
        file = REPO / name
        if file.is_file():  # a tracked file deleted in the work tree is listed too
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes(file.read_bytes())
    _checked([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(root / "dist")], source)
    venv = root / "venv"
    # A venv without pip of its own, installed into by this pip (--python): the same resolve
    # and install of the wheel and every dependency, without seeding pip into the venv first.
    _checked([sys.executable, "-m", "venv", "--without-pip", str(venv)], root)
    [wheel] = (root / "dist").glob("tether-*.whl")
    _checked([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", str(wheel)],
             root)
    (root / "installed").touch()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """One build and install for the session: under xdist, whichever worker comes first makes
    them in the session's shared temporary folder while the others wait on its lock, then each
    worker has a home and a folder of its own beside them."""
    mine = tmp_path_factory.mktemp("wheel")
    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else mine
    root = shared / "wheel-installed"
    with open(shared / "wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (root / "installed").exists():
            shutil.rmtree(root, ignore_errors=True)  # a build cut short by a failure is made again
            root.mkdir()
            _build_and_install(root)
    [wheel] = (root / "dist").glob("tether-*.whl")
    (mine / "elsewhere").mkdir()
    return Installed(wheel=wheel, source=root / "source", venv=root / "venv", home=mine / "home",
                     cwd=mine / "elsewhere")


def test_the_wheel_holds_every_file_of_the_package(installed: Installed) -> None:
    """Every file under core/ (the ``tether`` package) and tui/ (``tether.tui``) in the checkout
    is in the wheel, where the package's name puts it: the modules of every folder, the rank
    file, the sample workspace, the SQL, the TCSS, py.typed."""
    wanted = set()
    for folder, package in (("core", "tether"), ("tui", "tether/tui")):
        root = installed.source / folder
        wanted |= {f"{package}/{p.relative_to(root).as_posix()}" for p in root.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts}
    with zipfile.ZipFile(installed.wheel) as zf:
        held = set(zf.namelist())
    assert wanted - held == set()
    for name in ("tether/data/o200k_base.tiktoken", "tether/data/sample/errors.log", "tether/tui/app.tcss",
                 "tether/py.typed", "tether/store/postgres/store.py", "tether/tui/cli/__main__.py"):
        assert name in held


def test_the_installed_cli_runs_the_plan_demo(installed: Installed) -> None:
    python = installed.venv / "bin" / "python"
    where = installed.run(str(python), "-c", "import tether, tether.tui.app; print(tether.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.venv), where.stdout
    assert not Path(where.stdout.strip()).is_relative_to(REPO)

    tether = str(installed.venv / "bin" / "tether")
    helped = installed.run(tether, "--help")
    assert helped.returncode == 0, helped.stderr
    for command in ("console", "run", "runs", "show", "provider"):
        assert re.search(rf"^\s+{command}\s", helped.stdout, re.M), helped.stdout

    # The scripted model reads the sample workspace (copied from the wheel) and counts its
    # tokens with the shipped rank file.
    ran = installed.run(tether, "run", "plan")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "status=completed" in ran.stdout
    assert "answer: errors.log mentions a timeout: worker 7 timed out after 30000 ms." in ran.stdout
    assert (installed.home / "workspace" / "errors.log").is_file()


def test_the_installed_console_runs_plan_and_quits_clean(installed: Installed) -> None:
    token = uuid.uuid4().hex  # marks every process of this console, the provider child's too
    env = installed.env(TERM="xterm-256color", MCP_TEST_TOKEN=token)
    term = Terminal([str(installed.venv / "bin" / "tether"), "console", "--start", "plan"],
                    cwd=installed.cwd, env=env, size=(120, 36))
    try:
        # The header and the panes are drawn (the TCSS loaded); plan's run completes with its
        # answer (the sample workspace and the rank file from the wheel were used).
        term.wait_for(r"Tether\s+—", "header")
        term.wait_for(r"✔ completed\s+plan-", "completed plan run in the runs pane")
        term.wait_for(r"errors\.log\s+mentions\s+a\s+timeout", "answer of plan's run")
        alive = processes_with(token)
        assert any("tether.tui.cli provider" in line for line in alive.values()), alive  # the scripted provider's child
        term.send(b"q")
        assert term.wait_exit() == 0, term.text()[-3000:]
        assert processes_with(token) == {}  # nothing left behind
    finally:
        term.close()
