"""A run's merge and discard from its web page: forms that work without JavaScript, posted
with the session's CSRF token as every other form, done by the same operation as ``tether
merge`` and ``tether discard`` (:mod:`tether.actions.workspace`), and answered by a page
in words: the conflict or refusal, merged, or asked and waiting for a decision (which is
then on the approvals page like any call). A discard is asked first, on a page of its own."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tether.vocab.state import StateError
from tether.web.auth import may_change, page_context, session_of, watcher_words
from tether.web.pages import DECIDER
from tether.web.render import html, words_page
from tether.actions.workspace import discard_question as question, discard_run, merge_run
from tether.store.protocol import call
from tether.workspaces.merging import waits_on_merge


def _store(request: web.Request) -> Any:
    return request.app[DECIDER].store


def _by(request: web.Request) -> str:
    session = session_of(request)
    assert session is not None  # the guard let no session-less POST through
    return session.user


async def merge(request: web.Request) -> web.Response:
    """POST /runs/RUN/merge: ``into`` (blank: the branch checked out), ``squash``."""
    run_id = request.match_info["run_id"]
    back = f"/runs/{run_id}"
    if not may_change(request):
        return words_page(request, 403, "Merge: not done", watcher_words(request), back=back)
    form = await request.post()
    into = str(form.get("into") or "").strip() or None
    if into is not None and (into.startswith("-") or any(c.isspace() for c in into)):
        return words_page(request, 400, "Merge: not done", f"{into!r} is not a branch name; nothing was asked",
                          back=back)
    try:
        state, words = await merge_run(_store(request), run_id, into=into, squash=bool(form.get("squash")),
                                       by=_by(request))
    except (StateError, OSError) as exc:
        return words_page(request, 409, "Not merged", str(exc), back=back)
    stage = (state.run_workspace.merge or {}).get("stage") if state.run_workspace is not None else None
    title = ("Asked: waiting for a decision" if waits_on_merge(state)
             else "Merged" if stage == "merged" else "Not merged")
    return words_page(request, 200, title, words, back=back)


async def discard_question(request: web.Request) -> web.Response:
    """GET /runs/RUN/discard: what a discard removes, and the button that does it."""
    run_id = request.match_info["run_id"]
    store = _store(request)
    try:
        state = await call(store, store.load, run_id)
    except StateError as exc:
        return words_page(request, 404, "No such run", str(exc))
    if state.run_workspace is None or state.run_workspace.stage == "discarded":
        return words_page(request, 409, "Nothing to discard", f"run {run_id} has no workspace of its own to discard",
                          back=f"/runs/{run_id}")
    return html("discard.html", **page_context(request, run_id=run_id, question=question(state),
                                               back=f"/runs/{run_id}"))


async def discard(request: web.Request) -> web.Response:
    """POST /runs/RUN/discard with ``confirm=yes`` (from the question's page)."""
    run_id = request.match_info["run_id"]
    back = f"/runs/{run_id}"
    if not may_change(request):
        return words_page(request, 403, "Discard: not done", watcher_words(request), back=back)
    form = await request.post()
    if form.get("confirm") != "yes":
        return words_page(request, 400, "Discard: not done", "a discard is confirmed on its own page (Discard… on "
                          "the run's page); nothing was removed", back=back)
    try:
        _, words = await discard_run(_store(request), run_id, by=_by(request))
    except (StateError, OSError) as exc:
        return words_page(request, 409, "Not discarded", str(exc), back=back)
    return words_page(request, 200, "Discarded", words, back=back)


def routes() -> list[web.RouteDef]:
    return [web.post("/runs/{run_id}/merge", merge), web.get("/runs/{run_id}/discard", discard_question),
            web.post("/runs/{run_id}/discard", discard)]
