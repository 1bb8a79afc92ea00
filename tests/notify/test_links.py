"""Each bad link, refused in words and changing nothing, on both stores; a good link spent
exactly once, however many processes click it at once."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tether.notify import LinkClaim, LinkRefused, issue_link, read_link, spend_link
from tether.notify.storage import storage_for
from tether.store.files.store import RunStore


def link(store: Any, **kw: Any) -> str:
    return issue_link(store, **{"run_id": "run-1", "call_id": "call-7", "args_hash": "ab12", "action": "approve",
                                **kw})


def refused(store: Any, token: str, *, spend: bool = False) -> LinkRefused:
    with pytest.raises(LinkRefused) as caught:
        (spend_link if spend else read_link)(store, token)
    return caught.value




def test_a_good_link_says_what_it_decides_and_is_url_safe(twin, store: Any):
    token = link(store, action="reject", ttl_s=600, bearer=True)
    assert all(c.isalnum() or c in "-_." for c in token)
    claim = read_link(store, token)
    assert claim == LinkClaim("run-1", "call-7", "ab12", "reject", claim.expires_at, True)
    assert 590 < claim.expires_at - time.time() <= 600
    assert read_link(twin(store), token) == claim  # any process of the store: the key is on the store


def test_a_link_works_once(twin, store: Any):
    token = link(store)
    assert spend_link(store, token, by="alice").action == "approve"
    for check in (read_link, spend_link):
        with pytest.raises(LinkRefused) as caught:
            check(twin(store), token)
        assert caught.value.reason == "used"
        assert "already used at" in caught.value.words and "by alice" in caught.value.words
        assert "changed nothing" in caught.value.words


def test_a_forged_link_is_refused(store: Any):
    token = link(store)
    payload, _ = token.split(".")
    forged = refused(store, f"{payload}.{base64.urlsafe_b64encode(b'0' * 32).rstrip(b'=').decode()}")
    assert forged.reason == "forged" and "not issued by this Tether, or was altered" in forged.words
    assert read_link(store, token)  # the real one still works


def test_a_tampered_payload_is_refused(store: Any):
    token = link(store, action="reject")
    payload, signature = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    body["a"] = "approve"  # a reject link turned into an approve link
    altered = base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode()).rstrip(b"=").decode()
    words = refused(store, f"{altered}.{signature}", spend=True)
    assert words.reason == "forged"
    assert read_link(store, token).action == "reject"  # nothing was spent by the refusal


def test_an_expired_link_is_refused_with_when(store: Any):
    token = link(store, ttl_s=0.05)
    time.sleep(0.1)
    words = refused(store, token, spend=True)
    assert words.reason == "expired" and "expired at" in words.words
    assert "tether approve run-1" in words.words  # what to do instead
    payload = token.split(".")[0]
    nonce = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["n"]
    assert storage_for(store).spent(nonce) is None  # refused, not spent


def test_a_link_of_another_store_is_refused(store: Any, tmp_path: Path):
    other = RunStore(tmp_path / "elsewhere")
    assert refused(store, link(other)).reason == "forged"
    assert refused(other, link(store)).reason == "forged"


@pytest.mark.parametrize("token", ["", "nodot", "a.b.c", "x" * 5000, "!!!.???", "e30.AAAA"])
def test_a_malformed_link_is_refused(store: Any, token: str):
    words = refused(store, token)
    assert words.reason in ("malformed", "forged") and "decides nothing" in words.words


def test_a_signed_link_that_cannot_be_read_is_refused(tmp_path: Path):
    import hashlib
    import hmac

    store = RunStore(tmp_path / "runs")
    payload = base64.urlsafe_b64encode(b'{"r":"x"}').rstrip(b"=").decode()
    signature = base64.urlsafe_b64encode(hmac.new(storage_for(store).key(), payload.encode(), hashlib.sha256)
                                         .digest()).rstrip(b"=").decode()
    words = refused(store, f"{payload}.{signature}")
    assert words.reason == "malformed" and "cannot be read" in words.words


def test_two_clicks_at_once_spend_a_link_once(twin, store: Any):
    token = link(store)
    stores = [twin(store) for _ in range(8)]

    def click(i: int) -> str:
        try:
            spend_link(stores[i], token, by=f"user{i}")
            return "spent"
        except LinkRefused as exc:
            return exc.reason

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(click, range(8)))
    assert sorted(results) == ["spent"] + ["used"] * 7


def test_processes_clicking_at_once_spend_a_link_once(tmp_path: Path):
    store = RunStore(tmp_path / "runs")
    token = link(store)
    script = ("import sys\nfrom tether.store.files.store import RunStore\nfrom tether.notify import spend_link, LinkRefused\n"
              "try:\n    spend_link(RunStore(sys.argv[1]), sys.argv[2], by=sys.argv[3]); print('spent')\n"
              "except LinkRefused as exc:\n    print(exc.reason)\n")
    processes = [subprocess.Popen([sys.executable, "-c", script, str(store.root), token, f"p{i}"],
                                  stdout=subprocess.PIPE, text=True) for i in range(4)]
    results = sorted(p.communicate(timeout=60)[0].strip() for p in processes)
    assert results == ["spent", "used", "used", "used"]


def test_the_key_is_made_once_for_every_process(tmp_path: Path):
    root = tmp_path / "runs"
    script = "import sys\nfrom tether.store.files.store import RunStore\nfrom tether.notify.storage import storage_for\n" \
             "print(storage_for(RunStore(sys.argv[1])).key().hex())\n"
    processes = [subprocess.Popen([sys.executable, "-c", script, str(root)], stdout=subprocess.PIPE, text=True)
                 for _ in range(4)]
    keys = {p.communicate(timeout=60)[0].strip() for p in processes}
    assert len(keys) == 1 and len(next(iter(keys))) == 64
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


def test_the_watchers_role_cannot_read_the_link_key(pg_notify: Any, pg_server: Any):
    import psycopg

    from tether.store.postgres.store import PgStore

    storage_for(pg_notify).key()  # made by the operator's role
    watcher = PgStore(pg_server.watcher_url)
    try:
        with watcher._conn() as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(watcher.q("SELECT key FROM {s}.notify_key"))
        with watcher._conn() as conn:  # what it may read still reads: the status, for its console
            conn.execute(watcher.q("SELECT count(*) FROM {s}.notify_status"))
    finally:
        watcher.close()
