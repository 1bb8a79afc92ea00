"""An MCP server as an agent declares it (:class:`MCPServer`, checked when made, so that an
agent file's mistake is a worded refusal at load), and the error of one that fails to start.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class MCPServer:
    """An MCP server an agent uses: a program spoken to over stdio, or a URL (streamable HTTP).

    ``env`` is added to the environment Tether runs in. ``trust_annotations``: take the
    server's tool annotations (read-only, destructive, idempotent) as policy; without it
    every tool of the server writes and needs approval. ``startup_timeout_s`` bounds the
    start (spawn, handshake, tool listing).
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    cwd: str | None = None
    url: str | None = None
    trust_annotations: bool = False
    startup_timeout_s: float = 20.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"an MCP server's name must be 1 to 64 letters, digits, '_', '-' or '.' "
                             f"(not starting with '.'), not {self.name!r}")
        who = f"the MCP server {self.name!r}"
        if (self.command is None) == (self.url is None):
            raise ValueError(f"{who} needs exactly one of a command (stdio) or a url (streamable HTTP)")
        if self.command is not None:
            if not isinstance(self.command, str) or not self.command.strip():
                raise ValueError(f"{who}: the command must be a non-empty string")
        if isinstance(self.args, str) or not all(isinstance(a, str) for a in self.args):
            raise ValueError(f"{who}: args must be a list of strings, not {self.args!r}")
        object.__setattr__(self, "args", tuple(self.args))
        if self.url is not None:
            if self.args:
                raise ValueError(f"{who} has a url, so it takes no args")
            if not isinstance(self.url, str) or not re.match(r"https?://[^/\s]+", self.url):
                raise ValueError(f"{who}: the url must start with http:// or https:// and name a host, "
                                 f"not {self.url!r}")
            if self.env or self.cwd is not None:
                raise ValueError(f"{who} has a url: env and cwd apply only to a server Tether starts (a command)")
        if not isinstance(self.env, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()):
            raise ValueError(f"{who}: env must map names to strings")
        object.__setattr__(self, "env", dict(self.env))
        if self.cwd is not None:
            if not isinstance(self.cwd, (str, os.PathLike)):
                raise ValueError(f"{who}: cwd must be a folder path, not {self.cwd!r}")
            object.__setattr__(self, "cwd", os.fspath(self.cwd))
        if not isinstance(self.trust_annotations, bool):
            raise ValueError(f"{who}: trust_annotations must be true or false")
        timeout = self.startup_timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
                or timeout <= 0:
            raise ValueError(f"{who}: startup_timeout_s must be a positive number of seconds, not {timeout!r}")

    def describe(self) -> str:
        """The command line or the URL, as errors quote it."""
        if self.url is not None:
            return f"url: {self.url}"
        return "command: " + shlex.join([self.command or "", *self.args])


class MCPStartError(Exception):
    """A server failed to start; the message names the server and ends with the tail of its stderr."""

    def __init__(self, message: str, *, server: str, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.server = server
        self.stderr_tail = stderr_tail
