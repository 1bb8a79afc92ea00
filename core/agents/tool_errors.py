"""What a tool raises when it fails in a way the model may act on.

Below everything that raises them, beside the tools rather than among them: the workspace
(:mod:`tether.agents.workspace`) refuses a path with :class:`PathRefused` for any tool that
names one, and the tools (:mod:`tether.agents.tools`) and the loop that reports their
failures as data read them from here.
"""

from __future__ import annotations

from typing import ClassVar


class ToolError(Exception):
    """A tool failed in a way the model may be able to act on."""

    permanent: ClassVar[bool] = False


class PathRefused(ToolError):
    """A path that would leave the workspace (or is malformed) was refused."""


class NotFound(ToolError):
    pass


class InvalidArguments(ToolError):
    pass


class PermissionDenied(ToolError):
    """No message can fix this: retrying only burns turns."""

    permanent = True
