"""What one ``tether serve`` is: its store, where it listens, and the address users reach it at."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tether.store.protocol import Store
from tether.web import DEFAULT_HOST, DEFAULT_PORT

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

SESSION_TTL_S = 12 * 3600.0
"""How long a login lasts (``--session-hours``): a working day, so a phone that approved in
the morning asks again the next day. Here, not beside the sessions, so that ``tether``'s parser
reads the server's defaults without importing aiohttp."""


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """``store``: the run store (:func:`tether.store.spec.open_store`); ``store_spec``: how it
    was named (``--store``), for processes the server starts (the console's tabs);
    ``public_url``: the address users reach the server at behind a proxy (``--public-url``),
    the base of the links notifications carry, and ``https`` makes the cookies Secure;
    ``config_path``: the agent file; ``session_ttl_s``: how long a login lasts;
    ``trusted_proxies``: the reverse proxies whose ``X-Forwarded-For`` names the client
    (``--trust-proxy``; none by default: the peer is the client)."""

    store: Store
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    public_url: str | None = None
    store_spec: str | None = None
    config_path: Path | None = None
    session_ttl_s: float = SESSION_TTL_S
    trusted_proxies: tuple[Network, ...] = ()

    @property
    def base_url(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def secure_cookies(self) -> bool:
        """Cookies only over TLS: true when users reach the server at an ``https`` address."""
        return urlsplit(self.base_url).scheme == "https"


def check_public_url(url: str) -> str:
    """``--public-url``, refused in words unless it is an http(s) address with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--public-url must be an http:// or https:// address with a host, not {url!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError("--public-url is the address the server is reached at: no user, query or fragment")
    return url.rstrip("/")


def trusted_proxies(given: Iterable[str]) -> tuple[Network, ...]:
    """``--trust-proxy`` (again for more, or a comma list): addresses and networks
    (``127.0.0.1``, ``10.0.0.0/8``, ``::1``), refused in words when one is neither."""
    out: list[Network] = []
    for text in given:
        for item in (part.strip() for part in text.split(",")):
            try:
                out.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"--trust-proxy takes the address or network of a reverse proxy in front of this "
                                 f"server (127.0.0.1, 10.0.0.0/8, ::1), not {item!r}") from None
    return tuple(out)
