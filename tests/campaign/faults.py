"""The fault campaign: what a whole run does when the provider or the disk misbehaves.

``tests/unit/test_client.py`` proves the client's classification one request at a time;
here each fault is injected under a real run (harness, loop, trace, saved state), and
the checks are about the run: how it ends, why, at what cost, after how many requests,
and what the trace says. Each case asserts, then returns the figure shown in the
``make campaign`` table; ``tests/unit/test_faults.py`` runs the same cases under pytest.
"""

from __future__ import annotations

import asyncio
import errno
import io
import random
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import httpx

import tether.store.files.handle
from tether.tui import cli
from tether.models.client import ModelClient
from tether.harness import Harness
from tether.demo.provider import FaultPlan, create_app, scenarios
from tether.demo.provider.server import running_provider
from tether.vocab.state import ProviderOutage, RunState, StateError, Status
from tether.store.files.layout import TRACE_FILE
from tether.store.files.store import RunStore
from tether.store.protocol import SaveError
from tether.store.trace import read_trace
from tether.demo.agents import DEMO

from tests.campaign.server import CountingApp

TAG = "fault"
HANG_CAP_S = 30.0  # only keeps a regression from hanging the campaign; never the thing measured


@dataclass(frozen=True)
class FaultCase:
    fault: str
    handled: str
    check: Callable[[Path], str]


CASES: list[FaultCase] = []


def case(fault: str, handled: str) -> Callable[[Callable[[Path], str]], Callable[[Path], str]]:
    def register(check: Callable[[Path], str]) -> Callable[[Path], str]:
        CASES.append(FaultCase(fault, handled, check))
        return check

    return register


# ---- helpers ---------------------------------------------------------------------

@dataclass
class Ran:
    state: RunState
    requests: int
    trace: list[dict[str, Any]]

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.trace if r["kind"] == kind]


def run_plan(tmp: Path, app: Any | None = None, *, client: ModelClient | None = None, **client_kw: Any) -> Ran:
    """The plan scenario under one Harness, against ``app`` in process (counted) or ``client``."""
    counter = CountingApp(app) if app is not None else None
    if client is None:
        assert counter is not None
        client = ModelClient(f"http://provider/{TAG}/v1", transport=httpx.ASGITransport(app=counter), **client_kw)

    async def go() -> RunState:
        async with Harness(tmp / "runs", tmp / "ws", client=client, agent_sets=(DEMO,)) as harness:
            state = harness.new_run("plan", "Which file mentions a timeout?")
            return (await asyncio.wait_for(harness.run(state.run_id), HANG_CAP_S)).state

    state = asyncio.run(go())
    trace = list(read_trace(tmp / "runs" / state.run_id / TRACE_FILE))
    return Ran(state, counter.requests[TAG] if counter else 0, trace)


_clean: dict[str, float] = {}


def clean_cost(tmp: Path) -> float:
    """The plan's cost with no fault, for 'a retried request is not paid twice'."""
    if "plan" not in _clean:
        _clean["plan"] = run_plan(tmp / "clean", create_app()).state.cost_usd
    return _clean["plan"]


def stopped(ran: Ran) -> dict[str, Any]:
    final = ran.trace[-1]
    assert final["kind"] == "run_stopped" and final["status"] == ran.state.status.value, final
    return final


def not_resumable(tmp: Path, run_id: str) -> None:
    async def resume() -> None:
        async with Harness(tmp / "runs", tmp / "ws", agent_sets=(DEMO,)) as harness:
            await harness.run(run_id)

    try:
        asyncio.run(resume())
    except StateError as exc:
        assert "cannot be resumed" in str(exc)
    else:
        raise AssertionError("a failed run was resumed")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CutBeforeUsage:
    """ASGI wrapper: a stream whose connection ends right after the finish chunk, so the
    usage chunk and ``[DONE]`` never arrive (what a proxy that drops the tail does)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def cut(message: dict[str, Any]) -> None:
            body = message.get("body", b"")
            if message["type"] == "http.response.body" and (b'"choices": []' in body or b"[DONE]" in body):
                message = {**message, "body": b""}
            await send(message)

        await self.app(scope, receive, cut)


# ---- the cases -------------------------------------------------------------------

@case("429 with Retry-After", "waits the provider's Retry-After (traced as provider_retry), asks again")
def rate_limited(tmp: Path) -> str:
    ran = run_plan(tmp, create_app(faults=FaultPlan.parse("429@1"), retry_after=0.05))
    assert ran.state.status is Status.COMPLETED and ran.state.answer == scenarios.PLAN_ANSWER
    retries = ran.kinds("provider_retry")
    assert [(r["status"], r["wait_s"]) for r in retries] == [(429, 0.05)], retries
    assert ran.requests == 4, ran.requests
    assert ran.state.cost_usd == clean_cost(tmp), "the rejected request must cost nothing"
    return "completed; 1 traced wait of 0.05 s; 4 requests for 3 turns; cost = fault-free run"


@case("5xx, fewer than the retries", "backoff with full jitter (seeded here), traced, then success")
def server_errors_then_success(tmp: Path) -> str:
    base = 0.01
    ran = run_plan(tmp, create_app(faults=FaultPlan.parse("500@1x3")), max_retries=4, backoff_base_s=base,
                   rng=random.Random(7))
    assert ran.state.status is Status.COMPLETED and ran.state.cost_usd == clean_cost(tmp)
    waits = [(r["status"], r["attempt"], r["wait_s"]) for r in ran.kinds("provider_retry")]
    assert [(s, a) for s, a, _ in waits] == [(500, 1), (500, 2), (500, 3)], waits
    for _, attempt, wait in waits:
        assert 0 <= wait <= base * 2 ** (attempt - 1), waits
    assert len({w for *_, w in waits}) == 3, "jittered waits differ"
    assert ran.requests == 6
    return "completed after 3 traced retries (jittered waits under 10/20/40 ms); cost = fault-free run"


@case("5xx, more than the retries", "gives up after max_retries+1 attempts: a resumable outage, with the reason")
def server_errors_exhausted(tmp: Path) -> str:
    ran = run_plan(tmp, create_app(faults=FaultPlan.parse("500@1x10")), max_retries=2, backoff_base_s=0.001)
    outage = ran.state.interruption
    assert ran.state.status is Status.INTERRUPTED and isinstance(outage, ProviderOutage), ran.state
    assert "500" in outage.reason and "gave up after 3 attempts" in outage.reason, outage
    assert ran.requests == 1 + 3 and ran.state.turns == 1
    assert outage.reason in stopped(ran)["reason"]
    return f"interrupted (provider_outage) after 3 attempts: {outage.reason!r}"


@case("401", "permanent: no retry, failed at once, not resumable")
def unauthorized(tmp: Path) -> str:
    ran = run_plan(tmp, create_app(faults=FaultPlan.parse("401@0")))
    assert ran.state.status is Status.FAILED and "401" in ran.state.error
    assert ran.requests == 1 and not ran.kinds("provider_retry") and ran.state.cost_usd == 0
    assert not ran.state.status.resumable
    not_resumable(tmp, ran.state.run_id)
    return "failed after exactly 1 request; resume refused"


@case("200 with a non-JSON body", "transient: retried, then success")
def garbage(tmp: Path) -> str:
    ran = run_plan(tmp, create_app(faults=FaultPlan.parse("garbage@1")), backoff_base_s=0.001)
    assert ran.state.status is Status.COMPLETED and ran.state.cost_usd == clean_cost(tmp)
    reasons = [r["reason"] for r in ran.kinds("provider_retry")]
    assert len(reasons) == 1 and "not JSON" in reasons[0], reasons
    assert ran.requests == 4
    return "completed; 1 traced retry ('the body is not JSON'); cost = fault-free run"


@case("refused connection", "retried, then a resumable outage; the reason names the URL")
def refused(tmp: Path) -> str:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    ran = run_plan(tmp, client=ModelClient(url, max_retries=1, backoff_base_s=0.001))
    outage = ran.state.interruption
    assert ran.state.status is Status.INTERRUPTED and isinstance(outage, ProviderOutage), ran.state
    assert f"{url}/chat/completions" in outage.reason and "refused" in outage.reason, outage
    stopped(ran)
    return f"interrupted (provider_outage): {outage.reason!r}"


@case("server drips bytes", "the overall deadline bounds the call: a resumable outage ('deadline'), no hang")
def drip(tmp: Path) -> str:
    async def go() -> Ran:
        async with running_provider(faults=FaultPlan.parse("drip@0")) as url:
            client = ModelClient(url, read_timeout=5.0, deadline_s=0.5, max_retries=0)
            async with Harness(tmp / "runs", tmp / "ws", client=client, agent_sets=(DEMO,)) as harness:
                state = harness.new_run("plan", "q")
                out = await asyncio.wait_for(harness.run(state.run_id), HANG_CAP_S)
        return Ran(out.state, 0, list(read_trace(tmp / "runs" / state.run_id / TRACE_FILE)))

    ran = asyncio.run(go())
    outage = ran.state.interruption
    assert isinstance(outage, ProviderOutage) and "deadline" in outage.reason, ran.state
    stopped(ran)
    return f"interrupted (provider_outage): {outage.reason!r}"


@case("stream cut before its usage chunk", "usage counted locally; the turn marked estimated in state and trace")
def stream_cut_before_usage(tmp: Path) -> str:
    ran = run_plan(tmp, CutBeforeUsage(create_app()), stream=True)
    assert ran.state.status is Status.COMPLETED and ran.state.answer == scenarios.PLAN_ANSWER
    assert ran.state.estimated_turns == [1, 2, 3]
    assert [t["estimated"] for t in ran.kinds("turn")] == [True, True, True]
    assert ran.state.prompt_tokens > 0 and ran.state.completion_tokens > 0
    return (f"completed; 3 of 3 turns estimated; cost ${ran.state.cost_usd:.6f} "
            f"vs ${clean_cost(tmp):.6f} reported")


@contextmanager
def disk_full_at(save: int, store: RunStore, seen: dict[str, Any]) -> Iterator[None]:
    """The ``save``-th save after the run's creation fails with ENOSPC while appending to
    the journal; just before, the state on disk is read, to compare with what is left after."""
    real_append = tether.store.files.handle.RunHandle._append
    count = 0

    def failing_append(self: tether.store.files.handle.RunHandle, data: bytes) -> None:
        nonlocal count
        count += 1
        if count == save + 1:  # the first is store.create's
            seen["before"] = store.load(self.run_id).to_dict()
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(self, data)

    with mock.patch.object(tether.store.files.handle.RunHandle, "_append", failing_append):
        yield


@case("disk full during a save", "SaveError: the CLI exits 1 with the reason, never 'completed'; "
      "the previous state is intact; resume finishes")
def disk_full(tmp: Path) -> str:
    saves = _count_saves(tmp / "count")
    for n in range(1, saves + 1):
        where = tmp / f"save{n}"
        store, seen = RunStore(where / "runs"), {}
        out, err = io.StringIO(), io.StringIO()
        with disk_full_at(n, store, seen), redirect_stdout(out), redirect_stderr(err):
            code = cli.main(["run", "plan", "--run-id", "full", "--json",
                             "--runs-dir", str(where / "runs"), "--workspace", str(where / "ws")])
        assert code == 1, (n, code, err.getvalue())
        assert "could not save run full: No space left on device" in err.getvalue(), err.getvalue()
        assert "completed" not in out.getvalue(), out.getvalue()
        assert store.load("full").to_dict() == seen["before"], f"save {n}: the state on disk changed"
        with redirect_stdout(io.StringIO()):
            assert cli.main(["resume", "full", "--json", "--runs-dir", str(where / "runs"),
                             "--workspace", str(where / "ws")]) == 0
        assert store.load("full").cost_usd == clean_cost(tmp), f"save {n}: the cost after resume differs"
    return f"each of the {saves} saves of a plan run failed in turn: exit 1, state intact, resume completes"


def _count_saves(tmp: Path) -> int:
    """How many saves a plan run makes (the failing save is swept over all of them)."""
    with mock.patch.object(tether.store.files.handle.RunHandle, "save", autospec=True,
                           side_effect=tether.store.files.handle.RunHandle.save) as save:
        run_plan(tmp, create_app())
    return save.call_count - 1  # the first is store.create's, before any loop boundary


# ---- the table -------------------------------------------------------------------

def run_all(root: Path) -> list[tuple[str, str, str, bool]]:
    rows = []
    for n, fault in enumerate(CASES):
        try:
            rows.append((fault.fault, fault.handled, fault.check(root / f"case{n}"), True))
        except (AssertionError, SaveError, StateError) as exc:
            rows.append((fault.fault, fault.handled, f"FAILED: {exc}", False))
    return rows
