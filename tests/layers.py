"""The import contracts of pyproject.toml, checked over the package as it is installed.

core/ is the ``tether`` package and tui/ is ``tether.tui``: two folders make one package, and
grimp (import-linter's graph) reads a package from one folder. So the two are copied into one
tree, as a wheel lays them out, and lint-imports reads that tree. ``make test`` runs this first
(``python -m tests.layers``); tests/unit/test_layers.py shows that a crossed layer fails it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FOLDERS = (("core", "tether"), ("tui", "tether/tui"))


def lay_out(root: Path) -> Path:
    """The Python files of core/ and tui/ under ``root`` as the installed package; returns ``root``."""
    for folder, package in FOLDERS:
        shutil.copytree(REPO / folder, root / package, dirs_exist_ok=True,
                        ignore=lambda _, names: [n for n in names if n == "__pycache__" or
                                                 (not n.endswith(".py") and "." in n)])
    return root


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the repository's contracts, over the package laid out under ``root``."""
    lint_imports = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": str(root)}  # before site-packages: the laid-out copy is imported
    return subprocess.run([str(lint_imports), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
                          capture_output=True, text=True, cwd=root, env=env, timeout=300)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tether-layers-") as tmp:
        done = lint(lay_out(Path(tmp)))
    print(done.stdout + done.stderr, end="")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
