"""The control channel: Stop and decisions reach whichever process runs a run.

A request (stop, approve, reject) is appended to the run's ``control.jsonl`` first, so it
is never lost: a request for a run whose process died is there when the run is adopted,
and :func:`pending` hands it to the adopting process. Then the process that holds the run
is poked over a Unix socket in the abstract namespace (no file to clean up, gone with the
process), whose address it published in the run's ``owner.json``; it reads the requests
it has not handled yet, acts on them at once, and answers the poke in words ("stopped",
"already decided: approved by alice@host"). So a Stop from another terminal reaches a
tool in the middle of its work within a round trip on loopback, and a process that waits
for a decision (``--wait-for-decision``) gets it the moment it is made.

The requests a run has handled are counted in its saved state (``control_seen``), so an
adopting process knows which are new. A request that reaches a run no longer running
(it stopped between the check and the request) is answered as such and never applied
later: only a run saved as ``running``, that is, one whose process died, adopts
requests it never handled.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tether.run.state import NeedsApproval, Status

if TYPE_CHECKING:
    from tether.store.protocol import Store

CONTROL_FILE = "control.jsonl"
DELIVERY_TIMEOUT_S = 10.0
_MAX_LINE = 64 * 1024

Kind = Literal["stop", "approve", "reject", "report"]
"""``report``: what a reporter that could not hold a program's run adds to it (:meth:`tether.run.tracked.TrackedRun.reported`)."""


def operator_name() -> str:
    """Who is acting, when no ``--as NAME`` says otherwise: user@host."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True, slots=True)
class ControlRequest:
    kind: Kind
    text: str = ""
    """The reason (stop, reject) or the note (approve)."""
    call_id: str | None = None
    by: str = "operator"
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    ts: float = field(default_factory=time.time)
    option: str | None = None
    """An ACP agent's permission option to answer with (``tether approve --option ID``)."""
    silent: bool = False
    """A rejection whose words are not sent on to an ACP agent (``tether reject --silent``)."""
    args: str | None = None
    """An approval's edited arguments (JSON): the call runs with these (``tether approve --args``)."""
    rule: str | None = None
    """The standing rule that decides (its id), when no person does."""
    scope: str | None = None
    """For an ACP agent's "always" option: the scope of the rule Tether keeps of it
    (``run:ID``, the default; ``agent``; ``store``)."""

    @classmethod
    def from_dict(cls, data: dict) -> "ControlRequest":
        return cls(kind=data["kind"], text=str(data.get("text") or ""), call_id=data.get("call_id"),
                   by=str(data.get("by") or "operator"), id=str(data["id"]), ts=float(data.get("ts") or 0),
                   option=data.get("option"), silent=bool(data.get("silent")), args=data.get("args"),
                   rule=data.get("rule"), scope=data.get("scope"))


@dataclass(frozen=True, slots=True)
class ControlReply:
    ok: bool
    words: str
    pending: bool = False
    """Not done now, but recorded: it applies when the run is adopted."""
    gone: bool = False
    """The process answered that it no longer runs the run (it let go of it)."""


# ---- the durable half: control.jsonl ---------------------------------------------------

def append(run_dir: Path, request: ControlRequest) -> None:
    """Append ``request`` in one write (O_APPEND: concurrent requesters never interleave)."""
    data = (json.dumps(asdict(request), ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    fd = os.open(run_dir / CONTROL_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_from(run_dir: Path, seen: int) -> list[ControlRequest]:
    """The requests after the first ``seen`` (complete, parseable lines only)."""
    try:
        raw = (run_dir / CONTROL_FILE).read_bytes()
    except FileNotFoundError:
        return []
    out: list[ControlRequest] = []
    for line in raw.split(b"\n")[:-1][seen:]:  # the part after the last newline is still being written
        try:
            out.append(ControlRequest.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            out.append(ControlRequest(kind="stop", text="", id="unreadable", by="?"))  # keeps the count right
    return out


# ---- the fast half: one socket per process ----------------------------------------------

Handler = Callable[[ControlRequest], Awaitable[ControlReply]]


class ControlServer:
    """The socket a process runs runs behind. A poke names a run and a request id; the
    run's handler reads what it has not handled from the file and answers."""

    def __init__(self) -> None:
        self.address = f"\0tether-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._server: asyncio.AbstractServer | None = None
        self._starting = asyncio.Lock()
        self._runs: dict[str, Callable[[str], Awaitable[ControlReply]]] = {}

    async def start(self) -> str:
        """Listen (once, however many runs start together)."""
        if self._server is None:
            async with self._starting:
                if self._server is None:
                    self._server = await asyncio.start_unix_server(self._serve, path=self.address)
        return self.address

    def register(self, run_id: str, poke: Callable[[str], Awaitable[ControlReply]]) -> None:
        self._runs[run_id] = poke

    def unregister(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), DELIVERY_TIMEOUT_S)
            try:
                data = json.loads(line[:_MAX_LINE])
                run_id, request_id = str(data["run_id"]), str(data["request_id"])
            except (ValueError, KeyError, TypeError):
                reply = ControlReply(False, "a malformed control request")
            else:
                poke = self._runs.get(run_id)
                reply = (ControlReply(False, f"this process (pid {os.getpid()}) no longer runs {run_id}", gone=True)
                         if poke is None else await poke(request_id))
            writer.write((json.dumps(asdict(reply)) + "\n").encode())
            await writer.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the requester went away; the request stays in the file either way
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def deliver(address: str, run_id: str, request_id: str,
                  timeout_s: float = DELIVERY_TIMEOUT_S) -> ControlReply | None:
    """Poke the process at ``address`` about ``request_id``; its answer, or None when no
    process listens there (it died) or it did not answer in time."""
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_unix_connection(path=address)
            try:
                writer.write((json.dumps({"run_id": run_id, "request_id": request_id}) + "\n").encode())
                await writer.drain()
                line = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return None
    try:
        data = json.loads(line)
        return ControlReply(bool(data["ok"]), str(data["words"]), bool(data.get("pending")), bool(data.get("gone")))
    except (ValueError, KeyError, TypeError):
        return None


async def request(store: Store, run_id: str, what: ControlRequest) -> ControlReply:
    """Append ``what`` to the run's control channel and have the process that runs the run
    act on it; its answer, in words. Refused in words, changing nothing, when no process
    could act on it (a run that has stopped, one that waits for approval with no process)."""
    from tether.store.protocol import call

    state = await call(store, store.load, run_id)
    owner = await call(store, store.owner, run_id)
    alive = owner is not None and owner.alive and not owner.kept
    if what.kind == "stop" and not alive and state.status is not Status.RUNNING:
        if isinstance(state.interruption, NeedsApproval):
            return ControlReply(False, f"nothing to stop: run {run_id} is waiting for approval of "
                                f"{state.interruption.tool_name} and no process is running it; "
                                f"tether reject {run_id} --reason TEXT declines the call")
        return ControlReply(False, f"nothing to stop: run {run_id} has already stopped ({state.status.value})")
    if not alive:
        if state.status is Status.RUNNING:  # its process died: the request waits for the adopter
            await call(store, store.control_append, run_id, what)
            if owner is not None and owner.kept:  # its keeper lives (tether.integrations.keeper): its next hook takes it
                return ControlReply(False, f"run {run_id} is {owner.command or 'a program'}'s (pid {owner.pid} on "
                                    f"{owner.host}), which reports in at its hooks: the {what.kind} is recorded "
                                    "and lands at its next hook", pending=True)
            who = f" (pid {owner.pid} on {owner.host})" if owner is not None else ""
            return ControlReply(False, f"run {run_id} is orphaned: the process that ran it{who} ended "
                                f"without stopping it. The {what.kind} is recorded and applies when the run "
                                f"is adopted (tether resume {run_id})", pending=True)
        last = max(state.approvals.values(), key=lambda d: d.ts, default=None)
        if what.kind in ("approve", "reject") and last is not None and not isinstance(state.interruption, NeedsApproval):
            # Decided (and let go of) between the caller's look and ours: say by whom.
            return ControlReply(False, f"already decided: {last.verdict} by {last.by}; there is one decision per call")
        return ControlReply(False, f"no process holds run {run_id} ({state.status.value}): "
                            f"tether {what.kind} {run_id} acts on it directly")
    if owner.control and owner.control.startswith("pg:"):  # an owner listening on the database, on any host
        from tether.store.postgres.control import deliver as deliver_over_database

        reply = await deliver_over_database(store, run_id, what)  # type: ignore[arg-type]
    else:
        await call(store, store.control_append, run_id, what)
        reply = await deliver(owner.control, run_id, what.id) if owner.control else None
    now = await call(store, store.owner, run_id)
    if (reply is None or reply.gone) and not (now is not None and now.alive):
        # It let go of the run between our look and our poke: say where the run is now.
        state = await call(store, store.load, run_id)
        last = max(state.approvals.values(), key=lambda d: d.ts, default=None)
        if what.kind in ("approve", "reject") and last is not None and not isinstance(state.interruption, NeedsApproval):
            verdict = "approved" if what.kind == "approve" else "rejected"
            if (last.verdict, last.by, last.text) == (verdict, what.by, what.text):
                # Ours: the process took it and finished the run before our poke reached it.
                return ControlReply(True, f"{verdict} by {last.by}; the process that held {run_id} went on "
                                    f"with it (it is {state.status.value} now)")
            return ControlReply(False, f"already decided: {last.verdict} by {last.by}; there is one decision per call")
        return ControlReply(False, f"the process running {run_id} let go of it before it answered "
                            f"(it is {state.status.value} now); nothing was done")
    if reply is None:
        return ControlReply(False, f"the process running {run_id} (pid {owner.pid} on {owner.host}) did not "
                            f"answer; the {what.kind} is recorded and applies if the run is adopted", pending=True)
    return reply
