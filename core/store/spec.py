"""Which store a ``--store`` names: the one place that picks an implementation.

Everything else talks to a store through :class:`tether.store.protocol.Store`. Only here is
a spec (a ``--store`` value, ``$TETHER_STORE``, or nothing) turned into the file store
(:mod:`tether.store.files`) or PostgreSQL (:mod:`tether.store.postgres`), which is imported
when it is chosen: a command on the file store never imports psycopg, and neither store
imports the other. What a spec names, without opening anything, is :mod:`tether.store.where`'s
(``tether stop`` asks it first).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from tether.vocab.state import StateError
from tether.store.files.store import RunStore
from tether.store.where import STORE_ENV, files_root, is_database

if TYPE_CHECKING:
    from tether.store.protocol import Store

__all__ = ["is_database", "open_store"]


def open_store(spec: str | Path | None = None, *, pool_size: int | None = None) -> Store:
    """The run store ``spec`` names: a ``postgresql://``/``postgres://`` URL gives a
    :class:`tether.store.postgres.store.PgStore` (psycopg is imported only then), anything else is a
    directory of the file store. None: ``$TETHER_STORE``, else ``$TETHER_HOME/runs``.

    ``pool_size``: the most connections a database's store keeps for its reads and saves (a
    queue worker sizes it to its ``--concurrency``); None is ``$TETHER_PG_POOL``'s. The file
    store has no connections, and no use for it.

    Nothing is connected here: a server that cannot be reached, or refuses the password,
    is a :class:`tether.store.protocol.StoreUnavailable` (a StateError, in one line,
    without the password) on the first call. A URL of another scheme, or a missing psycopg, is a
    StateError in words."""
    root = files_root(spec)
    if root is not None:
        return RunStore(root)
    spec = spec or os.environ.get(STORE_ENV)
    if is_database(spec):
        url = str(spec)
        try:
            # lazy: psycopg comes with the [postgres] extra only (test_wheel)
            from tether.store.postgres.store import PgStore
        except ImportError:
            raise StateError("a postgresql:// store needs psycopg: pip install 'tether[postgres]'") from None
        return PgStore(url, pool_size=pool_size)
    scheme = str(spec).split("://", 1)[0]
    raise StateError(f"unknown kind of store {scheme}://...: give a directory, or a postgresql:// URL")
