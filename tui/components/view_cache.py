"""A few rendered views kept per run (least recently shown evicted), so moving the
selection between runs toggles which view is displayed instead of rendering hundreds of
messages or trace lines again."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from textual.widget import Widget

W = TypeVar("W", bound=Widget)


class ViewCache(Generic[W]):
    def __init__(self, container: Widget, factory: Callable[[], W], size: int) -> None:
        self.container = container
        self.factory = factory
        self.size = size
        self.views: OrderedDict[str, W] = OrderedDict()
        self.current: W | None = None

    def get(self, key: str) -> W:
        view = self.views.get(key)
        if view is not None:
            self.views.move_to_end(key)
            return view
        view = self.factory()
        view.display = False
        self.views[key] = view
        self.container.mount(view)
        while len(self.views) > self.size:
            _, old = self.views.popitem(last=False)
            if old is self.current:
                self.current = None
            old.remove()
        return view

    def show(self, key: str) -> W:
        view = self.get(key)
        if self.current is not view:
            previous, self.current = self.current, view
            view.display = True
            if previous is not None:
                had_focus = previous.has_focus
                previous.display = False
                if had_focus:
                    view.focus()
            self.container.refresh(layout=True)  # drop the hidden view's scrollbars from the map
        return view
