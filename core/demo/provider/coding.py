"""A scripted chat-completions endpoint for coding agents that speak ACP (OpenCode, Qwen Code).

Why not the scripted provider's scenarios (``tether.demo.provider.scenarios``): they see only the
messages, but a coding agent's write tool has a different name and argument shape per agent
(OpenCode: ``write {filePath, content}``; Qwen Code: ``write_file {file_path, content}``),
which only the request's ``tools`` list tells. This endpoint reads that list, streams like a
real provider (SSE, with a usage chunk), records every request body (what the model was sent),
and can hold a stream open, so that an operator (or a test) can Stop an agent mid-stream.

The script, read from the last user message (a coding agent adds its own context to the
operator's prompt, so the prompt is that message's last text part):
- a rejection's words (``... declined this call: WORDS. Nothing was done.``, the prompt Tether
  sends after a rejected call): answer them, naming the file the rejected call would have
  written;
- ``WRITE <path> CONTENT <text>``: call the agent's write tool once, then answer ``DONE_ANSWER``
  (Qwen Code overwrites only a file it has read: for it, ``read_file`` first);
- ``SHELL <command>``: call the agent's shell tool once with it, then answer ``SHELL_ANSWER``;
- ``HOLD``: stream a few words, then hold the stream until the client goes away;
- the words of one of the endpoint's :class:`Task` s: what that task says;
- anything else: answer ``PLAIN_ANSWER``.
A request without tools (a title or summary call) is answered with ``TITLE_ANSWER``.

``tether provider --coding`` serves it (``--tasks FILE``: a JSON list of tasks instead of
``tether demo --acp``'s; ``--workspace DIR``: where their relative paths are; without it, in the
folder each agent says it works in, its run's own worktree, say), until signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tether.models.processes import free_port
from tether.demo.provider.server import child_server
from tether.demo.provider.wires import (USAGE, Text, Write, anthropic_messages, anthropic_stream, gemini_json,
                                        gemini_messages, gemini_stream, patch_of, responses_messages,
                                        responses_stream)

__all__ = ["DONE_ANSWER", "HOLD_WORDS", "PLAIN_ANSWER", "SHELL_ANSWER", "SHELL_TOOLS", "TITLE_ANSWER", "USAGE",
           "WRITE_TOOLS", "ScriptedEndpoint",
           "Task", "endpoint_process", "read_tasks"]

logger = logging.getLogger(__name__)

DONE_ANSWER = "The file is written."
PLAIN_ANSWER = "Nothing to do."
TITLE_ANSWER = "A scripted session"
HOLD_WORDS = ["Thinking ", "about ", "it "]

_WRITE = re.compile(r"WRITE (\S+) CONTENT (.+?)(?:\n|$|<)", re.S)


def _latest(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match of ``pattern`` in ``text``, or None."""
    found = list(pattern.finditer(text))
    return found[-1] if found else None


def _last_write(text: str) -> re.Match[str] | None:
    """The last ``WRITE`` instruction of a message (a fork's first prompt quotes earlier ones first)."""
    found = list(_WRITE.finditer(text))
    return found[-1] if found else None


_SHELL = re.compile(r"SHELL (.+?)(?:\n|$|<)")
# The shell tool of each agent, by name, and the argument its command goes in.
SHELL_TOOLS: dict[str, str] = {"bash": "command", "run_shell_command": "command", "Bash": "command",
                               "exec_command": "cmd"}
SHELL_ANSWER = "The command ran."

_CWD = re.compile(r"(?:Working directory|working in the directory): (/\S+)")
_DECLINED = re.compile(r"declined this call: (.*?)\. Nothing was done\.", re.S)
# The write tool of each agent, by name, and how it spells its arguments.
# (Claude: ``Write``; Codex: ``apply_patch``, a freeform tool whose call is a patch: ``path`` is read from it.)
WRITE_TOOLS: dict[str, tuple[str, str]] = {"write": ("filePath", "content"), "write_file": ("file_path", "content"),
                                           "Write": ("file_path", "content"), "apply_patch": ("path", "input")}
PATCH_TOOLS = frozenset({"apply_patch"})
READ_TOOL = "read_file"  # Qwen Code's, which it wants called on a file before it overwrites it


@dataclass(frozen=True)
class Task:
    """A task the scripted model knows by its words (``asks``, found in the prompt, in any case).

    With ``path`` (relative to the endpoint's workspace), the model calls the agent's write
    tool with ``content``, then says ``done``. Without, it streams ``answer`` a word every
    ``word_s`` seconds, then holds the stream open until the client goes away (a Stop)."""

    __pydantic_config__ = ConfigDict(extra="forbid", strict=True)  # how read_tasks checks a --tasks file

    asks: str
    path: str | None = None
    content: str = ""
    done: str = DONE_ANSWER
    answer: str = ""
    word_s: float = 0.08


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _prompt(content: Any) -> str:
    """The operator's words in a user message: its last text part (an agent puts its own
    context in the parts before)."""
    if isinstance(content, list):
        texts = [str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("text")]
        return texts[-1] if texts else ""
    return _text(content)


def _cwd(messages: list[dict[str, Any]]) -> str | None:
    """The folder the agent says it works in (OpenCode's system prompt: "Working directory: …";
    Qwen Code's context: "I'm currently working in the directory: …"), or None."""
    for message in messages:
        if found := _CWD.search(_text(message.get("content"))):
            return found.group(1)
    return None


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> str:
    body: dict[str, Any] = {"id": "chatcmpl-acp", "object": "chat.completion.chunk", "created": 0, "model": "m",
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
        body["choices"] = []
    return f"data: {json.dumps(body)}\n\n"


def _words(text: str) -> list[str]:
    """``text`` in stream pieces: each word with the space or line break after it."""
    return re.findall(r"\S+\s*", text)


def _end(finish: str = "stop") -> Iterator[str]:
    yield _chunk({}, finish)
    yield _chunk({}, None, USAGE)
    yield "data: [DONE]\n\n"


class ScriptedEndpoint:
    """The endpoint's state: the requests it was sent, and whether a held stream is open.

    ``tasks``: what the model knows besides the script's keywords; ``workspace``: where
    their relative paths are (the agents want absolute ones)."""

    def __init__(self, tasks: Sequence[Task] = (), workspace: Path | None = None) -> None:
        self.tasks = tuple(tasks)
        self.workspace = workspace
        self.requests: list[dict[str, Any]] = []
        self.holding = asyncio.Event()  # set while a held stream is open
        self.held_closed = asyncio.Event()  # set when the client went away from a held stream

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._completions, methods=["POST"]),
                                 Route("/v1/models", self._models, methods=["GET"]),
                                 Route("/", self._root, methods=["GET", "HEAD"]),
                                 Route("/v1/messages", self._messages, methods=["POST"]),
                                 Route("/v1/responses", self._responses, methods=["POST"]),
                                 Route("/v1beta/models/{call:path}", self._gemini, methods=["POST"])])

    async def _root(self, request: Request) -> Response:
        return Response(status_code=200)  # Claude Code's reachability check (HEAD /)

    async def _body(self, request: Request) -> dict[str, Any] | None:
        try:
            body = await request.json()
        except ClientDisconnect:  # the agent went away mid-request (a Stop): nothing to answer
            logger.info("a client went away before its request was read")
            return None
        self.requests.append(body)
        return body

    async def _messages(self, request: Request) -> Response:
        """Anthropic's Messages API (Claude's ACP adapter), streamed."""
        if (body := await self._body(request)) is None:
            return Response(status_code=499)
        messages, tools = anthropic_messages(body)
        return StreamingResponse(anthropic_stream(self._script(messages, tools), str(body.get("model", ""))),
                                 media_type="text/event-stream")

    async def _responses(self, request: Request) -> Response:
        """The OpenAI Responses API (Codex), streamed; ``apply_patch`` as a custom tool call."""
        if (body := await self._body(request)) is None:
            return Response(status_code=499)
        messages, tools = responses_messages(body)
        custom = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "custom"}
        return StreamingResponse(responses_stream(self._script(messages, tools), str(body.get("model", "")), custom),
                                 media_type="text/event-stream")

    async def _gemini(self, request: Request) -> Response:
        """Google's ``MODEL:streamGenerateContent`` (SSE) and ``MODEL:generateContent`` (one JSON
        answer, that fits the schema the request asks for), and ``countTokens``."""
        model, _, method = request.path_params["call"].rpartition(":")
        if method == "countTokens":
            return JSONResponse({"totalTokens": USAGE["prompt_tokens"]})
        if (body := await self._body(request)) is None:
            return Response(status_code=499)
        if method == "generateContent":
            return JSONResponse(gemini_json(body, model))
        messages, tools = gemini_messages(body)
        return StreamingResponse(gemini_stream(self._script(messages, tools), model), media_type="text/event-stream")

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "tether"}]})

    async def _completions(self, request: Request) -> Response:
        if (body := await self._body(request)) is None:
            return Response(status_code=499)
        return StreamingResponse(self._events(body), media_type="text/event-stream")

    def _path(self, path: str, cwd: str | None = None) -> str:
        """``path`` as the agent's write tool wants it (absolute): a relative one is in the
        endpoint's workspace or, without one, in the folder the agent says it works in (each
        run's own worktree, say)."""
        root = self.workspace if self.workspace is not None else cwd
        if root is None or Path(path).is_absolute():
            return path
        return str(Path(root) / path)

    def _shown(self, path: str) -> str:
        """``path`` as the model names it to the operator: relative to the workspace."""
        if self.workspace is not None:
            with contextlib.suppress(ValueError):
                return str(Path(path).relative_to(self.workspace))
        return path

    def _task(self, prompt: str) -> Task | None:
        words = prompt.lower()
        return next((task for task in self.tasks if task.asks.lower() in words), None)

    async def _events(self, body: dict[str, Any]) -> AsyncIterator[str]:
        """The chat-completions stream of the script's steps."""
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        yield _chunk({"role": "assistant", "content": ""})
        finish = "stop"
        async for step in self._script(body.get("messages") or [], tools, read_first=True):
            if isinstance(step, Text):
                yield _chunk({"content": step.text})
                continue
            call = {"index": 0, "id": "call_read_0" if step.name == READ_TOOL else "call_write_0", "type": "function",
                    "function": {"name": step.name, "arguments": json.dumps(step.args)}}
            yield _chunk({"tool_calls": [call]})
            finish = "tool_calls"
        for piece in _end(finish):
            yield piece

    def _write(self, tools: set[Any], path: str, content: str, cwd: str | None = None) -> Write | None:
        """The call of the agent's write tool that writes ``content`` to ``path``."""
        name = next((n for n in WRITE_TOOLS if n in tools), None)
        if name is None:
            return None
        if name in PATCH_TOOLS:
            return Write(name, {"input": patch_of(self._path(path, cwd), content)})
        path_key, content_key = WRITE_TOOLS[name]
        return Write(name, {path_key: self._path(path, cwd), content_key: content})

    async def _script(self, messages: list[dict[str, Any]], tools: set[Any],
                      read_first: bool = False) -> AsyncIterator[Text | Write]:
        """What the model does, in any wire: text pieces, or one call of the write tool.
        ``read_first`` (chat completions, Qwen Code's wire; Gemini CLI's has its own): a file
        that ``write_file`` would overwrite is read first, as Qwen Code insists."""
        last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        last_user = _text(messages[last].get("content")) if last >= 0 else ""
        prompt = _prompt(messages[last].get("content")) if last >= 0 else ""
        # A tool result since the last user message: this turn's write is done (unless all it
        # called was a read, Qwen Code's before it overwrites a file).
        calls = [(c.get("function") or {}).get("name") for m in messages[last + 1:] for c in m.get("tool_calls") or []]
        read = READ_TOOL in calls
        only_read = bool(calls) and set(calls) == {READ_TOOL}
        answered = any(m.get("role") == "tool" for m in messages[last + 1:]) and not only_read
        task = self._task(prompt)
        # The operator's latest instruction wins: Claude resumes a session with the earlier
        # prompt (a rejection's words, say) and the new one in one user message.
        declined, ran = _latest(_DECLINED, last_user), _latest(_SHELL, last_user)
        if declined is not None and ran is not None:
            declined, ran = (None, ran) if ran.start() > declined.start() else (declined, None)
        if not any(tools):
            yield Text(TITLE_ANSWER)
        elif declined is not None and not answered:
            for piece in _words(self._answer_rejection(declined.group(1), messages[:last])):
                yield Text(piece)
                await asyncio.sleep(0.02)
        elif ran is not None:
            name = next((n for n in SHELL_TOOLS if n in tools), None)
            described = {} if name == "exec_command" else {"description": "Run the command"}  # Codex's has none
            call = Write(name, {SHELL_TOOLS[name]: ran.group(1).strip(), **described}) if name is not None else None
            if answered or (call is not None and _called(messages, call)):  # Claude merges turns, as for WRITE
                yield Text(SHELL_ANSWER)
            else:
                yield call if call is not None else Text(f"No shell tool among {sorted(t for t in tools if t)}.")
        elif "HOLD" in last_user and not answered:
            async for piece in self._hold(HOLD_WORDS, 0.01):
                yield Text(piece)
        elif task is not None and task.path is None and not answered:
            async for piece in self._hold(_words(task.answer), task.word_s):
                yield Text(piece)
        elif not answered and ((found := _last_write(last_user)) or (task is not None and task.path)):
            path, content = (found.group(1), found.group(2).strip()) if found else (task.path, task.content)  # type: ignore[union-attr]
            write = self._write(tools, str(path), content, _cwd(messages))
            if write is not None and _called(messages, write):  # Claude merges turns: a result before the prompt
                yield Text(DONE_ANSWER)
            elif read_first and write is not None and write.name == "write_file" and READ_TOOL in tools \
                    and not read and Path(target := write.args["file_path"]).exists():
                yield Write(READ_TOOL, {"file_path": target})  # Qwen Code overwrites only a file it has read
            elif write is not None:
                yield write
            else:
                yield Text(f"No write tool among {sorted(t for t in tools if t)}.")
        elif task is not None and task.path and answered:
            for piece in _words(task.done):
                yield Text(piece)
        else:
            yield Text(DONE_ANSWER if answered else PLAIN_ANSWER)

    def _answer_rejection(self, words: str, before: list[dict[str, Any]]) -> str:
        """The model's answer to the operator's words: it takes them, and leaves the file alone."""
        path = None
        for message in reversed(before):
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                if function.get("name") in WRITE_TOOLS and path is None:
                    with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError):
                        path = json.loads(function.get("arguments") or "{}").get(WRITE_TOOLS[function["name"]][0])
        what = self._shown(path) if path else "the file"
        said = words.strip()
        said = said[:1].upper() + said[1:]
        return f"Understood: “{said}”. I have left {what} as it was, and I will not write it until you ask me to."

    async def _hold(self, words: Sequence[str], word_s: float) -> AsyncIterator[str]:
        """Stream ``words``, then hold the stream open until the client goes away (or the server stops)."""
        try:
            for word in words:
                yield word
                await asyncio.sleep(word_s)
            self.holding.set()
            await asyncio.Event().wait()
            yield ""  # never reached: keeps this an async generator
        finally:
            self.holding.clear()
            self.held_closed.set()


def _called(messages: list[dict[str, Any]], write: Write) -> bool:
    """Whether the model already made this very call (same tool, same arguments) in the conversation."""
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name") != write.name:
                continue
            with contextlib.suppress(ValueError, TypeError):
                args = json.loads(function.get("arguments") or "{}")
                if all(args.get(key) == value for key, value in write.args.items()):
                    return True
    return False


def read_tasks(path: Path) -> list[Task]:
    """The tasks of a JSON file (a list of objects with :class:`Task`'s fields, checked by
    pydantic); ValueError in one line naming the file, and the task and key that are wrong."""
    try:
        return TypeAdapter(list[Task]).validate_json(path.read_bytes())
    except OSError as exc:
        raise ValueError(f"--tasks {path}: cannot read it: {exc.strerror or exc}") from None
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc, kind, words = error["loc"], error["type"], str(error["msg"]).rstrip(".")
        where = f"task {loc[0]}: " if loc else ""
        key = ".".join(str(part) for part in loc[1:])
        if kind == "json_invalid":
            said = f"not valid JSON: {words.removeprefix('Invalid JSON: ')}"
        elif kind == "list_type" and not loc:
            said = "expected a list of tasks"
        elif kind == "missing":
            said = f"{key} is missing"
        elif kind == "unexpected_keyword_argument":
            said = f"unknown key {key!r}; the keys are {', '.join(sorted(f.name for f in fields(Task)))}"
        else:
            said = f"{key}: {words.lower()}" if key else words.lower()
        raise ValueError(f"--tasks {path}: {where}{said}") from None


@contextlib.contextmanager
def endpoint_process(*, tasks: Sequence[Task] = (), workspace: Path | None = None,
                     start_timeout_s: float = 30.0) -> Iterator[str]:
    """``tether provider --coding`` in a child process on a free loopback port: its ``/v1``
    base URL once it answers. It stops on exit, and when this process dies (it watches its
    stdin)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tether-endpoint-") as folder:
        script = Path(folder) / "tasks.json"
        script.write_text(json.dumps([asdict(task) for task in tasks]))
        command = [sys.executable, "-m", "tether.tui.cli", "provider", "--coding", "--host", "127.0.0.1",
                   "--port", str(port), "--tasks", str(script), "--until-stdin-closes"]
        if workspace is not None:
            command += ["--workspace", str(workspace)]
        with child_server(command, port, "the scripted endpoint", start_timeout_s) as url:
            yield url
