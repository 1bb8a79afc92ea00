"""Which store a ``--store`` names, without opening it: the file store's folder, or a
database's URL. It imports no store and no dataclass: ``tether stop`` asks it first, and sends
its quick Stop from here (:func:`quick_stop`); :mod:`tether.store.spec` opens the store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from tether.store.files.layout import default_runs_dir
from tether.store.files.quickstop import stop_live

if TYPE_CHECKING:
    from tether.store.files.quickstop import Sent

STORE_ENV = "TETHER_STORE"
"""The variable naming the run store when no ``--store`` does: a directory or a URL."""
_PG_SCHEMES = ("postgresql://", "postgres://")


def is_database(spec: str | Path | None) -> bool:
    """``spec`` names a PostgreSQL store (a ``postgresql://`` or ``postgres://`` URL)."""
    return isinstance(spec, str) and spec.lower().startswith(_PG_SCHEMES)


def quick_stop(spec: str | Path | None, run_id: str, reason: str, by: str) -> Sent | None:
    """``tether stop``'s first try, before anything else is imported: on the file store ``spec``
    names, the Stop sent straight to the run's process when it lives on this host
    (:mod:`tether.store.files.quickstop`). None on any other store or run: the full path then."""
    root = files_root(spec)
    if root is None:
        return None
    return stop_live(root, run_id, reason, by)


def files_root(spec: str | Path | None = None) -> Path | None:
    """The runs dir of the file store that :func:`tether.store.spec.open_store` opens for ``spec``, or None when
    ``spec`` names no file store (a database, or a URL of another scheme). It imports no
    store: ``tether stop`` asks it before deciding what to load."""
    if spec is None or spec == "":
        spec = os.environ.get(STORE_ENV) or None
    if spec is None:
        return default_runs_dir()
    if is_database(spec) or "://" in str(spec):
        return None
    return Path(str(spec)).expanduser()
