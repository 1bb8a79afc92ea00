"""docs/architecture.md's picture of the console is the console's tree: every folder and
module its "The console" section names is in tui/, and every one in tui/ is named there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TUI = REPO / "tui"
NAME = re.compile(r"`([a-z_/]+(?:/|\.py))`")
PACKAGE_BULLET = re.compile(r"^- `([a-z_]+)/`")


def section() -> list[str]:
    text = (REPO / "docs" / "architecture.md").read_text()
    return text.split("## The console (`tui/`, `tether.tui`)", 1)[1].split("\n## ", 1)[0].splitlines()


def named(lines: list[str]) -> tuple[set[str], set[str]]:
    """The packages and modules the section's list names, as paths under tui/. A module is
    named in the bullet of its folder (``- `state/`: ... `model.py```), else from tui/; the
    prose between lists (why cli/ is where it is) names no part."""
    packages: set[str] = set()
    modules: set[str] = set()
    folder: str | None = None  # None: not in the list
    for line in lines:
        if line.startswith("- "):  # a top-level bullet: a folder's, or the top of tui/
            match = PACKAGE_BULLET.match(line)
            folder = f"{match.group(1)}/" if match else ""
        elif not line.startswith(" "):
            folder = None
        if folder is None:
            continue
        for name in NAME.findall(line):
            if name.endswith("/"):
                packages.add(name.rstrip("/"))
            else:
                modules.add(name if "/" in name else folder + name)
    return packages, modules


def test_the_console_section_names_the_tree_of_tui() -> None:
    packages, modules = named(section())
    tree_packages = {path.parent.relative_to(TUI).as_posix() for path in TUI.glob("*/__init__.py")}
    tree_modules = {path.relative_to(TUI).as_posix() for path in TUI.rglob("*.py")
                    if path.name != "__init__.py" and path.relative_to(TUI).parts[0] != "cli"}
    assert packages == tree_packages
    assert modules == tree_modules


def test_a_module_is_read_in_the_folder_of_its_bullet() -> None:
    """``model.py`` in the widgets' bullet is widgets/model.py, not state/model.py; the prose
    after the list names nothing."""
    lines = ["- `widgets/`: `model.py`", "- `state/`: `rows.py`", "  `text.py`", "- `app.py`",
             "", "`core/` and `tui/` are two folders."]
    assert named(lines) == ({"widgets", "state"}, {"widgets/model.py", "state/rows.py", "state/text.py", "app.py"})
