"""Workspace: confinement that lets ordinary paths through, the forbidden-file policy,
the listing, and the sample. Hostile paths are tested through the tools in test_tools.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.agents.tool_errors import PathRefused
from tether.agents.sample import ensure_sample
from tether.agents.workspace import Workspace

SAMPLE = {"errors.log", "access.log", "notes.txt", "secrets.env"}


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return ensure_sample(tmp_path / "ws")


def test_ensure_sample_fills_a_missing_folder(tmp_path: Path) -> None:
    ws = ensure_sample(tmp_path / "new" / "ws")
    assert {p.name for p in ws.root.iterdir()} == SAMPLE
    assert (ws.root / "notes.txt").read_text() == "Remember to rotate your logs.\n"
    assert "worker 7 timed out after 30000 ms" in (ws.root / "errors.log").read_text()
    sizes = dict(ws.list_entries())
    assert max(sizes, key=sizes.__getitem__) == "errors.log"
    assert sizes["access.log"] < sizes["errors.log"]


def test_ensure_sample_fills_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    assert {p.name for p in ensure_sample(tmp_path / "ws").root.iterdir()} == SAMPLE


def test_ensure_sample_leaves_a_non_empty_folder_alone(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "mine.txt").write_text("mine")
    before = os.stat(root / "mine.txt")
    ensure_sample(root)
    assert [p.name for p in root.iterdir()] == ["mine.txt"]
    assert (root / "mine.txt").read_text() == "mine"
    assert os.stat(root / "mine.txt").st_mtime_ns == before.st_mtime_ns


def test_resolve_returns_the_real_path_inside(ws: Workspace) -> None:
    assert ws.resolve("notes.txt") == ws.root / "notes.txt"
    assert ws.resolve("./notes.txt") == ws.root / "notes.txt"
    assert ws.resolve("sub/../notes.txt") == ws.root / "notes.txt"
    assert ws.resolve("not-yet.txt") == ws.root / "not-yet.txt"


def test_resolve_follows_a_symlink_that_stays_inside(ws: Workspace) -> None:
    (ws.root / "alias.txt").symlink_to(ws.root / "notes.txt")
    assert ws.resolve("alias.txt") == ws.root / "notes.txt"


def test_root_given_through_a_symlink_is_made_real(tmp_path: Path, ws: Workspace) -> None:
    (tmp_path / "via").symlink_to(ws.root)
    linked = Workspace(tmp_path / "via")
    assert linked.root == ws.root
    assert linked.resolve("notes.txt") == ws.root / "notes.txt"


def test_refusals_are_worded(ws: Workspace) -> None:
    with pytest.raises(PathRefused, match=r"^path refused: '/etc/passwd' is absolute"):
        ws.resolve("/etc/passwd")
    with pytest.raises(PathRefused, match=r"climbs out of the workspace with '\.\.'"):
        ws.resolve("../etc/passwd")


def test_refusal_message_is_escaped_and_short(ws: Workspace) -> None:
    with pytest.raises(PathRefused) as refused:
        ws.resolve("../" + "\x1b[31m" * 100)
    message = str(refused.value)
    assert "\x1b" not in message
    assert len(message) < 200


@pytest.mark.parametrize(
    "name", ["secrets.env", ".env", "prod.env", "SECRETS.ENV", "sub/secrets.env"]
)
def test_env_files_are_forbidden(name: str) -> None:
    assert Workspace.is_forbidden(name)


@pytest.mark.parametrize("name", ["notes.txt", "env", "errors.log", "env.txt"])
def test_other_files_are_not_forbidden(name: str) -> None:
    assert not Workspace.is_forbidden(name)


def test_list_entries_sorted_without_dotfiles_or_escaping_links(
    tmp_path: Path, ws: Workspace
) -> None:
    (ws.root / ".hidden").write_text("x")
    (ws.root / "sub").mkdir()
    (tmp_path / "outside.txt").write_text("outside")
    (ws.root / "out-link").symlink_to(tmp_path / "outside.txt")
    (ws.root / "dangling").symlink_to(ws.root / "gone.txt")
    assert ws.list_entries() == [(n, (ws.root / n).stat().st_size) for n in sorted(SAMPLE)]


def test_list_entries_shows_a_link_that_stays_inside_with_its_target_size(ws: Workspace) -> None:
    target = sorted(SAMPLE)[0]
    (ws.root / "alias.txt").symlink_to(ws.root / target)
    assert ("alias.txt", (ws.root / target).stat().st_size) in ws.list_entries()
