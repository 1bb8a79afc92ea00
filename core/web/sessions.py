"""Who is logged in to ``tether serve``, and how fast a wrong password may be tried again.

A session is a random token (``secrets.token_urlsafe``, 256 bits) in a cookie, and a row in
this process's memory: the user, the session's own CSRF token, and when it ends. Kept in
memory on purpose: a restart of the server logs everybody out, which costs a login and
leaves no session a stolen copy of the store could replay (docs/serve.md says so).

The throttle counts failed logins per name and per client address: after
:data:`FREE_FAILURES` failures in a row, each next try must wait, twice as long each time
(up to :data:`MAX_WAIT_S`); a good login clears the name's count. A guesser is slowed from
one address and across many, and a real operator who mistyped waits seconds, not hours.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field

from aiohttp import web

from tether.web.settings import SESSION_TTL_S

FREE_FAILURES = 5
FIRST_WAIT_S = 2.0
MAX_WAIT_S = 15 * 60.0
MAX_SESSIONS = 10_000  # beyond this, the oldest go first: memory is bounded whoever logs in


@dataclass(slots=True)
class Session:
    token: str
    user: str
    may_change: bool
    csrf: str
    expires_at: float

    def csrf_ok(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(self.csrf.encode(), str(given).encode("utf-8", "surrogatepass"))


SESSION = web.RequestKey("session", Session)
"""Where the login middleware (:mod:`tether.web.auth`) puts the request's session, for every page to read."""


class Sessions:
    """The logged-in sessions of this server process (see the module)."""

    def __init__(self, ttl_s: float = SESSION_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._by_token: dict[str, Session] = {}

    def open(self, user: str, *, may_change: bool, now: float | None = None) -> Session:
        now = time.time() if now is None else now
        self._sweep(now)
        while len(self._by_token) >= MAX_SESSIONS:
            self._by_token.pop(next(iter(self._by_token)))
        session = Session(secrets.token_urlsafe(32), user, may_change, secrets.token_urlsafe(32), now + self.ttl_s)
        self._by_token[session.token] = session
        return session

    def get(self, token: str | None, now: float | None = None) -> Session | None:
        if not token:
            return None
        session = self._by_token.get(token)
        if session is None:
            return None
        if session.expires_at <= (time.time() if now is None else now):
            self._by_token.pop(token, None)
            return None
        return session

    def close(self, token: str | None) -> None:
        if token:
            self._by_token.pop(token, None)

    def _sweep(self, now: float) -> None:
        for token in [t for t, s in self._by_token.items() if s.expires_at <= now]:
            self._by_token.pop(token, None)


@dataclass(slots=True)
class _Count:
    failures: int = 0
    until: float = 0.0


@dataclass
class Throttle:
    """Failed logins per name and per address (see the module)."""

    free: int = FREE_FAILURES
    first_wait_s: float = FIRST_WAIT_S
    max_wait_s: float = MAX_WAIT_S
    _counts: dict[str, _Count] = field(default_factory=dict)

    def wait_s(self, name: str, address: str, now: float | None = None) -> float:
        """How long before this name or this address may try again (0: now)."""
        now = time.time() if now is None else now
        waits = [c.until - now for c in (self._counts.get(k) for k in _keys(name, address)) if c is not None]
        return max([0.0, *waits])

    def failed(self, name: str, address: str, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if len(self._counts) > MAX_SESSIONS:  # bounded: the oldest counts that no longer hold anyone back go
            for key in [k for k, c in self._counts.items() if c.until <= now][: len(self._counts) // 2]:
                del self._counts[key]
        for key in _keys(name, address):
            count = self._counts.setdefault(key, _Count())
            count.failures += 1
            if count.failures >= self.free:
                wait = min(self.max_wait_s, self.first_wait_s * 2 ** (count.failures - self.free))
                count.until = now + wait

    def succeeded(self, name: str) -> None:
        self._counts.pop(f"name:{name}", None)


def _keys(name: str, address: str) -> tuple[str, str]:
    return f"name:{name}", f"addr:{address}"
