"""The client's side of the requests an agent makes: ``session/update``, permission, fs.

This is the object the ``acp`` package's ``ClientSideConnection`` calls. It turns each call into
Tether events and answers the agent: updates are translated (synchronously, so their order is
kept: the connection starts one task per notification, and a handler that never suspends runs
them in arrival order), permission requests wait for an outside decision, and the fs requests
are served inside the workspace only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption as AcpPermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
    WriteTextFileResponse,
)

from tether.acp.events import (
    AcpEvent,
    FileRead,
    FileRefused,
    FileWritten,
    PermissionAsked,
    PermissionSettled,
    ToolCallStarted,
    ToolCallUpdated,
)
from tether.acp.escapes import refused_write
from tether.acp.files import OutsideWorkspace, Workspace
from tether.acp.permissions import PermissionOption, PermissionRequest
from tether.acp.translate import diffs, locations, update_events


class ClientHandler:
    """Implements ``acp.Client`` for one agent connection."""

    def __init__(self, workspace: Path, emit: Callable[[AcpEvent], None]) -> None:
        self.workspace = Workspace(workspace)
        self.session_id: str | None = None
        self.cancelling = False  # a cancel was sent: new permission requests are answered cancelled
        self.closing = False
        self._emit = emit
        self._pending: set[PermissionRequest] = set()
        self._titles: dict[str, tuple[str | None, str | None]] = {}  # tool call id -> (title, kind) seen

    def cancel_pending(self) -> None:
        for request in list(self._pending):
            request.cancel(by_session=True)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        for event in update_events(update):
            if isinstance(event, ToolCallStarted | ToolCallUpdated):
                title, kind = self._titles.get(event.tool_call_id, (None, None))
                self._titles[event.tool_call_id] = (event.title or title, event.kind or kind)
            self._emit(event)

    async def request_permission(self, session_id: str, tool_call: ToolCallUpdate, options: list[AcpPermissionOption],
                                 **kwargs: Any) -> RequestPermissionResponse:
        seen_title, seen_kind = self._titles.get(tool_call.tool_call_id, (None, None))
        request = PermissionRequest(
            tool_call_id=tool_call.tool_call_id, title=tool_call.title or seen_title,
            kind=str(tool_call.kind) if tool_call.kind else seen_kind,
            options=tuple(PermissionOption(o.option_id, o.name, str(o.kind)) for o in options),
            diffs=diffs(tool_call.content), locations=locations(tool_call.locations), raw_input=tool_call.raw_input,
        )
        if self.cancelling or self.closing:
            request.cancel(by_session=True)
        else:
            self._pending.add(request)
            self._emit(PermissionAsked(request))
        try:
            option_id = await request.outcome()
        finally:
            self._pending.discard(request)
        self._emit(PermissionSettled(request.tool_call_id, option_id, by_cancel=request.by_cancel))
        if option_id is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=option_id, outcome="selected"))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
                             **kwargs: Any) -> ReadTextFileResponse:
        try:
            content = await self.workspace.read(path, line, limit)
        except RequestError as exc:
            self._emit(FileRefused("read", path, str(exc)))
            raise
        self._emit(FileRead(path, len(content.encode("utf-8"))))
        return ReadTextFileResponse(content=content)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        try:
            size = await self.workspace.write(path, content)
        except OutsideWorkspace as exc:
            # The file as it is before the agent hears "refused": an agent that does its own
            # file I/O may write it next (tether.acp.escapes).
            seen = await asyncio.to_thread(refused_write, self.workspace.resolve(path), content)
            self._emit(FileRefused("write", path, str(exc), seen))
            raise
        except RequestError as exc:
            self._emit(FileRefused("write", path, str(exc)))
            raise
        self._emit(FileWritten(path, size))
        return WriteTextFileResponse()
