"""Links that decide: a notification's approve and reject links, signed, bound, used once.

A link's token is ``PAYLOAD.SIGNATURE``, both base64url without padding: the payload is
compact JSON naming the run, the call, the hash of the call's arguments, the action
(approve or reject), when it was issued and when it expires, whether it works without a
login (``bearer``), and a random nonce; the signature is HMAC-SHA256 of the payload's text
with the store's link key (:mod:`tether.notify.storage`: made once, kept on the store, so
every ``tether serve`` of the store checks every link the same way).

Checking a link (:func:`read_link`) verifies the signature in constant time first (a
forged or altered link says nothing more), then that it was not used (by its nonce, on the
store), then that it has not expired. :func:`spend_link` does the same and marks the nonce
used in one atomic insert, so of two clicks in two processes exactly one spends it. What
a link decides, and whether the call still waits with the same arguments (a stale link),
is the web server's business: it checks before spending.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Literal

from tether.vocab.rules import format_duration
from tether.store.protocol import Store
from tether.notify.storage import storage_for

Action = Literal["approve", "reject"]
ACTIONS: tuple[Action, ...] = ("approve", "reject")
DEFAULT_TTL_S = 3600.0
_MAX_TOKEN = 4096


@dataclass(frozen=True, slots=True)
class LinkClaim:
    """What a good link says: decide ``action`` on ``call_id`` of ``run_id``, as long as the
    call's arguments still hash to ``args_hash``, before ``expires_at``."""

    run_id: str
    call_id: str
    args_hash: str
    action: Action
    expires_at: float
    bearer: bool


class LinkRefused(Exception):
    """A link that decides nothing, and why, in words fit to show the person who clicked.

    ``reason`` is one of ``forged``, ``expired``, ``used`` or ``malformed``."""

    def __init__(self, words: str, reason: str = "malformed") -> None:
        super().__init__(words)
        self.words = words
        self.reason = reason


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(key: bytes, payload: str) -> str:
    return _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())


def issue_link(store: Store, *, run_id: str, call_id: str, args_hash: str, action: Action,
               ttl_s: float = DEFAULT_TTL_S, bearer: bool = False) -> str:
    """A URL-safe token that decides ``action`` on the call once, within ``ttl_s`` seconds.
    Blocking on a PostgreSQL store the first time (the key is read once per store object)."""
    if action not in ACTIONS:
        raise ValueError(f"a link approves or rejects, not {action!r}")
    if not ttl_s > 0:
        raise ValueError("a link's lifetime must be above zero")
    now = time.time()
    body = {"r": run_id, "c": call_id, "h": args_hash, "a": action, "i": round(now, 3),
            "e": round(now + ttl_s, 3), "b": 1 if bearer else 0, "n": secrets.token_urlsafe(12)}
    payload = _b64(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())
    return f"{payload}.{_sign(storage_for(store).key(), payload)}"


def link_url(public_url: str, token: str) -> str:
    """Where a link's token is opened: ``{public_url}/l/{token}``."""
    return f"{public_url.rstrip('/')}/l/{token}"


def _verified(store: Store, token: str) -> tuple[LinkClaim, str, float]:
    """The claim, its nonce and when it was issued, once the signature is good."""
    # A token is base64url and one dot: ASCII (anything else, a lone surrogate among it, could not
    # even be signed to compare).
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN or token.count(".") != 1 \
            or not token.isascii():
        raise LinkRefused("this is not a Tether link (it is cut short or mangled): it decides nothing; "
                          "copy the whole link, or decide on the approvals page", "malformed")
    payload, signature = token.split(".")
    expected = _sign(storage_for(store).key(), payload)
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        raise LinkRefused("this link was not issued by this Tether, or was altered: it decides nothing", "forged")
    try:
        body = json.loads(_unb64(payload))
        claim = LinkClaim(run_id=str(body["r"]), call_id=str(body["c"]), args_hash=str(body["h"]),
                          action=body["a"], expires_at=float(body["e"]), bearer=bool(body["b"]))
        nonce, issued = str(body["n"]), float(body["i"])
    except (ValueError, KeyError, TypeError, binascii.Error, OverflowError, RecursionError):
        raise LinkRefused("this link is signed but cannot be read: it decides nothing", "malformed") from None
    if claim.action not in ACTIONS:
        raise LinkRefused("this link is signed but names no decision: it decides nothing", "malformed")
    return claim, nonce, issued


def _when(ts: float) -> str:
    """``04:12`` today, else ``2026-12-03 04:12`` (local time, as the console shows times)."""
    here = time.localtime(ts)
    if time.strftime("%Y-%m-%d", here) == time.strftime("%Y-%m-%d"):
        return time.strftime("%H:%M", here)
    return time.strftime("%Y-%m-%d %H:%M", here)


def _check(store: Store, claim: LinkClaim, nonce: str, issued: float) -> None:
    spent = storage_for(store).spent(nonce)
    if spent is not None:
        _refuse_used(claim, spent.at, spent.by)
    if time.time() >= claim.expires_at:
        raise LinkRefused(f"this link expired at {_when(claim.expires_at)} (links work for "
                          f"{format_duration(claim.expires_at - issued)}): it decides nothing; decide on the "
                          f"approvals page, or with tether {claim.action} {claim.run_id}", "expired")


def _refuse_used(claim: LinkClaim, at: float, by: str | None) -> None:
    who = f" by {by}" if by else ""
    raise LinkRefused(f"this link was already used at {_when(at)}{who}: a link decides once, and this click "
                      f"changed nothing", "used")


def read_link(store: Store, token: str) -> LinkClaim:
    """The claim of a good link, without spending it; :class:`LinkRefused` in words for a
    forged or altered, malformed, used or expired one. Blocking on a PostgreSQL store."""
    claim, nonce, issued = _verified(store, token)
    _check(store, claim, nonce, issued)
    return claim


def spend_link(store: Store, token: str, *, by: str | None = None) -> LinkClaim:
    """Check the link as :func:`read_link` does, then mark it used, exactly once across every
    process of the store: the second call raises :class:`LinkRefused` (``used``), naming
    when, and ``by`` whom the first said. Blocking on a PostgreSQL store."""
    claim, nonce, issued = _verified(store, token)
    _check(store, claim, nonce, issued)
    first = storage_for(store).spend(nonce, claim.run_id, claim.call_id, by)
    if first is not None:
        _refuse_used(claim, first.at, first.by)
    return claim
