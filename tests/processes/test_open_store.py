"""tether.store.spec.open_store: what a --store value or TETHER_STORE makes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tether.store.protocol import Store
from tether.store.spec import open_store
from tether.vocab.state import StateError
from tether.store.files.store import RunStore


def test_a_directory_a_url_the_variable_and_the_default(tmp_path: Path, monkeypatch):
    from tether.store.postgres.store import PgStore

    monkeypatch.delenv("TETHER_STORE", raising=False)
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    made = open_store(tmp_path / "runs")
    assert isinstance(made, RunStore) and made.root == tmp_path / "runs" and isinstance(made, Store)
    assert isinstance(open_store(str(tmp_path / "x")), RunStore)
    assert open_store(None).root == tmp_path / "home" / "runs"
    for url in ("postgresql://tether:s3cret@db.example/tether", "postgres://tether@db.example/tether"):
        store = open_store(url)
        assert isinstance(store, PgStore) and "s3cret" not in repr(store) and "s3cret" not in store.where
    monkeypatch.setenv("TETHER_STORE", str(tmp_path / "from-env"))
    assert open_store(None).root == tmp_path / "from-env"
    monkeypatch.setenv("TETHER_STORE", "postgresql://tether:s3cret@db.example/tether")
    assert isinstance(open_store(None), PgStore)


def test_another_scheme_and_a_missing_psycopg_are_said_in_words(monkeypatch):
    with pytest.raises(StateError, match=r"unknown kind of store mysql://\.\.\.") as caught:
        open_store("mysql://root:hunter2@db/x")
    assert "hunter2" not in str(caught.value)
    monkeypatch.setitem(sys.modules, "tether.store.postgres.store", None)  # as if psycopg were not installed
    with pytest.raises(StateError, match=r"pip install 'tether\[postgres\]'"):
        open_store("postgresql://tether@db.example/tether")
