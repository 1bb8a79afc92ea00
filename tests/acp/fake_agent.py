"""A fake ACP agent, on the ``acp`` package's agent side, for what a real agent will not do on demand.

    python tests/acp/fake_agent.py MODE

Modes (the prompt's text may add ``SLOW``: stream until cancelled; in ``normal``, ``QUIET``: answer
"Noted in SESSION." and write nothing):
- ``loads``: ``normal``, and it advertises ``loadSession`` (a follow-up in a new process);
- ``normal``: streams a thought, its slash commands (``SLASH_COMMANDS``), a plan and text;
  proposes a write of ``WRITE_NAME`` (a tool call with a diff), asks permission, writes it
  through the client's ``fs/write_text_file`` when allowed; reports usage three ways (``usage_update`` with cost, qwen-style ``_meta.usage``, the
  response's ``usage``); honours ``session/cancel``;
- ``shell``: runs a shell call (``execute``) and reports its output live as Codex's adapter does
  (``_meta.terminal_info``, two ``terminal_output`` pieces, ``terminal_exit`` with code 0),
  then says "Done."; with ``SLOW``, the command runs on until the turn is cancelled, then ends
  by signal SIGINT;
- ``ignore-cancel``: streams forever, ignoring ``session/cancel`` and SIGTERM;
- ``die-asking``: asks permission for a write, then exits with status 5 before it is answered;
- ``die-mid-turn``: streams a chunk, says something on stderr, exits with status 3;
- ``malformed``: writes a few lines that are not JSON-RPC to stdout, then answers normally;
- ``garbage``: writes garbage lines to stdout forever;
- ``write-outside``: asks the client to write outside the workspace (absolute and ``..``), and
  reports the client's error text as its message;
- ``escape``: writes, with its own file I/O (not through the client), every absolute path the
  prompt names after ``ESCAPE``, then ``inside.txt`` in its workspace and ``scratch.txt`` in its
  ``TMPDIR``; its message says, a line a file, ``wrote PATH`` or ``refused PATH: WHY``, then
  ``cwd PATH``: its process's current folder;
- ``write-itself``: as OpenCode does its own file I/O: a ``write`` call started pending with no
  input, its input (and its file's path as its title) in a later update, a write of
  ``ESCAPE_PATH`` (outside the workspace) through the client, which is refused, then the file
  written by the agent itself and the call reported a success; with ``PRETEND`` in the prompt,
  the success is reported but nothing is written; with ``LATE``, it is written 0.3 s after the
  turn ended (as OpenCode's own write landed on a loaded host); with ``FIRST``, it is written
  before the client is asked (OpenCode's own write landed first on a loaded host); with
  ``AFTER``, written and reported done before the client is asked; where it
  cannot write (a sandbox), the call fails with the system's words;
- ``sessions``: ``normal``, advertising ``loadSession`` and ``sessionCapabilities`` list,
  resume and close, and the session modes ``ask`` and ``auto``; every session method it is
  sent (and the client's ``fs`` capability) is a JSON line in the file ``$FAKE_AGENT_LOG``;
  it lists the config options ``model`` (``fake-small``, ``fake-large``) and ``effort``, and
  sends a ``config_option_update`` (effort ``high``) at each prompt; ``session/list`` lists one
  earlier session, ``fake-earlier``; with ``$FAKE_AGENT_NO_RESUME`` set it does not advertise
  ``session/resume`` (an earlier session goes on by ``session/load``);
- any mode, with ``$FAKE_AGENT_SLOW_START`` set: it never answers ``initialize`` (until ended);
- any mode, with ``$FAKE_AGENT_FORK`` (a file) set: it advertises ``sessionCapabilities.fork``
  and writes each ``session/fork`` (session, cwd) and each prompt's text there as a JSON line;
- ``auth``: answers ``session/new`` with ``auth_required`` (an agent that needs a login);
- ``spend``: an agent that costs money as it works: every 0.05 s it says a word and reports
  a ``usage_update`` with its session's cost up by ``SPEND_USD`` (with ``TOKENS`` in the prompt:
  no cost, a qwen-style ``_meta.usage`` of ``SPEND_TOKENS`` instead), until it is cancelled
  (``cancelled``) or after ``SPEND_REPORTS`` reports (``end_turn``, "Done.");
- ``flood``: a ~600 KB ``available_commands_update`` at session start, then ``FLOOD_CHUNKS``
  text chunks as fast as it can.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, cast

if __name__ == "__main__":
    # As the agent's own process only (the tests import this module's constants): the SDK's
    # schema is ~270 pydantic models, each built (its fields' docstrings read from source) as
    # acp.schema is imported, most of this process's start-up, paid at each of the suite's 100+
    # starts. Here a model is built when first used and the field docstrings (descriptions in a
    # JSON schema, never validation) are not read: the SDK's own models still make and check
    # every frame.
    import pydantic
    from pydantic._internal import _fields

    pydantic.BaseModel.model_config["defer_build"] = True
    _fields._update_fields_from_docstrings = lambda *args, **kwargs: None

import acp  # noqa: E402 (after the settings above)
from acp import schema  # noqa: E402

WRITE_NAME = "out.txt"
ESCAPE_PATH = Path("..") / "outside" / "escaped.txt"
"""Where ``write-itself`` writes, from the workspace."""
ESCAPE_TEXT = "escape attempt"
WRITE_TEXT = "written by the fake agent\n"
FLOOD_CHUNKS = 5000
SPEND_USD = 0.01
SPEND_TOKENS = {"inputTokens": 10_000, "outputTokens": 1_000, "totalTokens": 11_000}
SPEND_REPORTS = 40
BIG_FRAME_COMMANDS = 3000  # x ~200 bytes of description: a ~600 KB frame, like qwen's first one
USAGE_META = {"inputTokens": 40, "outputTokens": 8, "totalTokens": 48, "thoughtTokens": 2, "cachedReadTokens": 0}
OPTIONS = [
    schema.PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
    schema.PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
    schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


class FakeAgent:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.client: Any = None
        self.cwd: dict[str, str] = {}
        self.cancelled: dict[str, asyncio.Event] = {}
        self.model = "fake-small"
        self.spent: dict[str, float] = {}  # spend: each session's cost so far

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    def _log(self, method: str, **what: Any) -> None:
        if self.mode == "sessions" and os.environ.get("FAKE_AGENT_LOG"):
            with open(os.environ["FAKE_AGENT_LOG"], "a") as log:
                log.write(json.dumps({"method": method, **what}) + "\n")

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> schema.InitializeResponse:
        fs = getattr(client_capabilities, "fs", None)
        self._log("initialize", fs=bool(fs and fs.write_text_file))
        if os.environ.get("FAKE_AGENT_SLOW_START"):  # an agent that takes its time to start: until ended
            await asyncio.sleep(3600)
        sessions = None
        if self.mode == "sessions":
            sessions = schema.SessionCapabilities(list=schema.SessionListCapabilities(),
                                                  resume=schema.SessionResumeCapabilities(),
                                                  close=schema.SessionCloseCapabilities())
            if os.environ.get("FAKE_AGENT_NO_RESUME"):  # it lists and loads, and resumes not
                sessions.resume = None
        if os.environ.get("FAKE_AGENT_FORK"):  # any mode: it advertises session/fork, and logs it
            sessions = sessions or schema.SessionCapabilities()
            sessions.fork = schema.SessionForkCapabilities()
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(load_session=self.mode in ("loads", "sessions"),
                                                        session_capabilities=sessions),
            agent_info=schema.Implementation(name="fake-agent", title="Fake agent", version="1.0.0"),
            auth_methods=[],
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> schema.NewSessionResponse:
        if self.mode == "auth":
            raise acp.RequestError.auth_required({"why": "log in first"})
        session_id = f"fake-{len(self.cwd) + 1}"
        self.cwd[session_id] = cwd
        self.cancelled[session_id] = asyncio.Event()
        if self.mode == "flood":
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self._big_frame(session_id)))
        self._log("session/new", session_id=session_id)
        if self.mode == "sessions":
            modes = schema.SessionModeState(current_mode_id="ask", available_modes=[
                schema.SessionMode(id="ask", name="Ask"), schema.SessionMode(id="auto", name="Auto")])
            self.model = "fake-small"
            return schema.NewSessionResponse(session_id=session_id, modes=modes, config_options=self._config())
        return schema.NewSessionResponse(session_id=session_id)

    def _config(self, effort: str = "low") -> list[Any]:
        """``sessions`` mode's config options: a model and a thought level."""
        def select(id_: str, name: str, category: str, current: str, values: list[str]) -> Any:
            return schema.SessionConfigOptionSelect(
                id=id_, name=name, category=category, type="select", current_value=current,
                options=[schema.SessionConfigSelectOption(value=v, name=v.replace("-", " ").title()) for v in values])
        return [select("model", "Model", "model", self.model, ["fake-small", "fake-large"]),
                select("effort", "Effort", "thought_level", effort, ["low", "high"])]

    async def set_config_option(self, config_id: str, session_id: str, value: Any,
                                **kwargs: Any) -> schema.SetSessionConfigOptionResponse:
        self._log("session/set_config_option", session_id=session_id, config_id=config_id, value=value)
        self.model = str(value)
        return schema.SetSessionConfigOptionResponse(config_options=self._config())

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> schema.SetSessionModeResponse:
        self._log("session/set_mode", session_id=session_id, mode_id=mode_id)
        return schema.SetSessionModeResponse()

    async def resume_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                             **kwargs: Any) -> schema.ResumeSessionResponse:
        self.cwd[session_id] = cwd
        self.cancelled[session_id] = asyncio.Event()
        self._log("session/resume", session_id=session_id)
        if self.mode == "sessions":  # as Claude's and Codex's adapters: resumed in its default mode and model
            self.model = "fake-small"
            modes = schema.SessionModeState(current_mode_id="ask", available_modes=[
                schema.SessionMode(id="ask", name="Ask"), schema.SessionMode(id="auto", name="Auto")])
            return schema.ResumeSessionResponse(modes=modes, config_options=self._config())
        return schema.ResumeSessionResponse()

    async def fork_session(self, session_id: str, cwd: str, mcp_servers: Any = None,
                           **kwargs: Any) -> schema.ForkSessionResponse:
        sid = f"fork-{len(self.cwd) + 1}-of-{session_id}"
        self.cwd[sid] = cwd
        self.cancelled[sid] = asyncio.Event()
        with open(os.environ["FAKE_AGENT_FORK"], "a") as log:
            log.write(json.dumps({"method": "session/fork", "session_id": session_id, "cwd": cwd}) + "\n")
        return schema.ForkSessionResponse(session_id=sid)

    async def close_session(self, session_id: str, **kwargs: Any) -> schema.CloseSessionResponse:
        self._log("session/close", session_id=session_id)
        return schema.CloseSessionResponse()

    async def list_sessions(self, cursor: Any = None, cwd: Any = None, **kwargs: Any) -> schema.ListSessionsResponse:
        self._log("session/list", cwd=cwd)
        return schema.ListSessionsResponse(sessions=[schema.SessionInfo(session_id="fake-earlier", cwd=str(cwd),
                                                                        title="an earlier session",
                                                                        updated_at="2026-12-01T09:30:00Z")])

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           **kwargs: Any) -> schema.LoadSessionResponse:
        """``loads`` mode: an earlier session, its history replayed as updates first (as real
        agents do), then the session goes on in this new process."""
        self.cwd[session_id] = cwd
        self.cancelled[session_id] = asyncio.Event()
        self._log("session/load", session_id=session_id)
        await self._say(session_id, acp.update_user_message_text("(replayed) the earlier prompt"))
        await self._say(session_id, acp.update_agent_message_text("(replayed) Done."))
        return schema.LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if self.mode != "ignore-cancel":
            self.cancelled[session_id].set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> schema.PromptResponse:
        if os.environ.get("FAKE_AGENT_FORK"):
            with open(os.environ["FAKE_AGENT_FORK"], "a") as log:
                log.write(json.dumps({"method": "session/prompt", "session_id": session_id,
                                      "text": "".join(getattr(p, "text", "") or "" for p in prompt)}) + "\n")
        text = " ".join(getattr(block, "text", "") for block in prompt)
        self.cancelled[session_id].clear()
        if self.mode == "sessions":  # it raises its own thought level, and says so
            await self._say(session_id, schema.ConfigOptionUpdate(session_update="config_option_update",
                                                                  config_options=self._config("high")))
        run = getattr(self, "_" + self.mode.replace("-", "_").replace("sessions", "normal"))
        return await run(session_id, text)

    # -- modes ----------------------------------------------------------------------------

    async def _normal(self, sid: str, text: str) -> schema.PromptResponse:
        cancelled = self.cancelled[sid]
        await self._say(sid, acp.update_agent_thought_text("Planning the write."))
        await self._say(sid, schema.AvailableCommandsUpdate(session_update="available_commands_update",
                                                            available_commands=SLASH_COMMANDS))
        await self._say(sid, acp.update_plan([acp.plan_entry("Write out.txt", priority="high", status="in_progress")]))
        if "SLOW" in text:
            while not cancelled.is_set():
                await self._say(sid, acp.update_agent_message_text("."))
                await asyncio.sleep(0.02)
            return schema.PromptResponse(stop_reason="cancelled")
        if "QUIET" in text:  # an answer, and no write
            await self._say(sid, acp.update_agent_message_text(f"Noted in {sid}."))
            return schema.PromptResponse(stop_reason="end_turn", usage=schema.Usage(input_tokens=40, output_tokens=8,
                                                                                   total_tokens=48))
        await self._say(sid, acp.update_agent_message_text("I will write "))
        await self._say(sid, acp.update_agent_message_text(WRITE_NAME + "."))
        path = str(Path(self.cwd[sid]) / WRITE_NAME)
        raw_input = {"path": path, "content": WRITE_TEXT}
        diff = acp.tool_diff_content(path, WRITE_TEXT, None)
        await self._say(sid, acp.start_tool_call("call_1", "Write out.txt", kind="edit", status="pending",
                                                 content=[diff], locations=[schema.ToolCallLocation(path=path)],
                                                 raw_input=raw_input))
        asked = await self.client.request_permission(
            session_id=sid, options=OPTIONS,
            tool_call=schema.ToolCallUpdate(tool_call_id="call_1", title="Write out.txt", kind="edit",
                                            status="pending", content=[diff],
                                            locations=[schema.ToolCallLocation(path=path)], raw_input=raw_input))
        outcome = asked.outcome
        if cancelled.is_set() or isinstance(outcome, schema.DeniedOutcome):
            await self._say(sid, acp.update_tool_call("call_1", status="failed"))
            return schema.PromptResponse(stop_reason="cancelled")
        if outcome.option_id == "reject":
            await self._say(sid, acp.update_tool_call("call_1", status="failed"))
            return schema.PromptResponse(stop_reason="end_turn")
        await self.client.write_text_file(session_id=sid, path=path, content=WRITE_TEXT)
        await self._say(sid, acp.update_tool_call("call_1", status="completed",
                                                  content=[acp.tool_content(acp.text_block("Wrote out.txt"))]))
        await self._say(sid, schema.UsageUpdate(session_update="usage_update", used=48, size=1000,
                                                cost=schema.Cost(amount=0.0125, currency="USD")))
        await self._say(sid, schema.AgentMessageChunk(session_update="agent_message_chunk",
                                                      content=acp.text_block(""), field_meta={"usage": USAGE_META}))
        await self._say(sid, acp.update_agent_message_text("Done."))
        usage = schema.Usage(input_tokens=40, output_tokens=8, total_tokens=48)
        return schema.PromptResponse(stop_reason="end_turn", usage=usage)

    async def _shell(self, sid: str, text: str) -> schema.PromptResponse:
        await self._say(sid, schema.ToolCallStart(session_update="tool_call", tool_call_id="sh_1", title="make test",
                                                  kind="execute", status="in_progress",
                                                  raw_input={"command": "make test"},
                                                  field_meta={"terminal_info": {"terminal_id": "sh_1"}}))
        for data in ("ok 1 parse\n", "ok 2 render\n"):
            await self._say(sid, schema.ToolCallProgress(
                session_update="tool_call_update", tool_call_id="sh_1",
                field_meta={"terminal_output": {"terminal_id": "sh_1", "data": data}}))
        if "SLOW" in text:  # the command runs on until the turn is cancelled, then ends by its signal
            await self.cancelled[sid].wait()
            await self._say(sid, schema.ToolCallProgress(
                session_update="tool_call_update", tool_call_id="sh_1", status="failed",
                field_meta={"terminal_exit": {"terminal_id": "sh_1", "exit_code": None, "signal": "SIGINT"}}))
            return schema.PromptResponse(stop_reason="cancelled")
        await self._say(sid, schema.ToolCallProgress(
            session_update="tool_call_update", tool_call_id="sh_1", status="completed",
            field_meta={"terminal_exit": {"terminal_id": "sh_1", "exit_code": 0, "signal": None}}))
        await self._say(sid, acp.update_agent_message_text("Done."))
        return schema.PromptResponse(stop_reason="end_turn")

    async def _die_asking(self, sid: str, text: str) -> schema.PromptResponse:
        """Asks permission for a write, then dies before any answer can matter."""
        path = str(Path(self.cwd[sid]) / WRITE_NAME)
        await self._say(sid, acp.start_tool_call("call_1", "Write out.txt", kind="edit", status="pending"))
        asking = asyncio.ensure_future(self.client.request_permission(
            session_id=sid, options=OPTIONS,
            tool_call=schema.ToolCallUpdate(tool_call_id="call_1", title="Write out.txt", kind="edit",
                                            status="pending", raw_input={"path": path, "content": WRITE_TEXT})))
        await asyncio.sleep(0.3)
        print("the fake agent dies while it asks", file=sys.stderr, flush=True)
        os._exit(5)
        return await asking  # never reached

    async def _loads(self, sid: str, text: str) -> schema.PromptResponse:
        return await self._normal(sid, text)

    async def _ignore_cancel(self, sid: str, text: str) -> schema.PromptResponse:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            await self._say(sid, acp.update_agent_message_text("."))
            await asyncio.sleep(0.05)

    async def _die_mid_turn(self, sid: str, text: str) -> schema.PromptResponse:
        await self._say(sid, acp.update_agent_message_text("Starting"))
        await asyncio.sleep(0.05)
        os.write(2, b"fake-agent: fatal: simulated crash in the middle of a turn\n")
        os._exit(3)

    async def _malformed(self, sid: str, text: str) -> schema.PromptResponse:
        for line in (b"this is not json", b"[1, 2, 3]", b'{"hello": "world"}', b'{"jsonrpc": "2.0", "id": '):
            os.write(1, line + b"\n")
        await self._say(sid, acp.update_agent_message_text("still here"))
        return schema.PromptResponse(stop_reason="end_turn")

    async def _garbage(self, sid: str, text: str) -> schema.PromptResponse:
        while True:
            os.write(1, b"garbage garbage garbage\n")
            await asyncio.sleep(0.001)

    async def _write_outside(self, sid: str, text: str) -> schema.PromptResponse:
        cwd = Path(self.cwd[sid])
        said = []
        for path in (str(cwd.parent / "escaped.txt"), str(cwd / ".." / "escaped2.txt")):
            try:
                await self.client.write_text_file(session_id=sid, path=path, content="escaped")
                said.append(f"wrote {path}")
            except acp.RequestError as exc:
                said.append(f"error: {exc}")
        await self._say(sid, acp.update_agent_message_text("\n".join(said)))
        return schema.PromptResponse(stop_reason="end_turn")

    async def _escape(self, sid: str, text: str) -> schema.PromptResponse:
        targets = [word for word in text.partition("ESCAPE")[2].split() if word.startswith("/")]
        targets += [str(Path(self.cwd[sid]) / "inside.txt"), os.path.join(os.environ.get("TMPDIR", "/tmp"), "scratch.txt")]
        said = []
        for path in targets:
            try:
                Path(path).write_text("written by the agent itself\n")
                said.append(f"wrote {path}")
            except OSError as exc:
                said.append(f"refused {path}: {exc.strerror}")
        said.append(f"cwd {os.getcwd()}")
        await self._say(sid, acp.update_agent_message_text("\n".join(said)))
        return schema.PromptResponse(stop_reason="end_turn")

    async def _write_itself(self, sid: str, text: str) -> schema.PromptResponse:
        path = os.path.normpath(Path(self.cwd[sid]) / ESCAPE_PATH)
        await self._say(sid, acp.start_tool_call("call_w", "write", kind="edit", status="pending", raw_input={}))
        await self._say(sid, acp.update_tool_call("call_w", title=path.lstrip("/"), status="in_progress",
                                                  locations=[schema.ToolCallLocation(path=path)],
                                                  raw_input={"filePath": path, "content": ESCAPE_TEXT}))
        if "FIRST" in text or "AFTER" in text:  # its own write lands before it asks the client
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(ESCAPE_TEXT)
        if "AFTER" in text:  # and it reports the call done before it asks
            await self._say(sid, acp.update_tool_call("call_w", title=path.lstrip("/"), status="completed",
                                                      content=[acp.tool_content(acp.text_block("Wrote file successfully."))]))
            with contextlib.suppress(acp.RequestError):
                await self.client.write_text_file(session_id=sid, path=path, content=ESCAPE_TEXT)
            await self._say(sid, acp.update_agent_message_text("The file is written."))
            return schema.PromptResponse(stop_reason="end_turn")
        try:
            await self.client.write_text_file(session_id=sid, path=path, content=ESCAPE_TEXT)
        except acp.RequestError:
            if "LATE" in text:  # written itself a moment after the call is reported done and the turn ends
                def late() -> None:
                    Path(path).parent.mkdir(parents=True, exist_ok=True)
                    Path(path).write_text(ESCAPE_TEXT)
                asyncio.get_running_loop().call_later(0.3, late)
            elif "PRETEND" not in text and "FIRST" not in text:  # the client refused: write it anyway, as OpenCode does
                try:
                    Path(path).parent.mkdir(parents=True, exist_ok=True)
                    Path(path).write_text(ESCAPE_TEXT)
                except OSError as exc:  # a sandbox: the call fails, as OpenCode's does
                    await self._say(sid, acp.update_tool_call(
                        "call_w", title=path.lstrip("/"), status="failed",
                        content=[acp.tool_content(acp.text_block(f"Unknown: {exc.strerror} ({path})"))]))
                    return schema.PromptResponse(stop_reason="end_turn")
        await self._say(sid, acp.update_tool_call("call_w", title=path.lstrip("/"), status="completed",
                                                  content=[acp.tool_content(acp.text_block("Wrote file successfully."))]))
        await self._say(sid, acp.update_agent_message_text("The file is written."))
        return schema.PromptResponse(stop_reason="end_turn")

    async def _spend(self, sid: str, text: str) -> schema.PromptResponse:
        cancelled = self.cancelled[sid]
        for _ in range(SPEND_REPORTS):
            if cancelled.is_set():
                return schema.PromptResponse(stop_reason="cancelled")
            await self._say(sid, acp.update_agent_message_text("working. "))
            if "TOKENS" in text:
                await self._say(sid, schema.AgentMessageChunk(session_update="agent_message_chunk",
                                                              content=acp.text_block(""),
                                                              field_meta={"usage": SPEND_TOKENS}))
            else:
                self.spent[sid] = self.spent.get(sid, 0.0) + SPEND_USD
                await self._say(sid, schema.UsageUpdate(session_update="usage_update", used=48, size=1000,
                                                        cost=schema.Cost(amount=self.spent[sid], currency="USD")))
            await asyncio.sleep(0.05)
        await self._say(sid, acp.update_agent_message_text("Done."))
        return schema.PromptResponse(stop_reason="end_turn")

    async def _flood(self, sid: str, text: str) -> schema.PromptResponse:
        for i in range(FLOOD_CHUNKS):
            await self._say(sid, acp.update_agent_message_text(f"{i} "))
        return schema.PromptResponse(stop_reason="end_turn")

    # -- helpers ----------------------------------------------------------------------------

    async def _say(self, sid: str, update: Any) -> None:
        await self.client.session_update(session_id=sid, update=update)

    async def _big_frame(self, sid: str) -> None:
        commands = [schema.AvailableCommand(name=f"command-{i}", description="x" * 200) for i in range(BIG_FRAME_COMMANDS)]
        await self._say(sid, schema.AvailableCommandsUpdate(session_update="available_commands_update",
                                                            available_commands=commands))


SLASH_COMMANDS = [
    schema.AvailableCommand(name="review", description="Review the changes in the workspace",
                            input=schema.AvailableCommandInput(schema.UnstructuredCommandInput(hint="what to review"))),
    schema.AvailableCommand(name="compact", description="Summarise the conversation so far"),
]
"""What ``normal`` offers in its ``available_commands_update``, at the start of each turn."""


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
    # (unstable: session/close and session/resume, which ACP made stable in 2026 after this package)
    asyncio.run(acp.run_agent(cast(acp.Agent, FakeAgent(mode)), use_unstable_protocol=True))  # the part of acp.Agent it needs


if __name__ == "__main__":
    main()
    # Its stdin has ended and its loop is done: the interpreter's own ending would then spend
    # most of a second collecting the SDK's objects (past Tether's short wait for an agent to
    # exit by itself, so a SIGTERM would end it instead), and there is nothing left to run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
