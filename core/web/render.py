"""Pages from templates (Jinja2, every value escaped), and the headers every page carries."""

from __future__ import annotations

from typing import Any

import jinja2
from aiohttp import web

from tether.web.sessions import SESSION

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("tether.web", "templates"),
                          autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)

# What a page may load and where it may send a form: only this server. No page may be framed
# (clickjacking an Approve button), and no address leaves in a Referer (a link's token is in
# its path).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def html(template: str, status: int = 200, **context: Any) -> web.Response:
    body = _ENV.get_template(template).render(**context)
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


def fragment(template: str, **context: Any) -> str:
    return _ENV.get_template(template).render(**context)


def words_page(request: web.Request, status: int, title: str, words: str, *, back: str | None = "/") -> web.Response:
    """An answer in words (an error, a refusal, what a decision did): never a stack trace."""
    session = request.get(SESSION)
    return html("words.html", status, title=title, words=words, back=back, session=session)
