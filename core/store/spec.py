"""Which store a ``--store`` names: the one place that picks an implementation.

Everything else talks to a store through :class:`tether.store.protocol.Store`. Only here is
a spec (a ``--store`` value, ``$TETHER_STORE``, or nothing) turned into the file store
(:mod:`tether.store.files`) or PostgreSQL (:mod:`tether.store.postgres`), each imported when
it is chosen: a command on the file store never imports psycopg, and neither store imports
the other.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from tether.store.files.layout import default_runs_dir
from tether.store.files.quickstop import stop_live

if TYPE_CHECKING:
    from tether.store.files.quickstop import Sent
    from tether.store.protocol import Store

STORE_ENV = "TETHER_STORE"
"""The variable naming the run store when no ``--store`` does: a directory or a URL."""
_PG_SCHEMES = ("postgresql://", "postgres://")


def is_database(spec: str | Path | None) -> bool:
    """``spec`` names a PostgreSQL store (a ``postgresql://`` or ``postgres://`` URL)."""
    return isinstance(spec, str) and spec.lower().startswith(_PG_SCHEMES)


def open_store(spec: str | Path | None = None) -> Store:
    """The run store ``spec`` names: a ``postgresql://``/``postgres://`` URL gives a
    :class:`tether.store.postgres.store.PgStore` (psycopg is imported only then), anything else is a
    directory of the file store. None: ``$TETHER_STORE``, else ``$TETHER_HOME/runs``.

    Nothing is connected here: a server that cannot be reached, or refuses the password,
    is a :class:`tether.store.postgres.connection.StoreUnavailable` (a StateError, in one line,
    without the password) on the first call. A URL of another scheme, or a missing psycopg, is a
    StateError in words."""
    # lazy: tether stop's quick path imports this module before any dataclass (test_cold_start)
    from tether.vocab.state import StateError

    root = files_root(spec)
    if root is not None:
        # lazy: the store is loaded once chosen, never by tether stop's quick path (test_cold_start)
        from tether.store.files.store import RunStore

        return RunStore(root)
    spec = spec or os.environ.get(STORE_ENV)
    if is_database(spec):
        url = str(spec)
        try:
            # lazy: psycopg comes with the [postgres] extra only (test_wheel)
            from tether.store.postgres.store import PgStore
        except ImportError:
            raise StateError("a postgresql:// store needs psycopg: pip install 'tether[postgres]'") from None
        return PgStore(url)
    scheme = str(spec).split("://", 1)[0]
    raise StateError(f"unknown kind of store {scheme}://...: give a directory, or a postgresql:// URL")


def quick_stop(spec: str | Path | None, run_id: str, reason: str, by: str) -> Sent | None:
    """``tether stop``'s first try, before anything else is imported: on the file store ``spec``
    names, the Stop sent straight to the run's process when it lives on this host
    (:mod:`tether.store.files.quickstop`). None on any other store or run: the full path then."""
    root = files_root(spec)
    if root is None:
        return None
    return stop_live(root, run_id, reason, by)


def files_root(spec: str | Path | None = None) -> Path | None:
    """The runs dir of the file store that :func:`open_store` opens for ``spec``, or None when
    ``spec`` names no file store (a database, or a URL of another scheme). It imports no
    store: ``tether stop`` asks it before deciding what to load."""
    if spec is None or spec == "":
        spec = os.environ.get(STORE_ENV) or None
    if spec is None:
        return default_runs_dir()
    if is_database(spec) or "://" in str(spec):
        return None
    return Path(str(spec)).expanduser()

