"""A package's names, imported from their modules when first used (PEP 562's module
``__getattr__``): ``import tether`` and ``import tether.acp`` pay for pydantic, the MCP SDK or
the ``acp`` package's schema only when a name that needs them is asked for. And what a process
of Tether's own need never import at all (:func:`without_httpx_cli`)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(namespace: dict[str, Any], where: Mapping[str, str]) -> tuple[Callable[[str], Any],
                                                                              Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose globals are ``namespace``:
    each name of ``where`` is imported from the module it maps to at its first use, and is a
    plain attribute of the package from then on."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(namespace["__all__"])

    return __getattr__, __dir__


def without_httpx_cli() -> None:
    """Keep httpx's own command line (click, rich, pygments: a third of httpx's import time)
    from loading with httpx, which no process of Tether's uses. Marked absent, it is not
    imported, and ``httpx.main`` becomes httpx's stub that asks for its ``cli`` extra. For the
    entry points of Tether's processes only (the ``tether`` command, a Claude Code hook): a
    library must not take a module away from the program that imports it."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
