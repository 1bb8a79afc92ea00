"""The tests' own PostgreSQL (tests/pg.py) and the two roles of core/data/pg/roles.sql."""

from __future__ import annotations

import psycopg
import pytest


def test_the_operator_writes_and_the_watcher_only_reads(pg_server):
    with psycopg.connect(pg_server.url, autocommit=True) as db:
        assert db.execute("SELECT current_user").fetchone() == ("tether",)
        db.execute("CREATE TABLE roles_probe (x int)")
        db.execute("INSERT INTO roles_probe VALUES (1)")
    try:
        with psycopg.connect(pg_server.watcher_url, autocommit=True) as db:
            assert db.execute("SELECT x FROM roles_probe").fetchall() == [(1,)]
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                db.execute("INSERT INTO roles_probe VALUES (2)")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                db.execute("CREATE TABLE tether.nope (x int)")
    finally:
        with psycopg.connect(pg_server.url, autocommit=True) as db:
            db.execute("DROP TABLE roles_probe")


def test_a_wrong_password_is_refused(pg_server):
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(pg_server.url.replace(pg_server.operator_password, "wrong"), connect_timeout=5)
