"""The approvals page, a run's page, the decisions and Stops they post, and their live updates.

Every page works as plain HTML forms: a decision is a POST, its answer a page in words.
``static/app.js`` makes them live where JavaScript runs: it follows ``/events``
(server-sent events from the server's one watch of the store, :mod:`tether.web.live`) and
draws the list again from ``/fragment/...`` when something it shows changed, and it posts
the forms with ``fetch`` so the answer appears on the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tether.observe.report import as_sent, warnings_of
from tether.store.protocol import call
from tether.approvals.decisions import edit_json
from tether.vocab.state import NeedsApproval, RunState, StateError, args_hash
from tether.web.auth import WATCH_ONLY, may_change, page_context, session_of, watcher_words
from tether.web.decide import Answer, Decider
from tether.web.live import Hub
from tether.web.pending import Card, card_of, pending_cards
from tether.web.render import fragment, html, words_page
from tether.actions.workspace import discardable, mergeable
from tether.workspaces.changes import changes, diff
from tether.workspaces.checkpoints import listing
from tether.workspaces.git import GitError

DECIDER = web.AppKey("decider", Decider)
HUB = web.AppKey("hub", Hub)
NOTICES = web.AppKey("notices", list)  # callables giving lines for the page's banner (the notification sender)
PING_S = 15.0  # a comment on an idle event stream, so proxies and phones keep it open
TRANSCRIPT_TAIL = 30
FIRST_CARDS = 50  # a phone draws these first; the rest are one tap away (?all=1)
MAX_TEXT = 2000  # characters of a message shown; the rest is in tether show
MAX_FILES = 200  # a run's changed files listed on its page; the rest are in tether diff --stat
MAX_DIFF_LINES = 400  # lines of a file's diff shown; the rest are in tether diff RUN PATH
MAX_LINE = 500
MAX_CHECKPOINTS = 100  # a run's last checkpoints listed on its page; tether checkpoints RUN has them all


# ---- reading ---------------------------------------------------------------------------

async def _cards(request: web.Request) -> list[Card]:
    store = request.app[DECIDER].store
    return await call(store, pending_cards, store, apply_deadlines=not request.app[WATCH_ONLY])


async def _banner(request: web.Request) -> list[str]:
    """What the page says above everything: the store not followed live, notifications that
    keep failing (read off the event loop for a network store)."""
    lines: list[str] = []
    problem = request.app[HUB].problem
    if problem:
        lines.append(problem)
    store = request.app[DECIDER].store
    for source in request.app[NOTICES]:
        with contextlib.suppress(Exception):  # a banner that cannot be read is no reason to fail the page
            lines.extend(await call(store, source))
    return lines


async def _listing(request: web.Request) -> dict[str, Any]:
    """The cards a page shows: the newest :data:`FIRST_CARDS` (``?all=1``: every one)."""
    cards, banner = await _cards(request), await _banner(request)
    shown = cards if request.query.get("all") else cards[:FIRST_CARDS]
    return page_context(request, cards=shown, total=len(cards), now=time.time(), banner=banner, back="/")


async def approvals(request: web.Request) -> web.Response:
    return html("approvals.html", where=request.app[DECIDER].store.where, **await _listing(request))


async def approvals_fragment(request: web.Request) -> web.Response:
    return web.Response(text=fragment("_cards.html", **await _listing(request)), content_type="text/html")


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as its page shows it."""

    run_id: str
    status: str
    agent: str
    source: str
    task: str
    cost_usd: float
    turns: int
    stoppable: bool
    card: Card | None
    messages: list[dict[str, str]]
    reason: str
    warnings: list[str]
    changes: RunChanges | None = None
    mergeable: bool = False
    discardable: bool = False
    forked_from: str = ""
    """``RUN at checkpoint N`` for a fork (tether fork), else empty."""
    checkpoints: tuple[dict[str, Any], ...] = ()
    """Its checkpoints, newest first (docs/checkpoints.md): ``step``, ``when``, ``what``, ``files``."""


@dataclass(frozen=True, slots=True)
class ChangedFile:
    """A file a run changed, as its page shows it: its +/- counts and its diff (bounded)."""

    path: str
    status: str
    added: int | None
    deleted: int | None
    diff: list[tuple[str, str]]
    """Each line of its diff with its kind (``add``, ``del``, ``hunk``, ``head``, ``""``), for the colours."""
    more: int
    """Lines of its diff left out (``tether diff RUN PATH`` has them)."""


@dataclass(frozen=True, slots=True)
class RunChanges:
    """What a run with a workspace of its own changed: its files, or why they cannot be read."""

    words: str
    files: list[ChangedFile]
    problem: str = ""


async def _changes_of(state: RunState) -> RunChanges | None:
    """The run's changes, read now (git, as asyncio subprocesses), or None: it has no workspace."""
    ws = state.run_workspace
    if ws is None:
        return None
    if ws.stage == "discarded":
        return RunChanges("", [], "its workspace was discarded (tether discard): its changes are gone")
    if ws.path is None or ws.base_commit is None or ws.stage in ("planned", "creating"):
        return RunChanges("", [], f"its {ws.kind} is not made yet: it is made when the run starts")
    if ws.host and ws.host != socket.gethostname():
        return RunChanges("", [], f"its workspace is on the host {ws.host}: tether diff {state.run_id} there shows it")
    try:
        found = await changes(ws)
        whole = await diff(ws) if found.files else ""
    except (GitError, OSError) as exc:
        return RunChanges("", [], f"its changes could not be read: {exc}")
    chunks = _by_file(whole)
    files = []
    for f in found.files[:MAX_FILES]:
        lines = chunks.get(f.path, [])
        files.append(ChangedFile(f.path, f.status, f.added, f.deleted,
                                 [(_kind(line), line[:MAX_LINE]) for line in lines[:MAX_DIFF_LINES]],
                                 max(0, len(lines) - MAX_DIFF_LINES)))
    return RunChanges(found.words(), files,
                      f"{len(found.files) - MAX_FILES} more files: tether diff {state.run_id} --stat lists them"
                      if len(found.files) > MAX_FILES else "")


def _by_file(whole: str) -> dict[str, list[str]]:
    """A unified diff of many files, cut at each ``diff --git a/P b/P``, by path."""
    out: dict[str, list[str]] = {}
    current: list[str] = []
    for line in whole.splitlines():
        if line.startswith("diff --git a/"):
            rest = line[len("diff --git a/"):]
            half = (len(rest) - len(" b/")) // 2  # "P b/P": both halves the same path
            current = out.setdefault(rest[:half], [])
        current.append(line)
    return out


def _kind(line: str) -> str:
    if line.startswith(("+++", "---", "diff --git", "index ", "new file", "deleted file")):
        return "head"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "hunk" if line.startswith("@@") else ""


async def _run_view(request: web.Request, run_id: str) -> RunView:
    decider = request.app[DECIDER]
    store = decider.store

    def read() -> tuple[Any, RunState, Any, list[dict[str, Any]]]:
        summary = store.summary(run_id)
        state = store.load(run_id)
        owner = store.owner(run_id)
        # Only an ACP agent's run records warnings (a file it wrote itself, outside its
        # workspace): the trace of any other run is not read for them.
        warnings = warnings_of(store.read_trace(run_id)) if state.of_acp_agent else []
        return summary, state, owner, warnings

    summary, state, owner, warnings = await call(store, read)
    held = (owner is not None and owner.alive) or decider.driving(run_id)
    live = summary.status == "running" and held
    waits_held = isinstance(state.interruption, NeedsApproval) and held
    card = card_of(summary) if isinstance(state.interruption, NeedsApproval) else None
    return RunView(run_id, summary.shown_status, summary.agent or summary.model, summary.source, summary.task,
                   summary.cost_usd, summary.turns, live or waits_held, card, _tail(state), _reason(state),
                   [w["text"] for w in warnings], await _changes_of(state),
                   mergeable(state) and not held, discardable(state) and not held,
                   f"{state.forked_from['run_id']} at checkpoint {state.forked_from['step']}" if state.forked_from
                   else "", await _checkpoints_of(state))


async def _checkpoints_of(state: RunState) -> tuple[dict[str, Any], ...]:
    """The run's last checkpoints, newest first, read now (none when it has no workspace ready)."""
    ws = state.run_workspace
    if ws is None or ws.stage != "ready" or ws.base_commit is None or (ws.host and ws.host != socket.gethostname()):
        return ()
    try:
        found = await listing(ws, state.run_id)
    except (GitError, OSError):
        return ()
    return tuple({"step": cp.step, "when": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(cp.at)),
                  "what": cp.label or (f"{cp.tool} ({cp.call_id})" if cp.tool else ""), "files": cp.files}
                 for cp in reversed(found[-MAX_CHECKPOINTS:]))


def _tail(state: RunState) -> list[dict[str, str]]:
    out = []
    for message in as_sent(state)[-TRANSCRIPT_TAIL:]:
        role = str(message.get("role") or "")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content else ""
        calls = [f"{c.get('function', {}).get('name', '?')}({c.get('function', {}).get('arguments', '')})"
                 for c in message.get("tool_calls") or ()]
        if calls:
            text = (text + "\n" if text else "") + "\n".join(f"→ {c}" for c in calls)
        if len(text) > MAX_TEXT:
            text = text[:MAX_TEXT] + f"… ({len(text) - MAX_TEXT} more characters: tether show {state.run_id})"
        out.append({"role": role, "text": text})
    return out


def _reason(state: RunState) -> str:
    if state.error:
        return state.error
    it = state.interruption
    if it is None or isinstance(it, NeedsApproval):
        return ""
    words = getattr(it, "reason", "") or it.type
    by = getattr(it, "by", None)
    return f"{words} (by {by})" if by else words


async def run_page(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    try:
        view = await _run_view(request, run_id)
    except StateError as exc:
        return words_page(request, 404, "No such run", str(exc))
    return html("run.html", **page_context(request, run=view, now=time.time(), banner=await _banner(request),
                                           back=f"/runs/{run_id}"))


async def run_fragment(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    try:
        view = await _run_view(request, run_id)
    except StateError as exc:
        return web.Response(status=404, text=str(exc))
    body = fragment("_run.html", **page_context(request, run=view, now=time.time(), back=f"/runs/{run_id}"))
    return web.Response(text=body, content_type="text/html")


# ---- changing ---------------------------------------------------------------------------

def _respond(request: web.Request, answer: Answer, title: str, back: str) -> web.Response:
    """The answer as JSON for the page's script, else as a page in words."""
    if "application/json" in request.headers.get("Accept", ""):
        return web.json_response({"ok": answer.ok, "words": answer.words}, status=answer.status)
    return words_page(request, answer.status, title if answer.ok else f"{title}: not done", answer.words, back=back)


async def decide(request: web.Request) -> web.Response:
    """POST /decide: run, call, hash (of the arguments shown), verdict, reason, args."""
    form = await request.post()
    back = _back(form.get("back"))
    if not may_change(request):
        return _respond(request, Answer(False, watcher_words(request), 403), "Decision", back)
    run_id, call_id = str(form.get("run") or ""), str(form.get("call") or "")
    verdict = str(form.get("verdict") or "")
    if not run_id or not call_id or verdict not in ("approve", "reject"):
        return _respond(request, Answer(False, "this form lacks the run, the call or the verdict; nothing was "
                                               "decided", 400), "Decision", back)
    text = str(form.get("reason") or form.get("note") or "").strip()
    edited = _edited(form.get("args")) if verdict == "approve" else None
    if isinstance(edited, Answer):
        return _respond(request, edited, "Decision", back)
    if edited is not None and args_hash(edited) == str(form.get("hash") or ""):
        edited = None  # opened, not changed: the call runs as the model asked, and is not recorded as edited
    session = session_of(request)
    assert session is not None  # the guard let no session-less POST through
    answer = await request.app[DECIDER].decide(run_id, call_id, verdict,  # type: ignore[arg-type]
                                               text, by=session.user, bound_hash=str(form.get("hash") or "") or None,
                                               args=edited)
    return _respond(request, answer, "Approved" if verdict == "approve" else "Rejected", back)


def _edited(given: Any) -> str | Answer | None:
    """The edited arguments, when the form changed them: a JSON object, or a refusal."""
    text = str(given or "").strip()
    if not text:
        return None
    try:
        return edit_json(text)
    except ValueError as exc:
        return Answer(False, f"{exc}; nothing was decided", 400)


async def stop(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    form = await request.post()
    back = f"/runs/{run_id}"
    if not may_change(request):
        return _respond(request, Answer(False, watcher_words(request), 403), "Stop", back)
    session = session_of(request)
    assert session is not None
    answer = await request.app[DECIDER].stop(run_id, str(form.get("reason") or "").strip(), by=session.user)
    return _respond(request, answer, "Stop", back)


def _back(given: Any) -> str:
    text = str(given or "/")
    return text if text.startswith("/") and not text.startswith("//") else "/"


# ---- live -------------------------------------------------------------------------------

async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``data: {"runs": {RUN: [KINDS]}, "all": bool}`` after each change
    (merged while the page reads), a comment every :data:`PING_S` when nothing happens, and
    ``event: ended`` with the words when the session ends meanwhile (its user removed, or
    given a new password or role: :mod:`tether.web.sessions`), after which the stream closes
    and the page's script reloads to the login."""
    hub = request.app[HUB]
    session = session_of(request)
    assert session is not None  # the guard let no session-less request through
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                           "X-Accel-Buffering": "no"})
    await response.prepare(request)
    with hub.listen() as listener, session.held(listener.wake.set):
        await response.write(b"retry: 2000\n: ready\n\n")
        while True:
            if session.ended is None and not hub.closing:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(listener.wake.wait(), PING_S)
            if hub.closing:
                break
            if session.ended is not None:
                ended = json.dumps({"words": f"{session.ended}: log in again"})
                await response.write(f"event: ended\ndata: {ended}\n\n".encode())
                break
            if not listener.wake.is_set():
                await response.write(b": ping\n\n")
                continue
            changed, everything = listener.take()
            data = json.dumps({"runs": changed, "all": everything})
            await response.write(f"data: {data}\n\n".encode())
    return response


def routes() -> list[web.RouteDef]:
    return [
        web.get("/", approvals), web.get("/fragment/approvals", approvals_fragment),
        web.post("/decide", decide),
        web.get("/runs/{run_id}", run_page), web.get("/fragment/runs/{run_id}", run_fragment),
        web.post("/runs/{run_id}/stop", stop),
        web.get("/events", events),
    ]

