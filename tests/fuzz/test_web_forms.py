"""Web forms (``tether serve``): the login, a decision, a Stop and a notification link's
form, posted with any fields and any body, by a logged-in operator (with the form's CSRF
token, so the handlers themselves are reached) and by a stranger.

The rule: every answer is a page (or JSON) in words with a 2xx, 3xx or 4xx status, never a
500; and a run changes only when the answer says it was decided: a refused form changes
nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import given, strategies as st

from tether.approvals import DecisionQuery
from tether.vocab.state import NeedsApproval, args_hash
from tether.store.files.store import RunStore

from tests.fuzz.strategies import deep, dumps, garbage_lines, json_values, texts
from tests.web.conftest import Served, csrf_of, logged_in, serving


@dataclass
class Site:
    loop: asyncio.AbstractEventLoop
    served: Served
    ana: aiohttp.ClientSession  # an operator, logged in
    stranger: aiohttp.ClientSession  # no session
    csrf: str
    run_id: str = ""
    call_id: str = ""
    hash: str = ""
    decisions: int = 0

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 60))  # a hang fails

    def new_waiting_run(self) -> None:
        self.run_id = self.run(self.served.waiting_run())
        waiting = self.served.store.load(self.run_id).interruption
        assert isinstance(waiting, NeedsApproval)
        self.call_id, self.hash = waiting.call_id, args_hash(waiting.args)

    def unchanged(self) -> None:
        assert isinstance(self.served.store.load(self.run_id).interruption, NeedsApproval)
        assert len(self.served.store.decisions(DecisionQuery())) == self.decisions


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    from argon2 import PasswordHasher

    from tether.web import users

    tmp = tmp_path_factory.mktemp("web")
    loop = asyncio.new_event_loop()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(users, "_HASHER", PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))
        serving_ = serving(RunStore(tmp / "runs"), tmp)
        served = loop.run_until_complete(serving_.__anext__())

        async def browsers() -> tuple[aiohttp.ClientSession, aiohttp.ClientSession, str]:
            ana = await logged_in(served, "ana")
            return ana, served.client(), await csrf_of(ana)

        try:
            ana, stranger, csrf = loop.run_until_complete(browsers())
            site = Site(loop, served, ana, stranger, csrf)
            try:
                site.new_waiting_run()
                yield site
            finally:
                loop.run_until_complete(ana.close())
                loop.run_until_complete(stranger.close())
        finally:
            loop.run_until_complete(serving_.aclose())
            loop.close()


async def _post(client: aiohttp.ClientSession, path: str, *, data: Any = None, headers: dict | None = None
                ) -> tuple[int, str, dict[str, str]]:
    async with client.post(path, data=data, headers=headers or {}, allow_redirects=False) as response:
        return response.status, await response.text(errors="replace"), dict(response.headers)


def in_words(status: int, text: str) -> None:
    assert status < 500, (status, text[:500])
    assert text.strip() or status in (301, 302, 303), status


def values(site: Site, right: str) -> st.SearchStrategy[str]:
    """A field's value: the right one, or anything."""
    return st.one_of(st.just(right), texts, garbage_lines.map(lambda b: b.decode("utf-8", "replace")))


forms = st.dictionaries(st.sampled_from(["run", "call", "verdict", "hash", "reason", "note", "args", "back", "csrf",
                                         "x"]), texts, max_size=6)


@given(st.data())
def test_any_decision_form_is_answered_in_words_and_changes_only_what_it_says(site: Site,
                                                                             data: st.DataObject) -> None:
    form = {
        "csrf": site.csrf,
        "run": data.draw(values(site, site.run_id), label="run"),
        "call": data.draw(values(site, site.call_id), label="call"),
        "verdict": data.draw(st.sampled_from(["approve", "reject", "", "Approve", "maybe"]), label="verdict"),
        "hash": data.draw(values(site, site.hash), label="hash"),
        **data.draw(st.fixed_dictionaries({}, optional={
            "reason": texts, "args": st.one_of(json_values.map(json.dumps), texts,
                                                st.integers(1_000, 20_000).map(lambda n: deep(n).decode())),
            "back": st.one_of(texts, st.sampled_from(["/", "//evil", "https://evil/", "/runs/x"]))}), label="more"),
    }
    accept = data.draw(st.sampled_from(["application/json", "text/html"]), label="accept")
    status, text, _ = site.run(_post(site.ana, "/decide", data=form, headers={"Accept": accept}))
    in_words(status, text)
    if status >= 300:
        site.unchanged()
        return
    site.run(site.served.settled())
    site.decisions = len(site.served.store.decisions(DecisionQuery()))
    assert form["run"] == site.run_id and form["call"] == site.call_id and form["verdict"] in ("approve", "reject")
    site.new_waiting_run()


@given(st.one_of(texts, st.sampled_from(["x", "..", "%2e%2e"])), st.dictionaries(st.sampled_from(["reason", "x"]),
                                                                                  texts, max_size=2))
def test_any_stop_form_is_answered_in_words(site: Site, run_id: str, form: dict[str, str]) -> None:
    from urllib.parse import quote

    path = f"/runs/{quote(run_id, safe='')}/stop" if run_id else "/runs/x/stop"
    status, text, _ = site.run(_post(site.ana, path, data={"csrf": site.csrf, **form}))
    in_words(status, text)
    site.unchanged()


@given(forms, st.sampled_from(["application/x-www-form-urlencoded", "multipart/form-data", "text/plain",
                                "application/json", None]), st.one_of(garbage_lines, st.binary(max_size=80)))
def test_any_body_to_any_form_is_answered_in_words(site: Site, form: dict[str, str], content_type: str | None,
                                                   body: bytes) -> None:
    """Raw bodies that claim to be forms (a multipart body with no boundary, or a torn one)."""
    headers = {"Content-Type": content_type} if content_type else {}
    for path in ("/decide", f"/runs/{site.run_id}/stop", "/login", "/logout", "/l/x.y"):
        for client in (site.ana, site.stranger):
            if path == "/logout" and client is site.ana:
                continue  # it would end the session the other properties use
            status, text, _ = site.run(_post(client, path, data=body, headers=headers))
            in_words(status, text)
            status, text, _ = site.run(_post(client, path, data=form))
            in_words(status, text)
    site.unchanged()


@given(st.dictionaries(st.sampled_from(["name", "password", "csrf", "next"]), texts, max_size=4),
       st.sampled_from(["ana", "nobody", ""]))
def test_any_login_form_is_answered_in_words_and_goes_nowhere_else(site: Site, form: dict[str, str],
                                                                   name: str) -> None:
    async def attempt() -> tuple[int, str, dict[str, str]]:
        async with site.served.client() as client:  # a browser of its own: a login cookie of its own
            page = await client.get("/login")
            await page.text()
            return await _post(client, "/login", data={"name": name, **form})

    status, text, headers = site.run(attempt())
    in_words(status, text)
    if status == 303:
        location = headers["Location"]
        assert location.startswith("/") and not location.startswith("//")


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.=%~", min_size=1, max_size=60),
       st.dictionaries(st.sampled_from(["reason", "csrf"]), texts, max_size=2))
def test_any_link_form_is_refused_in_words(site: Site, token: str, form: dict[str, str]) -> None:
    for client in (site.ana, site.stranger):
        status, text, _ = site.run(_post(client, f"/l/{token}", data=form))
        in_words(status, text)
        assert status >= 400
    site.unchanged()


# ---- bugs the campaign found, kept as regressions -----------------------------------------

@pytest.mark.parametrize("args", ["[" * 5_000 + "]" * 5_000, '{"path": ' + "1" * 5_000 + "}"],
                         ids=["deep", "too-many-digits"])
def test_found_edited_arguments_are_refused_in_words(site: Site, args: str) -> None:
    """Found: edited arguments nested too deep (RecursionError) or with an integer of more
    than 4,300 digits (a ValueError without ``.msg``) were a 500, not a refusal."""
    form = {"csrf": site.csrf, "run": site.run_id, "call": site.call_id, "verdict": "approve", "hash": site.hash,
            "args": args}
    status, text, _ = site.run(_post(site.ana, "/decide", data=form, headers={"Accept": "application/json"}))
    assert status == 400 and "the edited arguments are not JSON" in json.loads(text)["words"]
    site.unchanged()


@pytest.mark.parametrize("path", ["/decide", "/login", "/l/x.y"])
@pytest.mark.parametrize("content_type, body", [("multipart/form-data", b""),
                                                ("application/x-www-form-urlencoded", b"run=\xff\xfe")],
                         ids=["multipart-without-boundary", "not-utf8"])
def test_found_unreadable_forms_are_refused_in_words(site: Site, path: str, content_type: str, body: bytes) -> None:
    """Found: a body aiohttp's form parser cannot read was a 500 from whichever handler read it."""
    status, text, _ = site.run(_post(site.ana, path, data=body, headers={"Content-Type": content_type}))
    assert status == 400 and "this form could not be read" in text
    site.unchanged()


def test_found_a_login_token_of_any_text_is_refused_in_words(site: Site) -> None:
    """Found: the login form's token was compared as text: a non-ASCII one raised TypeError (500)."""
    async def attempt() -> tuple[int, str, dict[str, str]]:
        async with site.served.client() as client:
            await (await client.get("/login")).text()
            return await _post(client, "/login", data={"name": "ana", "password": "x", "csrf": "é"})

    status, text, _ = site.run(attempt())
    assert status == 403 and "out of date" in text


@pytest.mark.parametrize("run_id", ["x" * 300, "[" * 2_000], ids=["long", "very-long"])
def test_found_run_ids_longer_than_a_file_name_are_refused_in_words(site: Site, run_id: str) -> None:
    """Found: a run id longer than a file name may be (255 bytes) made open() fail with
    ENAMETOOLONG, an OSError the store did not turn into words: a 500."""
    form = {"csrf": site.csrf, "run": run_id, "call": "c", "verdict": "approve"}
    status, text, _ = site.run(_post(site.ana, "/decide", data=form, headers={"Accept": "application/json"}))
    assert status == 404 and "invalid run id" in json.loads(text)["words"]
    site.unchanged()
