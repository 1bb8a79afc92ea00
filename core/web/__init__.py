"""``tether serve``: one aiohttp server, one login in front of every page.

* the approvals page for a phone (:mod:`tether.web.pages`), live from the store's watch
  (:mod:`tether.web.live`), deciding through the same path as ``tether approve|reject``
  (:mod:`tether.web.decide`);
* the links a notification carries, which decide once (:mod:`tether.web.links`);
* the whole console in a desktop browser (:mod:`tether.web.console`, textual-serve);
* operators and their password hashes on the store (:mod:`tether.web.users`), sessions,
  CSRF tokens and the login throttle (:mod:`tether.web.sessions`, :mod:`tether.web.auth`).

Why aiohttp rather than Starlette: textual-serve is an aiohttp application, so one server
on one port with one login middleware protects both the page and the console's websocket
(docs/serve.md).
"""

DEFAULT_HOST = "127.0.0.1"
"""Where ``tether serve`` listens unless ``--host`` says otherwise: loopback, open to nobody."""
DEFAULT_PORT = 8765
