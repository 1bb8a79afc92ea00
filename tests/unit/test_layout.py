"""The top level the project was specified with: core/ is the ``tether`` package and tui/ is
``tether.tui``, and pyproject.toml lists every package of both, so none is left out of the wheel."""

from __future__ import annotations

import tomllib

from tests.support import REPO


def test_pyproject_lists_every_package_of_core_and_tui() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"tether": "core", "tether.tui": "tui"}
    found = set()
    for folder, package in (("core", "tether"), ("tui", "tether.tui")):
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            found.add(".".join([package, *parts]))
    assert set(config["packages"]) == found


def test_the_top_level_holds_the_two_code_folders_and_no_other_package() -> None:
    packages = {p.name for p in REPO.iterdir() if (p / "__init__.py").exists()}
    assert packages == {"core", "tui"}


def test_no_module_is_over_600_lines_unless_the_architecture_says_why() -> None:
    """A module over 600 lines holds more than one concern, unless docs/architecture.md
    names it under "Modules over 600 lines" with its reason."""
    architecture = (REPO / "docs" / "architecture.md").read_text()
    explained = architecture.split("## Modules over 600 lines", 1)[1].split("\n## ", 1)[0]
    long = {f"{path.relative_to(REPO / folder).as_posix()}": n
            for folder in ("core", "tui") for path in (REPO / folder).rglob("*.py")
            if (n := len(path.read_text().splitlines())) > 600}
    assert {name: n for name, n in long.items() if f"`{name}`" not in explained} == {}
