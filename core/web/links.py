"""The links a notification carries, which decide one call once (``/l/{token}``).

``GET`` never decides (chat apps open links to preview them): it shows the call and one
button, Approve, or for a rejection a one-field form for the reason. ``POST`` decides. The
token is read (:func:`tether.notify.links.read_link`: its signature, expiry and whether it
was used), then the call it is bound to must still wait with the same arguments, then the
link is spent (once, atomically: :func:`~tether.notify.links.spend_link`), then the
decision takes the same path as the page's (:mod:`tether.web.decide`). A used, expired,
forged or stale link is refused in words, and nothing changes.

A link needs a login, unless it is a bearer link (``links = "bearer"`` on a trusted
channel): then the token is the credential, and its POST needs no session nor CSRF token
(an ntfy action button posts to it directly). A logged-in watcher cannot decide through a
link either.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from aiohttp import web

from tether.store.protocol import call
from tether.vocab.state import StateError
from tether.web.auth import CSRF_FIELD, WATCH_ONLY, may_change, page_context, session_of, watcher_words
from tether.web.decide import Answer, stale_words
from tether.web.pending import card_of
from tether.web.render import html, words_page
from tether.notify import links
from tether.web.pages import DECIDER

BEARER_BY = "link"  # who a bearer link's decision is recorded as, with the channel's name when it has one


def _links() -> Any:
    return links


async def _claim(request: web.Request, token: str, *, spend: bool) -> tuple[Any, str | None]:
    """The link's claim, or the words that refuse it."""
    try:
        links = _links()
    except ImportError:
        return None, "this server cannot read notification links (tether.notify is not installed here)"
    store = _store(request)
    try:
        if spend:
            session = session_of(request)
            return await call(store, links.spend_link, store, token,
                              by=session.user if session is not None else BEARER_BY), None
        return await call(store, links.read_link, store, token), None
    except links.LinkRefused as exc:
        return None, str(getattr(exc, "words", None) or exc)


def _store(request: web.Request) -> Any:
    return request.app[DECIDER].store


async def _stale(request: web.Request, claim: Any) -> str | None:
    store = _store(request)
    try:
        state = await call(store, store.load, claim.run_id)
    except StateError as exc:
        return str(exc)
    return stale_words(state, claim.call_id, claim.args_hash)


def _login_first(request: web.Request) -> None:
    if session_of(request) is None:
        raise web.HTTPSeeOther(f"/login?next={quote(request.path, safe='')}")


async def link_page(request: web.Request) -> web.StreamResponse:
    token = request.match_info["token"]
    claim, refused = await _claim(request, token, spend=False)
    if claim is None:
        return words_page(request, 403, "This link does not decide", str(refused), back=None)
    if not claim.bearer:
        _login_first(request)
    stale = await _stale(request, claim)
    if stale is not None:
        return words_page(request, 409, "This link does not decide", stale, back=None)
    store = _store(request)
    summary = await call(store, store.summary, claim.run_id)
    card = card_of(summary)
    can = bool(claim.bearer and not request.app[WATCH_ONLY]) or may_change(request)
    return html("link.html", **page_context(request, claim=claim, card=card, now=time.time(), token=token,
                                            can=can, refusal="" if can else watcher_words(request)))


async def link_decide(request: web.Request) -> web.StreamResponse:
    token = request.match_info["token"]
    form = await request.post()
    claim, refused = await _claim(request, token, spend=False)
    if claim is None:
        return words_page(request, 403, "This link does not decide", str(refused), back=None)
    session = session_of(request)
    if not claim.bearer:
        if session is None:
            return words_page(request, 401, "Log in first", "this link needs a login: open it, log in, and press the "
                              "button again; nothing was changed", back=None)
        if not session.csrf_ok(str(form.get(CSRF_FIELD) or "")):
            return words_page(request, 403, "Refused", "this form's security token is missing or out of date: open "
                              "the link again; nothing was changed", back=None)
    if request.app[WATCH_ONLY] or (session is not None and not claim.bearer and not session.may_change):
        return words_page(request, 403, "Refused", watcher_words(request), back=None)
    stale = await _stale(request, claim)
    if stale is not None:
        return words_page(request, 409, "This link does not decide", stale, back=None)
    claim, refused = await _claim(request, token, spend=True)  # once: a second press is refused here
    if claim is None:
        return words_page(request, 403, "This link does not decide", str(refused), back=None)
    by = session.user if session is not None else BEARER_BY
    text = str(form.get("reason") or "").strip()

    answer: Answer = await request.app[DECIDER].decide(claim.run_id, claim.call_id, claim.action, text, by=by,
                                                       bound_hash=claim.args_hash)
    title = ("Approved" if claim.action == "approve" else "Rejected") if answer.ok else "Not decided"
    return words_page(request, answer.status, title, answer.words, back="/" if session is not None else None)


def routes() -> list[web.RouteDef]:
    return [web.get("/l/{token}", link_page), web.post("/l/{token}", link_decide)]
