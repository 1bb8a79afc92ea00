"""The login in front of every page, and the CSRF check on every change.

One aiohttp middleware for the whole server, the console's sub-application included:

* a request without a live session is sent to ``/login`` (a page) or answered 401 (the
  live updates, a script's fetch); only ``/login``, the static files and a notification's
  link (which checks for itself: :mod:`tether.web.links`) pass without one;
* a session holds only while its user does: every request reads the user on the store, and
  one removed, or given a new password or role, since the login ends the session there and
  then, in words (:mod:`tether.web.sessions` says how an open event stream ends too);
* every POST carries the session's CSRF token (a hidden field, or ``X-CSRF-Token``) or is
  refused 403 in words, before its handler runs;
* a session whose user may only watch is refused 403 on every change, in words.

The session cookie is HttpOnly (no script reads it), SameSite=Strict (no other site's page
sends it), Secure when users reach the server over https (``--public-url``), and expires
with the session. Failed logins are throttled (:class:`tether.web.sessions.Throttle`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlsplit

from aiohttp import web

from tether.web.render import SECURITY_HEADERS, html, words_page
from tether.web.sessions import SESSION, Session, Sessions, Throttle, stale_words
from tether.web.settings import Network, ServeSettings
from tether.web.users import UserBook

log = logging.getLogger(__name__)
COOKIE = "tether_session"
LOGIN_COOKIE = "tether_login"  # the login form's own token, before there is a session
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"
PUBLIC_PREFIXES = ("/static/", "/l/")
MAX_ADDRESS = 64  # characters of a forwarded address kept: a longer one is somebody's words, not an address
_FORM_TYPES = ("", "application/x-www-form-urlencoded", "multipart/form-data")  # what aiohttp's post() parses
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

SETTINGS = web.AppKey("settings", ServeSettings)
SESSIONS = web.AppKey("sessions", Sessions)
THROTTLE = web.AppKey("throttle", Throttle)
USERS = web.AppKey("users", UserBook)
WATCH_ONLY = web.AppKey("watch_only", str)  # the store role's name when it may only watch, else ""


def session_of(request: web.Request) -> Session | None:
    return request.get(SESSION)


def may_change(request: web.Request) -> bool:
    session = session_of(request)
    return session is not None and session.may_change and not request.config_dict[WATCH_ONLY]  # the console's sub-app too


def watcher_words(request: web.Request) -> str:
    role = request.config_dict[WATCH_ONLY]
    if role:
        return (f"this server's store role {role} may only watch: nobody can decide or stop from here; "
                "nothing was changed")
    return "you are logged in as a watcher (--read-only): you can see, not decide or stop; nothing was changed"


def client_address(request: web.Request) -> str:
    """The client, for the login throttle and the login's log line: the peer, unless the peer
    is a proxy the operator named (``--trust-proxy``). Then the right-most address of
    ``X-Forwarded-For`` that is not one of those proxies: each proxy appends who it heard
    from, so everything left of that is what the client itself wrote, and a client that
    writes a new address each time would otherwise be a new client each time (as nginx's
    ``real_ip_recursive`` and Caddy's ``trusted_proxies`` read it)."""
    peer = request.remote or "?"
    trusted = request.config_dict[SETTINGS].trusted_proxies
    if not _among(peer, trusted):
        return peer
    hops = [hop.strip() for header in request.headers.getall("X-Forwarded-For", ()) for hop in header.split(",")]
    client = peer
    for hop in reversed([hop for hop in hops if hop]):
        client = hop[:MAX_ADDRESS]  # a hop that is no address is the client's own words: counted as they are
        if not _among(hop, trusted):
            break
    return client


def _among(address: str, networks: tuple[Network, ...]) -> bool:
    """Whether ``address`` (``1.2.3.4``, ``1.2.3.4:port``, ``[::1]:port``) is in one of ``networks``."""
    if not networks:
        return False
    text = address[1:].partition("]")[0] if address.startswith("[") else address
    if text.count(":") == 1:  # IPv4 with a port
        text = text.partition(":")[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:  # a dual-stack socket's IPv4 peer
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


def set_session_cookie(response: web.StreamResponse, settings: ServeSettings, session: Session) -> None:
    response.set_cookie(COOKIE, session.token, max_age=max(1, int(settings.session_ttl_s)), path="/", httponly=True,
                        samesite="Strict", secure=settings.secure_cookies)


def wants_page(request: web.Request) -> bool:
    """A browser navigating (redirect it to the login) rather than a script or the live updates."""
    accept = request.headers.get("Accept", "")
    return request.method == "GET" and "text/html" in accept and request.path != "/events"


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The login and CSRF checks (see the module), and pages in words for every error."""
    try:
        response = await _guarded(request, handler)
    except web.HTTPException as exc:
        if exc.status < 400 or exc.content_type == "text/html":
            raise
        response = words_page(request, exc.status, exc.reason, _http_words(exc))
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("tether serve: %s %s failed", request.method, request.path)
        words = ("the server could not answer this request; it is logged on the server. Nothing was changed unless "
                 "a page says so.")
        try:
            response = words_page(request, 500, "Something went wrong", words)
        except Exception:  # the error page itself failed: the words, plain
            response = web.Response(status=500, text=words + "\n")
    if not response.prepared:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
    return response


async def _guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
    path = request.path
    if request.method == "POST" and request.content_type in _FORM_TYPES:
        try:
            await request.post()  # read once, here: every handler's request.post() is then this form
        except Exception as exc:  # aiohttp's parser on a torn or foreign body (a multipart without its boundary)
            return words_page(request, 400, "Refused", f"this form could not be read ({type(exc).__name__}); nothing "
                                                       "was changed")
    session: Session | None = None
    if path != "/login" and not path.startswith("/static/"):  # the only two that never act as anyone
        session = request.config_dict[SESSIONS].get(request.cookies.get(COOKIE))
    ended: str | web.StreamResponse | None = None
    if session is not None:
        ended = await _ended(request, session)
        if isinstance(ended, web.StreamResponse):
            return ended
        if ended is None:
            request[SESSION] = session
        else:
            session = None
    if path == "/login" or path.startswith(PUBLIC_PREFIXES):
        return await handler(request)  # a link decides as the session's user only if it still holds
    if session is None:
        if ended is not None:
            return _logged_out(request, ended)
        if wants_page(request):
            target = request.path_qs if request.path_qs != "/" else ""
            raise web.HTTPSeeOther("/login" + (f"?next={quote(target, safe='')}" if target else ""))
        return web.Response(status=401, text="log in first: this server needs a session (POST /login)\n",
                            headers={"Cache-Control": "no-store"})
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        given = request.headers.get(CSRF_HEADER)
        if given is None and request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            given = (await request.post()).get(CSRF_FIELD)
        if not session.csrf_ok(given if isinstance(given, str) else None):
            return words_page(request, 403, "Refused",
                              "this form's security token is missing or out of date (the page is older than your "
                              "login, or came from elsewhere): reload the page and try again; nothing was changed")
    return await handler(request)


async def _ended(request: web.Request, session: Session) -> str | web.StreamResponse | None:
    """Whether the session still holds, on every request: its user is on the store with the
    stamp of the login (removed with ``--remove-user``, given a new password or role since,
    by this server or another process: the session ends now). The words why it ended, a 503
    when the users cannot be read, or None."""
    try:
        user = await asyncio.to_thread(request.config_dict[USERS].get, session.user)
    except Exception as exc:
        log.warning("tether serve: could not read the users: %s", exc)
        return words_page(request, 503, "Not now", f"the users of this store cannot be read now "
                                                   f"({type(exc).__name__}); nothing was changed; try again")
    why = session.ended or stale_words(session, user.stamp if user is not None else None)
    if why is not None:
        request.config_dict[SESSIONS].close(session.token, why)
        log.info("tether serve: a session of %s ended: %s", session.user, why)
    return why


def _logged_out(request: web.Request, why: str) -> web.StreamResponse:
    """The answer to a request whose session just ended, in words, and the cookie forgotten."""
    words = f"{why}: log in again; nothing was changed"
    response: web.StreamResponse
    if "application/json" in request.headers.get("Accept", ""):
        response = web.json_response({"ok": False, "words": words}, status=401)
    elif wants_page(request) or request.method == "POST":
        response = words_page(request, 401, "Logged out", words, back="/login")
    else:
        response = web.Response(status=401, text=words + "\n", headers={"Cache-Control": "no-store"})
    response.del_cookie(COOKIE, path="/")
    return response


def _http_words(exc: web.HTTPException) -> str:
    if exc.status == 404:
        return "there is no such page on this server"
    if exc.status == 405:
        return "this page does not take that kind of request"
    return exc.text or exc.reason


# ---- /login and /logout ------------------------------------------------------------------

def safe_next(target: str | None) -> str:
    """Where to go after the login: a path on this server only (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    parts = urlsplit(target)
    return target if not parts.scheme and not parts.netloc else "/"


async def login_page(request: web.Request, *, status: int = 200, words: str = "", name: str = "") -> web.Response:
    token = request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(24)
    response = html("login.html", status, words=words, name=name, token=token,
                    next=safe_next(request.query.get("next")), session=None)
    # Not Secure even behind TLS: it only ties the form to this browser (login CSRF), it
    # opens nothing; a proxy's plain-http hop must not lose it.
    response.set_cookie(LOGIN_COOKIE, token, path="/login", httponly=True, samesite="Strict", max_age=3600)
    return response


async def login(request: web.Request) -> web.StreamResponse:
    """Check the name and password (in a worker thread: argon2 takes tens of milliseconds of
    CPU on purpose), throttled per name and per address."""
    form = await request.post()
    name, password = str(form.get("name") or "").strip(), str(form.get("password") or "")
    token = request.cookies.get(LOGIN_COOKIE)
    given = str(form.get(CSRF_FIELD) or "").encode("utf-8", "surrogatepass")
    if not token or not secrets.compare_digest(token.encode("utf-8", "surrogatepass"), given):  # bytes: any text
        return await login_page(request, status=403, name=name,
                                words="the login form was out of date: log in again")
    throttle, address = request.config_dict[THROTTLE], client_address(request)
    wait = throttle.wait_s(name, address)
    if wait > 0:
        return await login_page(request, status=429, name=name,
                                words=f"too many failed logins for this name or from this address: try again in "
                                      f"{int(wait) + 1} s")
    if not name or not password:
        return await login_page(request, status=400, name=name, words="give your name and your password")
    users = request.config_dict[USERS]
    try:
        user = await asyncio.to_thread(users.check, name, password)
    except Exception as exc:  # the store is away, or its users file is unreadable: said, never the password
        log.warning("tether serve: could not check a login: %s", exc)
        return await login_page(request, status=503, name=name,
                                words=f"the users of this store cannot be read now ({type(exc).__name__}); try again")
    if user is None:
        throttle.failed(name, address)
        log.info("tether serve: failed login for %r from %s", name, address)
        return await login_page(request, status=401, name=name, words="that name and password do not match")
    throttle.succeeded(name)
    session = request.config_dict[SESSIONS].open(user.name, may_change=user.may_change, stamp=user.stamp)
    log.info("tether serve: %s logged in from %s", user.name, address)
    done = web.HTTPSeeOther(safe_next(str(form.get("next") or "/")))
    set_session_cookie(done, request.config_dict[SETTINGS], session)
    done.del_cookie(LOGIN_COOKIE, path="/login")
    raise done


async def logout(request: web.Request) -> web.StreamResponse:
    request.config_dict[SESSIONS].close(request.cookies.get(COOKIE))
    done = web.HTTPSeeOther("/login")
    done.del_cookie(COOKIE, path="/")
    raise done


def routes() -> list[web.RouteDef]:
    return [web.get("/login", login_page), web.post("/login", login), web.post("/logout", logout)]


def csrf_of(request: web.Request) -> str:
    session = session_of(request)
    return session.csrf if session is not None else ""


def page_context(request: web.Request, **more: Any) -> dict[str, Any]:
    """What every logged-in page's template gets: who is in, what they may do, the token."""
    return {"session": session_of(request), "may_change": may_change(request), "csrf": csrf_of(request),
            "watch_only": request.config_dict[WATCH_ONLY], **more}
