"""The access log of ``tether serve``: one line a request, with no secret in it.

aiohttp's default line holds the whole request line, and a notification's link carries its
token in the path (``/l/TOKEN``, a bearer link's only credential): here the token is
replaced by ``…``, and the query string is left out (a login's ``next=``). Bodies, where a
password travels, are never logged, by aiohttp or here."""

from __future__ import annotations

import re

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

_LINK = re.compile(r"^/l/[^/]+")


def shown_path(path: str) -> str:
    return _LINK.sub("/l/…", path)


class AccessLogger(AbstractAccessLogger):
    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info('%s "%s %s" %s %s %.3fs', request.remote, request.method, shown_path(request.path),
                         response.status, response.body_length, time)
