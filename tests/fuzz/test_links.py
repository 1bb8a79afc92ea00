"""Notification links (``tether.notify.links``): a link's token as anyone may send it
(``read_link``, ``spend_link``), a token Tether issued with one character changed, and a
signed payload of any shape (what a leaked key, or a future version, could sign).

The rule: any token is a claim of the link Tether issued, unchanged, or a
:class:`LinkRefused` in words; a refused token spends nothing; a link spends once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from tether.notify.links import LinkClaim, LinkRefused, _b64, _sign, issue_link, read_link, spend_link
from tether.notify.storage import storage_for
from tether.store.files.store import RunStore

from tests.fuzz.strategies import deep, json_values, objects_with, texts

tokens = st.one_of(st.text(max_size=80), st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789-_.=", max_size=80),
                   st.tuples(st.text(max_size=30), st.text(max_size=30)).map(".".join))
claims = st.fixed_dictionaries({"run_id": texts.filter(bool), "call_id": texts.filter(bool), "args_hash": texts,
                                "action": st.sampled_from(["approve", "reject"]), "bearer": st.booleans()})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    return RunStore(tmp_path_factory.mktemp("links") / "runs")


def refused_or_claim(store: RunStore, token: str, *, spend: bool = False) -> LinkClaim | None:
    try:
        return (spend_link(store, token, by="fuzz") if spend else read_link(store, token))
    except LinkRefused as exc:
        assert exc.words and exc.reason in ("forged", "expired", "used", "malformed")
        return None


@given(tokens)
def test_any_token_is_refused_in_words(store: RunStore, token: str) -> None:
    assert refused_or_claim(store, token) is None
    assert refused_or_claim(store, token, spend=True) is None


@given(claims, st.data())
def test_an_issued_link_changed_anywhere_decides_nothing(store: RunStore, claim: dict, data: st.DataObject) -> None:
    token = issue_link(store, **claim)
    assert refused_or_claim(store, token) == LinkClaim(expires_at=read_link(store, token).expires_at, **claim)
    at = data.draw(st.integers(0, len(token) - 1), label="at")
    char = data.draw(st.characters(), label="char")
    changed = token[:at] + char + token[at + 1:]
    if changed != token:
        assert refused_or_claim(store, changed, spend=True) is None
    assert refused_or_claim(store, token, spend=True) is not None  # the refused one spent nothing
    assert refused_or_claim(store, token, spend=True) is None  # once


payloads = st.one_of(json_values.map(lambda v: json.dumps(v).encode()), st.binary(max_size=40),
                     objects_with({"r": json_values, "c": json_values, "h": json_values,
                                   "a": st.sampled_from(["approve", "reject", "x"]), "i": json_values,
                                   "e": st.one_of(st.floats(), st.integers(), st.just(10**400)), "b": json_values,
                                   "n": json_values}).map(lambda v: json.dumps(v).encode()))


@given(payloads)
def test_a_signed_payload_of_any_shape_is_a_claim_or_refused(store: RunStore, payload: bytes) -> None:
    body = _b64(payload)
    token = f"{body}.{_sign(storage_for(store).key(), body)}"
    claim = refused_or_claim(store, token)
    if claim is not None:
        assert all(isinstance(getattr(claim, f), str) for f in ("run_id", "call_id", "args_hash"))
        assert claim.action in ("approve", "reject") and isinstance(claim.expires_at, float)


# ---- bugs the campaign found, kept as regressions -----------------------------------------

@pytest.mark.parametrize("payload", [
    {"r": "r", "c": "c", "h": "h", "a": "approve", "i": 1, "e": 10**400, "b": 0, "n": "x"},  # OverflowError
    deep(5_000),  # RecursionError
], ids=["huge-expiry", "deep"])
def test_found_signed_payloads_are_refused_in_words(store: RunStore, payload) -> None:
    body = _b64(payload if isinstance(payload, bytes) else json.dumps(payload).encode())
    token = f"{body}.{_sign(storage_for(store).key(), body)}"
    assert refused_or_claim(store, token) is None


@pytest.mark.parametrize("token", ["\ud800.x", "a.\udfff", "é.ü"], ids=["surrogate-payload", "surrogate-signature",
                                                                          "non-ascii"])
def test_found_tokens_are_refused_in_words(store: RunStore, token: str) -> None:
    assert refused_or_claim(store, token) is None
