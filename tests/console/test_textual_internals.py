"""The private Textual APIs the console relies on (tether.tui.textual_internals) exist in
the Textual installed: an upgrade that drops one fails here, by name, not at run time."""

from __future__ import annotations

import importlib

import pytest
from textual.app import App
from textual.screen import Screen

from tether.tui import textual_internals


@pytest.mark.parametrize("use", sorted(textual_internals.USES))
async def test_each_private_textual_api_is_there(use: str) -> None:
    if use.startswith("textual."):
        module, _, name = use.rpartition(".")
        assert hasattr(importlib.import_module(module), name)
        return
    owner, _, name = use.partition(".")
    if owner == "Widget":
        from textual.widget import Widget

        assert callable(getattr(Widget, name, None))
        return
    async with App().run_test() as pilot:  # instance attributes exist on a running screen
        screen: Screen = pilot.app.screen
        assert hasattr(screen, name), f"Screen.{name} is gone from this Textual"
