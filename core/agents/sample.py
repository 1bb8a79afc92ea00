"""The sample files a demo workspace starts with (``access.log``, ``errors.log``,
``notes.txt``, ``secrets.env``), laid out as privately as the store beside them.

The demo's folder is ``$TETHER_HOME/workspace``, next to the runs, whose every folder is
``0700`` and file ``0600`` whatever the umask (:mod:`tether.store.private`); the sample
holds ``secrets.env``, so it is made the same way, with the same helpers. Apart from
:mod:`tether.agents.workspace` because the run reads a workspace and never lays one out (the
run imports no store implementation).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tether.agents.workspace import Workspace
from tether.store.private import private_dirs, write_private


def ensure_sample(root: Path) -> Workspace:
    """Give a missing or empty folder the sample files (a missing folder, and its missing
    parents, ``0700``; the files ``0600``); leave any other folder alone, mode and all (it is
    someone's workspace, not ours to overwrite)."""
    private_dirs(root)
    if not any(root.iterdir()):
        for item in resources.files("tether").joinpath("data", "sample").iterdir():
            write_private(root / item.name, item.read_bytes())
    return Workspace(root)
