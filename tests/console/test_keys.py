"""The keys docs/console.md documents are the keys the console declares, screen by screen and
dialog by dialog, and the help (F1) lists the console's own (issue 37, item 20: the docs said
``e`` edits a call's arguments where the dialog took only ``ctrl+e``).

A key is declared by a Tether binding (one with an ``id``) of the screen or dialog, or of a
class its table names beside it (the app's ``ctrl+q``, the transcript's ``t``). A table may
also name the few keys Textual's widgets handle themselves (:data:`WIDGET_KEYS`). What the key
bar shows comes from the same bindings, so a key shown there and not documented, or
documented and not there, fails here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.screen import Screen

import tether.tui
from tether.tui.app import TetherApp
from tether.tui.screens.args_editor import ArgsEditor
from tether.tui.screens.costs import CostsScreen
from tether.tui.screens.decisions import DecisionsScreen
from tether.tui.screens.decision import ApproveDialog, RejectDialog
from tether.tui.screens.follow_up import FollowUpDialog
from tether.tui.screens.help import HELP_KEYS, HelpScreen
from tether.tui.screens.new_run import NewRunDialog
from tether.tui.screens.resume import ResumeDialog
from tether.tui.screens.rule_editor import RuleEditor
from tether.tui.screens.rules import ConfirmDialog, RulesScreen
from tether.tui.widgets.transcript import TranscriptView
from tether.tui.screens.workspace import MergeDialog, OutcomeDialog
from tether.tui.screens.console import ConsoleScreen

DOC = Path(__file__).resolve().parents[2] / "docs" / "console.md"

TABLES: dict[str, tuple[type, ...]] = {
    "On the console": (ConsoleScreen, TetherApp, TranscriptView),
    "In the approve and reject dialogs": (ApproveDialog, RejectDialog),
    "In the arguments editor and the rule editor": (ArgsEditor, RuleEditor),
    "On the rules screen": (RulesScreen, ConfirmDialog),
    "On the decisions screen": (DecisionsScreen,),
    "On the costs screen": (CostsScreen,),
    "In the other dialogs": (NewRunDialog, ResumeDialog, FollowUpDialog, HelpScreen, MergeDialog, OutcomeDialog),
}
"""Each key table of docs/console.md (by the start of its heading), and whose keys it lists."""

WIDGET_KEYS = {"enter", "tab", "up", "down", "ctrl+p"}
"""Keys Textual's own widgets handle (Enter in a field or on a row, Tab between widgets, the
arrows in a list, the command palette): documented, declared by no binding of ours."""

NAMES = {"Esc": "escape", "Enter": "enter", "Tab": "tab", "↑": "up", "↓": "down", "←": "left", "→": "right", "/": "slash", "Delete": "delete",
         "F1": "f1", "F5": "f5", "$": "dollar_sign"}


def key_name(written: str) -> str:
    """A key as docs write it (``Esc``, ``F1``, ``↑``) as Textual names it (``escape``, ``f1``, ``up``)."""
    return NAMES.get(written, written)


def doc_tables() -> dict[str, set[str]]:
    """Each ``### heading`` of the page's key tables, with the keys its first column lists."""
    tables: dict[str, set[str]] = {}
    heading = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("### "):
            heading = line[4:]
        elif line.startswith("## "):
            heading = None
        elif heading is not None and line.startswith("| ") and not line.startswith(("| key |", "|---")):
            first = line.split("|")[1]
            tables.setdefault(heading, set()).update(key_name(k) for k in re.findall(r"`([^`]+)`", first))
    return tables


def declared(*classes: type) -> set[str]:
    """The keys of every Tether binding (one with an id) the classes and their bases declare."""
    keys: set[str] = set()
    for cls in classes:
        for klass in cls.__mro__:
            for binding in vars(klass).get("BINDINGS", ()):
                if isinstance(binding, Binding) and binding.id:
                    keys.update(k.strip() for k in binding.key.split(","))
    return keys


def documented(start: str) -> set[str]:
    tables = doc_tables()
    found = [keys for heading, keys in tables.items() if heading.startswith(start)]
    assert len(found) == 1, f"docs/console.md has no one key table under a heading '{start}…': {sorted(tables)}"
    return found[0]


@pytest.mark.parametrize("start", sorted(TABLES))
def test_each_key_table_lists_the_keys_declared_there(start: str) -> None:
    keys, written = declared(*TABLES[start]), documented(start)
    assert not keys - written, f"'{start}': declared but not in docs/console.md: {sorted(keys - written)}"
    assert not written - keys - WIDGET_KEYS, f"'{start}': in docs/console.md but declared nowhere: " \
                                             f"{sorted(written - keys - WIDGET_KEYS)}"


def test_every_screen_and_dialog_of_the_console_has_a_key_table() -> None:
    for module in pkgutil.walk_packages(tether.tui.__path__, "tether.tui."):
        if not module.name.startswith("tether.tui.cli"):  # the CLI's demo captions are no screen
            importlib.import_module(module.name)
    screens: set[type] = set()
    todo = [Screen]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("tether.tui."):
                screens.add(sub)
    abstract = {cls for cls in screens if any(issubclass(other, cls) and other is not cls for other in screens)}
    tabled = {cls for classes in TABLES.values() for cls in classes}
    assert not (screens - abstract) - tabled, sorted(c.__name__ for c in (screens - abstract) - tabled)


def test_the_help_lists_the_console_s_keys() -> None:
    """F1's list, in the console, is the page's: the same keys."""
    in_help = {key_name(k) for key, _ in HELP_KEYS for k in re.split(r"[\s,]+", key) if k}
    assert in_help == documented("On the console")
