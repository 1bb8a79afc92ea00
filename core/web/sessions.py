"""Who is logged in to ``tether serve``, and how fast a wrong password may be tried again.

A session is a random token (``secrets.token_urlsafe``, 256 bits) in a cookie, and a row in
this process's memory: the user, the session's own CSRF token, and when it ends. Kept in
memory on purpose: a restart of the server logs everybody out, which costs a login and
leaves no session a stolen copy of the store could replay (docs/serve.md says so).

A session holds only while its user does. It carries the user's stamp from the login
(:attr:`tether.web.users.User.stamp`, which a removal, a new password or a new role
changes), and the login in front compares it with the store's on every request
(:mod:`tether.web.auth`), so nothing here can go stale: the users live on the store, and
``tether serve --remove-user`` in another process changes them there. An answer that stays
open (the page's event stream, a console tab's websocket) has no next request: while one is open,
:meth:`Sessions.follow` reads the stamps every :data:`FOLLOW_S` and ends the sessions that
no longer hold, which wakes their streams to close.

The throttle counts failed logins per name and per client address: after
:data:`FREE_FAILURES` failures in a row, each next try must wait, twice as long each time
(up to :data:`MAX_WAIT_S`); a good login clears the name's count. A guesser is slowed from
one address and across many, and a real operator who mistyped waits seconds, not hours.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from tether.web.settings import SESSION_TTL_S

log = logging.getLogger(__name__)
FOLLOW_S = 2.0
"""How often the stamps are read while an event stream is open: a removed user's open page
stops within this, and an idle server reads nothing."""
FREE_FAILURES = 5
FIRST_WAIT_S = 2.0
MAX_WAIT_S = 15 * 60.0
MAX_SESSIONS = 10_000  # beyond this, the oldest go first: memory is bounded whoever logs in
EXPIRED = "this login has expired"


@dataclass(slots=True, eq=False)
class Session:
    """``stamp``: the user's at the login; ``ended``: why the session ended, in words (None
    while it holds)."""

    token: str
    user: str
    may_change: bool
    csrf: str
    expires_at: float
    stamp: str
    ended: str | None = None
    _wakes: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def csrf_ok(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(self.csrf.encode(), str(given).encode("utf-8", "surrogatepass"))

    def end(self, why: str) -> None:
        if self.ended is None:
            self.ended = why
            for wake in list(self._wakes):
                wake()

    @contextlib.contextmanager
    def held(self, wake: Callable[[], None]) -> Iterator[None]:
        """While an answer stays open on this session (an event stream, a console tab):
        ``wake()`` is called when the session ends, and :meth:`Sessions.follow` reads the
        users meanwhile."""
        self._wakes.append(wake)
        if self.ended is not None:  # it ended before the answer began: told at once all the same
            wake()
        try:
            yield
        finally:
            self._wakes.remove(wake)

    @property
    def is_held(self) -> bool:
        return bool(self._wakes)


def stale_words(session: Session, stamp: str | None) -> str | None:
    """Why ``session`` no longer holds, given its user's stamp on the store now (None: the
    user is gone), in words; None when it holds."""
    if stamp is None:
        return f"{session.user} is no longer a user of this store"
    if not hmac.compare_digest(stamp, session.stamp):
        return f"the password or role of {session.user} changed since this login"
    return None


SESSION = web.RequestKey("session", Session)
"""Where the login middleware (:mod:`tether.web.auth`) puts the request's session, for every page to read."""


class Sessions:
    """The logged-in sessions of this server process (see the module)."""

    def __init__(self, ttl_s: float = SESSION_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._by_token: dict[str, Session] = {}

    def open(self, user: str, *, may_change: bool, stamp: str, now: float | None = None) -> Session:
        now = time.time() if now is None else now
        self._sweep(now)
        while len(self._by_token) >= MAX_SESSIONS:
            self.close(next(iter(self._by_token)), "too many people logged in at once: the oldest login ended")
        session = Session(secrets.token_urlsafe(32), user, may_change, secrets.token_urlsafe(32), now + self.ttl_s,
                          stamp)
        self._by_token[session.token] = session
        return session

    def get(self, token: str | None, now: float | None = None) -> Session | None:
        if not token:
            return None
        session = self._by_token.get(token)
        if session is None:
            return None
        if session.expires_at <= (time.time() if now is None else now):
            self.close(token, EXPIRED)
            return None
        return session

    def close(self, token: str | None, why: str = "logged out") -> None:
        session = self._by_token.pop(token, None) if token else None
        if session is not None:
            session.end(why)

    def end_stale(self, stamps: Mapping[str, str]) -> None:
        """End every session whose user is not in ``stamps`` (user → stamp, as the store has
        them now) or has another stamp there."""
        for session in list(self._by_token.values()):
            why = stale_words(session, stamps.get(session.user))
            if why is not None:
                self.close(session.token, why)

    async def follow(self, read_stamps: Callable[[], Awaitable[Mapping[str, str]]], every_s: float = FOLLOW_S) -> None:
        """Until cancelled: every ``every_s``, end the expired sessions, and while an event
        stream is open, the sessions whose user was removed or changed (see the module). A
        store that cannot be read ends nobody: the next request is refused in words anyway."""
        failing = False
        while True:
            await asyncio.sleep(every_s)
            self._sweep(time.time())
            if not any(session.is_held for session in self._by_token.values()):
                continue
            try:
                stamps = await read_stamps()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not failing:
                    log.warning("tether serve: could not read the users to check the open pages' logins: %s", exc)
                failing = True
                continue
            failing = False
            self.end_stale(stamps)

    def _sweep(self, now: float) -> None:
        for token in [t for t, s in self._by_token.items() if s.expires_at <= now]:
            self.close(token, EXPIRED)


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
