"""The worker's connections to PostgreSQL: DBOS's engine and client, DBOS's schema, the
workers' own tables, and the words for a database error.

One place makes every engine, so that DBOS never sees (or logs) the store's URL, and the
pool sizes that keep a fleet of workers under the server's connection limit are set here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tether.vocab.state import StateError
from tether.workers.names import APP_NAME, DBOS_SCHEMA

if TYPE_CHECKING:
    from tether.store.protocol import Store, Tables

def _sa_url(url: str) -> str:
    return re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", url)


def pool_size(concurrency: int) -> int:
    """How many connections a worker at ``concurrency`` keeps for Tether's reads and saves, and
    as many again for DBOS's engine: a few more for more runs, and never more than
    :data:`MAX_POOL`, however many runs it drives (docs/scale-out.md has the arithmetic)."""
    return max(4, min(MAX_POOL, 2 + concurrency // 8))


MAX_POOL = 8
"""The most connections of each kind (Tether's, DBOS's) one worker keeps, whatever its
``--concurrency``: the database, not the connection count, is what limits a busy worker."""


def _engine(url: str, pool_size: int = 4, overflow: int | None = None) -> Any:
    """DBOS's engine, made here so that DBOS never sees (or logs) the URL itself, and never
    connects to the ``postgres`` database to look for ours."""
    # lazy: optional dependency (the PostgreSQL store's extra; tests/processes/test_cold_start.py keeps it out of the quick commands)
    import sqlalchemy as sa

    return sa.create_engine(_sa_url(url), pool_size=pool_size,
                            max_overflow=pool_size if overflow is None else overflow, pool_pre_ping=True,
                            pool_timeout=30, connect_args={"application_name": "tether-worker",
                                                           "connect_timeout": 10})


def database(store: Store) -> Tables:
    """The store's database, which the workers keep their tables in beside the runs and DBOS
    its own: a store without one (the file store) has no workers, and says so in words."""
    tables = store.tables()
    if tables is None:
        raise StateError(f"{store.where} has no worker queue: workers need the PostgreSQL store")
    return tables


def ensure_dbos_schema(store: Store) -> None:
    """DBOS's tables in the schema ``dbos`` (made by ``roles.sql``, :attr:`Tables.roles_sql
    <tether.store.protocol.Tables.roles_sql>`): created or migrated by DBOS itself, once,
    however many submitters or workers start together."""
    # lazy: optional dependency (the [workers] extra; tests/processes/test_cold_start.py keeps DBOS out of the quick commands)
    from dbos._serialization import DefaultSerializer
    from dbos._sys_db import SystemDatabase

    url = store.spec
    engine = _engine(url, pool_size=1)
    try:
        sys_db = SystemDatabase.create(system_database_url=_sa_url(url), engine_kwargs={}, engine=engine,
                                       schema=DBOS_SCHEMA, serializer=DefaultSerializer(), executor_id=None)
        try:
            sys_db.run_migrations()
        finally:
            sys_db.destroy()
    except Exception as exc:
        raise StateError(_db_words(exc, store, "cannot prepare the worker queue's tables")) from None
    finally:
        engine.dispose()


def _db_words(exc: BaseException, store: Store, what: str) -> str:
    tables = database(store)
    text = tables.words(exc)  # one line, its type's name when it has no message
    if "permission denied for database" in text or "permission denied for schema" in text:
        text += f" (the operator role needs the schema dbos: run the lines for it in {tables.roles_sql} as a superuser)"
    return f"{store.where}: {what}: {text}"


def client(url: str) -> Any:
    """A DBOS client on the store's database (for enqueueing and sending decisions)."""
    # lazy: optional dependency (the [workers] extra; tests/processes/test_cold_start.py keeps DBOS out of the quick commands)
    from dbos import DBOSClient

    return DBOSClient(system_database_engine=_engine(url, pool_size=2), dbos_system_schema=DBOS_SCHEMA,
                      application_name=APP_NAME)


def close_client(dbos_client: Any) -> None:
    """A client from :func:`client`, and the engine made for it (DBOS leaves a given engine open)."""
    dbos_client.destroy()
    dbos_client._sys_db.engine.dispose()


_WORKERS_TABLE = """
CREATE TABLE IF NOT EXISTS {s}.workers (
    executor_id text PRIMARY KEY,
    host text, pid integer, started double precision, heartbeat double precision,
    concurrency integer, queues json, cannot json,
    lock_key bigint GENERATED ALWAYS AS (hashtextextended('tether-worker:' || executor_id, {seed})) STORED
)"""
_RECOVERIES_TABLE = """
CREATE TABLE IF NOT EXISTS {s}.recoveries (
    run_id text NOT NULL,
    executor_id text NOT NULL,
    host text, pid integer,
    last_seen double precision,
    found double precision NOT NULL,
    by_executor text NOT NULL,
    run_created double precision NOT NULL,
    messages integer NOT NULL,
    parked boolean NOT NULL DEFAULT false,
    PRIMARY KEY (run_id, executor_id)
)"""
"""One row per worker that died (or was lost) while driving a run: the dead worker, where it
ran, when it was last seen alive (its heartbeat, on the database's clock), who found it dead
and when, and the run's transcript length then. The deaths of a run that count toward
:data:`~tether.workers.recovery.MAX_RECOVERIES` are its rows with the transcript's present length (``run_created``
tells a run from an earlier one of the same id)."""

