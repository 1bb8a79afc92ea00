"""What an ACP tool call touches: the files (and lines) it names, and the changes it proposes.

Plain data, below both the event stream (:mod:`tether.acp.events`) and the permission request
(:mod:`tether.acp.permissions`), which each carry them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A file the tool call touches (and the line, when the agent says)."""

    path: str
    line: int | None = None


@dataclass(frozen=True)
class Diff:
    """A proposed or applied change to one file; ``old_text`` None means a new file."""

    path: str
    new_text: str
    old_text: str | None = None
