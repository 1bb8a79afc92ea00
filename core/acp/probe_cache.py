"""What each ACP agent answered to ``initialize``, kept until its program changes.

``tether agents`` asks every ACP agent what it is; a real agent takes seconds to start
(OpenCode and Qwen Code each took several here), and its answer changes only when the agent
is upgraded. So an answer is kept under ``$TETHER_HOME/cache/acp``, one small JSON file per
key, and the next listing reads it instead of starting the agent.

The key (:func:`fingerprint`) is everything the answer depends on:

- the program the command runs (found on the agent's ``PATH``, links resolved) and every file
  the command names by an absolute path (``node /opt/qwen/cli-entry.js``), each by its size,
  modification and change times and inode. An upgrade writes new files; npm also sets their
  modification time to a fixed date, so that time alone would not tell;
- the command and its arguments, and the environment the agent file adds *as written*
  (``${OPENAI_API_KEY}``, never the value it stands for: nothing derived from a secret is kept);
- the version of the ``acp`` package Tether asks with (another may ask differently), and this
  cache's format.

Only answers are kept: an agent that failed is asked again next time. A command whose program
is not found has no key (the probe says why). A program that runs another one it fetches
(``npx some-agent``) can change under the same key: ``tether agents --refresh`` asks again.
A cache that cannot be read or written is no error: the agent is asked.

Nothing here imports the ``acp`` package (its schema takes a few hundred milliseconds): a
listing whose answers are all kept starts no agent and loads no client.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

from tether.acp.errors import AgentStartError
from tether.acp.events import AgentInfo
from tether.acp.probe import probe
from tether.acp.process import resolve_command
from tether.agents.sandbox import Backend
from tether.store.private import default_home, private_dirs, write_private

CACHE_FORMAT = 1
KEEP = 200
"""Answers kept at most; the oldest written go first (an agent in use is asked again once)."""


def default_folder() -> Path:
    """``$TETHER_HOME/cache/acp``."""
    return default_home() / "cache" / "acp"


async def probe_kept(command: Sequence[str], env: Mapping[str, str] | None, *, written_env: Mapping[str, str],
                     cache: ProbeCache, refresh: bool = False, timeout_s: float | None = None,
                     sandbox: Backend | None = None) -> tuple[AgentInfo, bool]:
    """:func:`~tether.acp.probe.probe`, through ``cache``: the answer kept from an earlier
    probe of the same program, command and ``written_env`` (the agent file's ``env`` as
    written), else a probe whose answer is kept. With ``refresh``, always a probe. Returns the
    answer and whether it was the kept one. The cache's files are read and written off the
    event loop. ``sandbox``: probed in that OS sandbox (an answer kept for it, apart)."""
    key = await asyncio.to_thread(fingerprint, command, written_env, env, sandbox)
    if key is not None and not refresh:
        kept = await asyncio.to_thread(cache.get, key)
        if kept is not None:
            return kept, True
    info = await probe(command, env, timeout_s=timeout_s, sandbox=sandbox)
    if key is not None:
        await asyncio.to_thread(cache.put, key, info)
    return info, False


def fingerprint(command: Sequence[str], written_env: Mapping[str, str], env: Mapping[str, str] | None,
                sandbox: str | None = None) -> str | None:
    """The key of an agent's answer (see the module's text), or None when its program is not
    found. ``written_env`` is the agent file's ``env`` as written; ``env``, the environment added
    for the agent (its ``PATH``, if it sets one, finds the program), is not part of the key."""
    # The PATH the agent is started with (process.agent_environment: the trimmed environment
    # keeps Tether's own PATH, and the agent's env may replace it), without importing acp for it.
    path = (env or {}).get("PATH", os.environ.get("PATH", ""))
    try:
        argv = resolve_command(command, {"PATH": path})
    except AgentStartError:
        return None
    files = [_file(argv[0])]
    if files[0] is None:
        return None
    files += [_file(arg) for arg in argv[1:] if os.path.isabs(arg)]
    blob = json.dumps({"format": CACHE_FORMAT, "acp": _acp_version(), "argv": list(command),
                       "env": sorted(written_env.items()), "files": files,
                       **({"sandbox": sandbox} if sandbox else {})}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _acp_version() -> str:
    try:
        return metadata.version("agent-client-protocol")
    except metadata.PackageNotFoundError:
        return "unknown"


def _file(name: str) -> list[object] | None:
    """A file's identity: its real path, size, times and inode (None: not a file there)."""
    real = os.path.realpath(name)
    try:
        found = os.stat(real)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    return [real, found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino, found.st_dev]


class ProbeCache:
    """The kept answers, one file per key in ``folder`` (made ``0700``, its files ``0600``)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder if folder is not None else default_folder()

    def get(self, key: str) -> AgentInfo | None:
        """The answer kept under ``key``, or None (none kept, or a file that cannot be read)."""
        try:
            data = json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
            if data.get("format") != CACHE_FORMAT:
                return None
            info = dict(data["info"])
            info["auth_methods"] = tuple(info["auth_methods"])
            return AgentInfo(**info)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None

    def put(self, key: str, info: AgentInfo) -> None:
        """Keep ``info`` under ``key`` (replaced whole: a reader sees the old file or the new one),
        then drop the oldest answers beyond :data:`KEEP`."""
        body = json.dumps({"format": CACHE_FORMAT, "info": asdict(info)}).encode()
        with contextlib.suppress(OSError):
            private_dirs(self.folder)
            tmp = self.folder / f".{key}.{os.getpid()}.tmp"
            write_private(tmp, body)
            os.replace(tmp, self.folder / f"{key}.json")
            self._prune()

    def _prune(self) -> None:
        kept: list[tuple[int, Path]] = []
        for path in self.folder.glob("*.json"):
            with contextlib.suppress(OSError):
                kept.append((path.stat().st_mtime_ns, path))
        for _, path in sorted(kept)[:-KEEP]:
            with contextlib.suppress(OSError):
                path.unlink()
