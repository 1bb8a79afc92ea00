"""The sender: one process per store sends every notification, once.

:func:`run_sender` is what ``tether serve`` and ``tether notify`` run. In order:

1. **The lease** (:mod:`tether.notify.storage`: an ``flock`` or a PostgreSQL session lock).
   Held by another process, it says so once and tries every second until that process
   ends however it ends, then takes over: two ``tether serve`` of a store never both send.
2. **Catching up.** With the store's watch in place first (nothing written from then on
   is missed), it sends what was left unsent by the last sender (its intents in the
   ledger), the approvals waiting now, and what the runs' traces say happened since the
   last sender stopped (its cursor on the store; a first sender starts from now, and does
   not send the history of the store).
3. **Following.** Each batch of changes the watch pushes (inotify, LISTEN/NOTIFY) is read
   for notices (:mod:`tether.notify.notices`), each sent to the channels that want it. Every
   few seconds the runs seen running are asked whether a process still holds them (a
   killed process writes nothing: that is how an orphan is seen).

**Once.** For each (channel, notice key) the ledger records the intent, with the notice,
before the POST, and ``sent`` after the receiver's answer. A sender that finds a key sent
skips it; one that finds an intent (its predecessor ended between the two) sends it
again: the one window where a notification can arrive twice is a process ending after
the receiver's 2xx and before the ledger's write, milliseconds. A webhook's body and its
``Idempotency-Key`` header carry a stable id for receivers that want exactly once.

**Failures** are retried with a doubling backoff (1 s up to 5 min), in order, per
channel; after ten tries the notification is given up (recorded ``failed``, not tried
again). Each channel's failures are kept on the store as a status record that
:func:`sender_status` words for the console's header and the web page, and cleared by the
channel's next success. Secrets never reach a log or a status line
(:func:`tether.notify.kinds.redact`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from tether.actions.deadlines import apply_due
from tether.notify import kinds
from tether.notify.channels import NotifyChannel, load_channels
from tether.notify.links import issue_link, link_url
from tether.notify.notices import Detector, Notice
from tether.notify.storage import Lease, storage_for
from tether.store.protocol import Store, call
from tether.vocab.state import StateError
from tether.store.changes import NEW, REMOVED, TRACE, RunChange

log = logging.getLogger("tether.notify")

CURSOR = "cursor"
STALE_S = 60.0
"""A status whose retry is this far past was left by a sender that ended."""


@dataclass(frozen=True, slots=True)
class SenderSettings:
    """How the sender paces itself (the tests shorten the waits)."""

    first_retry_s: float = 1.0
    max_retry_s: float = 300.0
    give_up_after: int = 10
    liveness_every_s: float = 5.0
    """How often the runs seen running are asked whether a process holds them (orphans)."""
    lease_every_s: float = 1.0
    """How often a waiting sender tries the lease."""
    timeout_s: float = 10.0
    cursor_every_s: float = 5.0
    restart_after_s: float = 5.0
    """How long the sender waits to start again after an error it cannot go on from."""
    catch_up_margin_s: float = 120.0
    """How far before the last sender's cursor a new one reads again (clocks of other
    hosts; trace lines committed late): the ledger keeps the overlap from being sent twice."""


class _Failed(Exception):
    pass


# ---- the status lines --------------------------------------------------------------------------

def _clock(ts: float) -> str:
    return time.strftime("%H:%M", time.localtime(ts))


def status_line(record: dict[str, Any], now: float | None = None) -> str:
    """A channel's status record in words (see :func:`sender_status`)."""
    now = time.time() if now is None else now
    failures = int(record.get("failures") or 0)
    said = f"{record.get('channel')}: {failures} failure{'s' if failures != 1 else ''}, " \
           f"last {record.get('last')!r} at {_clock(float(record.get('at') or now))}"
    if record.get("gave_up"):
        return f"{said}; gave up on {record.get('gave_up')}"
    retry_at = record.get("retry_at")
    if isinstance(retry_at, (int, float)):
        if now - retry_at > STALE_S:  # its sender ended meanwhile (killed): said, not "retrying in 0 s"
            return (f"{said}; not tried again since {_clock(retry_at)}: is a sender running "
                    "(tether serve, tether notify)?")
        return f"{said}; retrying in {max(0, round(retry_at - now))} s"
    return said


def sender_status(store: Store) -> list[str]:
    """Each channel's failures now, one line each (``ntfy 'phone': 3 failures, last
    'connection refused' at 04:12; retrying in 8 s``), read from the store, so any process
    of the store can show them; empty when every notification went. Blocking on a
    PostgreSQL store: call it off the event loop."""
    try:
        records = storage_for(store).status_all()
    except (StateError, OSError, ValueError) as exc:
        return [f"notifications: their status cannot be read ({exc})"]
    now = time.time()
    return [status_line(record, now) for record in records]


# ---- the sender ---------------------------------------------------------------------------------

async def run_sender(store: Store, *, config_path: Path | str | None = None, public_url: str | None,
                     stop: asyncio.Event, settings: SenderSettings | None = None,
                     channels: list[NotifyChannel] | None = None, ready: asyncio.Event | None = None) -> None:
    """Send the store's notifications until ``stop`` is set (see the module). ``channels``
    (default: the ``[notify.*]`` tables of the agent file, checked first: a bad one is a
    :class:`tether.agents.config.ConfigError` before anything starts). Everything it starts (the
    watch, the HTTP client, the channels' tasks, the lease) is stopped on the way out,
    cancellation included (and re-raised). ``ready`` is set once this process holds the
    lease and follows the store (what is written from then on is sent)."""
    settings = settings or SenderSettings()
    since = time.time()  # a store's first sender sends what happens from here on, not the store's past
    if channels is None:
        channels = load_channels(config_path)
    if not channels:
        log.info("no [notify.NAME] tables in the agent file: no notifications are sent")
        await stop.wait()
        return
    if not public_url:
        log.warning("no public URL (--public-url): notifications carry no links to approve or reject with")
    storage = storage_for(store)
    lease = storage.lease()
    hidden = _Hidden(channels)
    for name in _CHATTY:
        logging.getLogger(name).addFilter(hidden)
    try:
        await _send(store, channels, lease, public_url, stop, settings, since, ready)
    finally:
        for name in _CHATTY:
            logging.getLogger(name).removeFilter(hidden)


_CHATTY = ("httpx", "httpcore")
"""Libraries that log each request's URL (httpx at INFO): a channel's URL is its password."""


class _Hidden(logging.Filter):
    """Redacts the channels' secrets from the HTTP library's own log records."""

    def __init__(self, channels: list[NotifyChannel]) -> None:
        super().__init__()
        self.channels = channels

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if any(kinds.shown_url(c) in text for c in self.channels):  # a request to a channel: others are not ours
            record.msg, record.args = _redacted(text, self.channels), ()
        return True


async def _send(store: Store, channels: list[NotifyChannel], lease: Lease, public_url: str | None,
                stop: asyncio.Event, settings: SenderSettings, since: float, ready: asyncio.Event | None) -> None:
    """Take the lease (waiting for it), send while it is held; again when it is lost."""
    said_waiting = False
    unreachable: str | None = None
    async with httpx.AsyncClient(timeout=settings.timeout_s, follow_redirects=False) as client:
        try:
            while not stop.is_set():
                try:
                    taken = await asyncio.to_thread(lease.take)
                    unreachable = None
                except (StateError, OSError) as exc:
                    if unreachable != str(exc):  # said once, not every second while the store is away
                        log.warning("the sender lease cannot be taken (%s); trying again every %g s", exc,
                                    settings.lease_every_s)
                    unreachable = str(exc)
                    await _pause(stop, settings.lease_every_s)
                    continue
                if not taken:
                    if not said_waiting:
                        holder = await asyncio.to_thread(_quietly, lease.holder)
                        log.warning("another sender holds %s's notifications (%s): this one waits, and takes "
                                    "over when it ends", store.where, holder or "its process is not known")
                        said_waiting = True
                    await _pause(stop, settings.lease_every_s)
                    continue
                if said_waiting:
                    log.warning("took over sending %s's notifications", store.where)
                log.info("sending %s's notifications to %s", store.where,
                         ", ".join(f"{c.label} ({kinds.shown_url(c)})" for c in channels))
                try:
                    await _Sender(store, channels, lease, client, public_url, settings, stop, since).run(ready)
                except StateError as exc:  # the database went away, and the lease with it
                    log.warning("%s; waiting to take the lease again", _redacted(str(exc), channels))
                    await _pause(stop, settings.lease_every_s)
                except Exception as exc:
                    # Whatever else stops it (a disk, a database's refusal): said, and started again.
                    log.error("the sender stopped on an error (%s); it starts again in %g s",
                              _redacted(f"{type(exc).__name__}: {exc}", channels), settings.restart_after_s)
                    await _pause(stop, settings.restart_after_s)
                finally:
                    lease.release()
        finally:
            lease.release()


def _redacted(text: str, channels: list[NotifyChannel]) -> str:
    for channel in channels:
        text = kinds.redact(text, channel)
    return text


def _quietly(read: Any) -> Any:
    try:
        return read()
    except Exception:
        return None


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


class _Sender:
    """One holding of the lease: catch up, then follow the store until stopped."""

    def __init__(self, store: Store, channels: list[NotifyChannel], lease: Lease, client: httpx.AsyncClient,
                 public_url: str | None, settings: SenderSettings, stop: asyncio.Event, since: float) -> None:
        self.store = store
        self.storage = storage_for(store)
        self.channels = {c.name: c for c in channels}
        self.lease = lease
        self.client = client
        self.public_url = public_url
        self.settings = settings
        self.stop = stop
        self.since = since
        self.source = store.trace_source()
        self.detector = Detector(store)
        self.queues: dict[str, asyncio.Queue[Notice]] = {c.name: asyncio.Queue() for c in channels}
        self.queued: set[tuple[str, str]] = set()
        self.failures: dict[str, int] = {}
        self.inflight: set[asyncio.Future[str | None]] = set()
        self.cursor_saved = 0.0

    async def run(self, ready: asyncio.Event | None) -> None:
        workers = [asyncio.create_task(self._work(c), name=f"tether notify {c.label}") for c in self.channels.values()]
        watcher = self.store.watch()
        waiting: asyncio.Future[Any] | None = None
        try:
            async with watcher:
                if self.public_url:
                    await asyncio.to_thread(self.storage.key)  # read once, off the loop: links are then computed
                started = time.time()
                unsent, found = await asyncio.to_thread(self._catch_up)
                for channel, notice in unsent:
                    self._enqueue(channel, notice)
                await self._dispatch(found)
                await asyncio.to_thread(self.storage.meta_put, CURSOR, repr(started))
                self.cursor_saved = started
                if ready is not None:
                    ready.set()
                checked = time.monotonic()
                while not self.stop.is_set():
                    if waiting is None:
                        waiting = asyncio.ensure_future(anext(watcher))
                    stopped = asyncio.ensure_future(self.stop.wait())
                    left = max(0.0, self.settings.liveness_every_s - (time.monotonic() - checked))
                    done, _ = await asyncio.wait({waiting, stopped, *workers}, timeout=left,
                                                 return_when=asyncio.FIRST_COMPLETED)
                    stopped.cancel()
                    if self.stop.is_set():
                        break
                    for worker in workers:
                        if worker in done:
                            worker.result()  # a channel's task ends only by an error: the lease lost
                    began = time.time()
                    notices: list[Notice] = []
                    if waiting in done:
                        finished, waiting = waiting, None
                        try:
                            batch = finished.result()
                        except StopAsyncIteration:
                            raise StateError(f"the watch of {self.store.where} ended") from None
                        notices += await asyncio.to_thread(self._changed, batch)
                    if time.monotonic() - checked >= self.settings.liveness_every_s:
                        notices += await asyncio.to_thread(self.detector.orphans)
                        if self.detector.due(time.time()):
                            await asyncio.to_thread(self._apply_deadlines)
                        checked = time.monotonic()
                    await self._dispatch(notices)
                    if began - self.cursor_saved >= self.settings.cursor_every_s:
                        await asyncio.to_thread(self.storage.meta_put, CURSOR, repr(began))
                        self.cursor_saved = began
        finally:
            if waiting is not None:
                waiting.cancel()
                with contextlib.suppress(BaseException):
                    await waiting
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            if self.inflight:  # POSTs under way: their answers recorded, within a request's timeout
                under_way = set(self.inflight)
                _, late = await asyncio.wait(under_way, timeout=self.settings.timeout_s + 1)
                for attempt in late:
                    attempt.cancel()
                await asyncio.gather(*under_way, return_exceptions=True)
            if self.stop.is_set() and self.cursor_saved:  # a clean stop: the next sender reads from here
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(self.storage.meta_put, CURSOR, repr(time.time()))
            if not self.failures:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(self._clear_status)

    def _clear_status(self) -> None:
        for name in self.channels:
            self.storage.status_put(self.channels[name].label, None)

    def _apply_deadlines(self) -> None:
        """A waiting call's deadline passed: apply it, as ``tether runs`` would, to the runs
        no process holds (a live owner applies its own). An escalation is the notification
        channel's to send, so its sender does not wait for someone to list the runs."""
        try:
            for words in apply_due(self.store):
                log.info("deadline: %s", words)
        except Exception as exc:  # a role that may only read, a run taken meanwhile: said, not fatal
            log.warning("a passed decision deadline could not be applied (%s)", exc)

    # ---- finding notices (off the loop) --------------------------------------------------------
    def _catch_up(self) -> tuple[list[tuple[str, Notice]], list[Notice]]:
        """What the last sender left unsent, and what happened since its cursor."""
        unsent: list[tuple[str, Notice]] = []
        for channel, text in self.lease.ledger_unsent():
            if channel not in self.channels:
                continue
            notice = Notice.from_json(text)
            if self.detector.still_waits(notice):
                unsent.append((channel, notice))
            else:
                self.lease.ledger_put(channel, notice.key, "dropped")
        saved = self.storage.meta_get(CURSOR)
        try:
            cutoff = float(saved) - self.settings.catch_up_margin_s if saved else self.since
        except ValueError:
            cutoff = self.since
        found: list[Notice] = []
        for run_id, records in self.source.catch_up(cutoff).items():
            found += self.detector.records(run_id, records)
        try:
            summaries = self.store.summaries()
        except StateError as exc:
            log.warning("the runs cannot be listed (%s); only what happens from now on is sent", exc)
            summaries = []
        waiting = set()
        for summary in summaries:
            if summary.status == "running":
                if summary.liveness == "orphaned" and summary.updated_at >= cutoff:
                    found.append(self.detector.orphaned(summary))
                elif summary.liveness != "orphaned":
                    self.detector.running.add(summary.run_id)
            pending = self.detector.pending(summary)
            if pending is not None:
                waiting.add((pending.run_id, pending.call_id))
                found.append(pending)
        # An approval read from the past is sent only if its call still waits.
        return unsent, [n for n in found if n.event != "approval" or (n.run_id, n.call_id) in waiting]

    def _changed(self, batch: list[RunChange]) -> list[Notice]:
        notices: list[Notice] = []
        for change in batch:
            if REMOVED in change:
                self.source.forget(change.run_id)
                self.detector.running.discard(change.run_id)
                continue
            if change.what & {TRACE, NEW}:
                try:
                    records = self.source.new_records(change.run_id)
                except StateError as exc:
                    log.warning("run %s: its trace cannot be read (%s)", change.run_id, exc)
                    continue
                notices += self.detector.records(change.run_id, records)
        return notices

    # ---- sending --------------------------------------------------------------------------------
    async def _dispatch(self, notices: list[Notice]) -> None:
        """Record each (channel, notice) intent not recorded yet, then queue it."""
        wanted = [(c.name, n) for n in notices for c in self.channels.values()
                  if c.wants(n.event, n.agent, n.tool) and (c.name, n.key) not in self.queued]
        if not wanted:
            return
        fresh = await asyncio.to_thread(self._intend, wanted)
        for channel, notice in fresh:
            self._enqueue(channel, notice)

    def _intend(self, wanted: list[tuple[str, Notice]]) -> list[tuple[str, Notice]]:
        fresh = []
        for channel, notice in wanted:
            state = self.lease.ledger_get(channel, notice.key)
            if state is not None and state != "sending":
                continue  # sent, given up or dropped: once is once
            if state is None:
                self.lease.ledger_put(channel, notice.key, "sending", notice.to_json())
            fresh.append((channel, notice))
        return fresh

    def _enqueue(self, channel: str, notice: Notice) -> None:
        if (channel, notice.key) in self.queued:
            return
        self.queued.add((channel, notice.key))
        self.queues[channel].put_nowait(notice)

    async def _work(self, channel: NotifyChannel) -> None:
        queue = self.queues[channel.name]
        while True:
            notice = await queue.get()
            await self._deliver(channel, notice)

    def _links(self, channel: NotifyChannel, notice: Notice) -> dict[str, str]:
        """The run's page, and for an approval the links that decide it (none without a public URL)."""
        if not self.public_url:
            return {}
        links = {"run": f"{self.public_url.rstrip('/')}/runs/{quote(notice.run_id, safe='')}"}
        if notice.event == "approval" and notice.call_id and notice.args_hash is not None:
            for action in ("approve", "reject"):
                links[action] = link_url(self.public_url, issue_link(
                    self.store, run_id=notice.run_id, call_id=notice.call_id, args_hash=notice.args_hash,
                    action=action, ttl_s=channel.link_ttl_s, bearer=channel.bearer))
        return links

    async def _deliver(self, channel: NotifyChannel, notice: Notice) -> None:
        links = await call(self.store, self._links, channel, notice)
        sent = kinds.request(channel, notice, links)
        what = f"{notice.event} of {notice.run_id}" + (f" ({notice.call_id})" if notice.call_id else "")
        tries = 0
        while True:
            # A stop does not cut a POST from its record: the attempt runs on, shielded, and the
            # sender waits for it (run's cleanup), so a clean stop never leaves a sent one unrecorded.
            attempt = asyncio.ensure_future(self._attempt(channel, notice, sent))
            self.inflight.add(attempt)
            attempt.add_done_callback(self.inflight.discard)
            words = await asyncio.shield(attempt)
            if words is None:
                if self.failures.pop(channel.name, None):
                    await asyncio.to_thread(self.storage.status_put, channel.label, None)
                    log.warning("%s: sending again", channel.label)
                log.info("%s: sent the %s", channel.label, what)
                return
            tries += 1
            failures = self.failures[channel.name] = self.failures.get(channel.name, 0) + 1
            now = time.time()
            record: dict[str, Any] = {"channel": channel.label, "failures": failures, "last": words, "at": now}
            if tries >= self.settings.give_up_after:
                record["gave_up"] = f"the {what} after {tries} tries"
                await asyncio.to_thread(self.lease.ledger_put, channel.name, notice.key, "failed")
                await asyncio.to_thread(self.storage.status_put, channel.label, record)
                log.error("%s: %s", channel.label, status_line(record, now).split(": ", 1)[1])
                return
            delay = min(self.settings.first_retry_s * 2 ** (tries - 1), self.settings.max_retry_s)
            record["retry_at"] = now + delay
            await asyncio.to_thread(self.storage.status_put, channel.label, record)
            log.warning("%s", status_line(record, now))
            await asyncio.sleep(delay)


    async def _attempt(self, channel: NotifyChannel, notice: Notice, sent: kinds.Request) -> str | None:
        """One POST, and ``sent`` recorded when it went (None); else why not, in words."""
        try:
            response = await self.client.post(sent.url, json=sent.body, headers=sent.headers)
            if not 200 <= response.status_code < 300:
                raise _Failed(f"HTTP {response.status_code} {response.reason_phrase}".strip())
        except (httpx.HTTPError, _Failed) as exc:
            return kinds.redact(_describe(exc), channel)
        await asyncio.to_thread(self.lease.ledger_put, channel.name, notice.key, "sent")
        return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, _Failed):
        return str(exc)
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    cause: BaseException | None = exc
    while cause is not None:  # httpx words a refused connection "All connection attempts failed"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, OSError) and cause.strerror:
            return f"cannot connect ({cause.strerror.lower()})"
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({str(exc) or type(exc).__name__})"
    return str(exc) or type(exc).__name__
