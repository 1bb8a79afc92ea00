"""``tether serve``: run the server, or manage who may log in to it.

``tether serve [--host H] [--port P] [--store S] [--config FILE] [--public-url URL]
[--trust-proxy ADDR]`` serves
until Ctrl-C or SIGTERM, then stops the watch, the notification sender and the runs it
went on with, in words. ``--add-user NAME [--read-only]`` reads the password from the
terminal (twice), or from stdin when it is not a terminal (``echo pw | tether serve
--add-user ana``); ``--remove-user NAME``; ``--users`` lists them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import ipaddress
import logging
import signal
import sys
from typing import Any

from aiohttp import web

from tether.store.protocol import Store
from tether.web.settings import ServeSettings, check_public_url, trusted_proxies
from tether.web.accesslog import AccessLogger
from tether.web.app import make_app
from tether.web.users import UserBook, UserError


def serve_command(args: argparse.Namespace, store: Store, harness_of: Any) -> int:
    """``store``: the command's store; ``harness_of()``: the harness the server decides with
    (made on the server's event loop)."""

    if args.add_user is not None:
        return _add_user(store, args.add_user, watcher=args.read_only)
    if args.read_only:
        raise UserError("--read-only goes with --add-user NAME: it makes that user a watcher")
    if args.remove_user is not None:
        return _remove_user(store, args.remove_user)
    if args.users:
        return _list_users(store)
    public = check_public_url(args.public_url) if args.public_url else None
    settings = ServeSettings(store, host=args.host, port=args.port, public_url=public, store_spec=args.store,
                             config_path=args.config, session_ttl_s=args.session_hours * 3600.0,
                             trusted_proxies=trusted_proxies(args.trust_proxy))
    if not _loopback(args.host):
        print(f"tether serve: warning: listening on {args.host}, beyond this machine: put it behind a reverse proxy "
              "with TLS (docs/serve.md shows Caddy and nginx), and pass --public-url https://…", file=sys.stderr)
    if settings.secure_cookies and not settings.trusted_proxies:  # https: a TLS proxy in front (we speak http)
        print("tether serve: warning: --public-url is https, so a reverse proxy is in front, but no --trust-proxy "
              "names it: the login throttle counts every client as the proxy's one address (docs/serve.md)",
              file=sys.stderr)
    if not UserBook(store).users():
        print("tether serve: warning: nobody can log in yet: add a user first with tether serve --add-user NAME",
              file=sys.stderr)
    return asyncio.run(_serve(settings, harness_of))


async def _serve(settings: ServeSettings, harness_of: Any) -> int:
    if not logging.getLogger().handlers:  # a server says what it serves, one line a request, on stderr
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with harness_of() as harness:
        runner = web.AppRunner(make_app(settings, harness), handle_signals=False, access_log_class=AccessLogger)
        await runner.setup()
        try:
            site = web.TCPSite(runner, settings.host, settings.port, shutdown_timeout=2.0)
            try:
                await site.start()
            except OSError as exc:
                print(f"tether: error: cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}",
                      file=sys.stderr)
                return 1
            print(f"tether serve: {settings.base_url}/ (the approvals page) on the store {settings.store.where}; "
                  "Ctrl-C stops", flush=True)
            await stop.wait()
            print("tether serve: stopping", flush=True)
        finally:
            await runner.cleanup()
    return 0


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    return False


def _read_password(name: str) -> str:
    if sys.stdin.isatty():
        first = getpass.getpass(f"password for {name}: ")
        if getpass.getpass("the same again: ") != first:
            raise UserError("the two passwords differ; nothing was changed")
        return first
    return sys.stdin.readline().rstrip("\r\n")


def _add_user(store: Store, name: str, *, watcher: bool) -> int:
    book = UserBook(store)
    known = {u.name for u in book.users()}
    user = book.add(name, _read_password(name), role="watcher" if watcher else "operator")
    verb = "password and role changed for" if name in known else "added"
    what = "a watcher (sees, cannot decide or stop)" if user.role == "watcher" else "an operator"
    ended = " (their logins to a running server end: they log in again)" if name in known else ""
    print(f"{verb} {user.name}: {what}, on {store.where}{ended}")
    return 0


def _remove_user(store: Store, name: str) -> int:
    UserBook(store).remove(name)
    print(f"removed {name} from {store.where}: their logins to a running server end now, and their open pages end "
          "within seconds")
    return 0


def _list_users(store: Store) -> int:
    users = UserBook(store).users()
    if not users:
        print(f"no users on {store.where}: tether serve --add-user NAME adds one")
    for user in users:
        print(f"{user.name:<24} {user.role}")
    return 0
