"""The chat-completions client the run loop talks to.

One seam points Tether at any endpoint shaped like the chat-completions API: the base
URL (``LLM_BASE_URL``, e.g. ``http://127.0.0.1:8000/v1``), with ``LLM_API_KEY``. This
module owns everything between "ask the model" and "here is its reply, with its cost":

* **Failures are classified once, here.** Transient ones (429, 5xx, a 200 whose body is
  not a usable reply, refused or dropped connections, timeouts) are retried with
  exponential backoff and full jitter, honouring ``Retry-After``. Permanent ones (400,
  401, 403, 404, 422, ...) raise :class:`ProviderError` at once with ``retryable=False``:
  asking again cannot fix a bad key, and each retry would only delay the operator.
* **Nothing hangs.** Connect and read timeouts bound each step, and one overall deadline
  bounds the whole call (attempts and waits), so a server that drips a byte a second
  cannot hold a run forever although it never trips the read timeout.
* **Stop is immediate.** Every wait goes through the run's :class:`CancelSignal`, so
  :class:`RunCancelled` interrupts an HTTP exchange or a ``Retry-After`` wait at once.
* **The key stays in the Authorization header.** Every text that leaves this module
  (errors, retry notices, reply content and tool-call arguments, in case a provider
  echoes headers back) goes through a redactor first.
* **Cost is always known.** When a provider omits ``usage``, the request and reply are
  counted locally with the documented rendering (:mod:`tether.models.tokens`) and the reply says
  its usage is estimated.
"""

from __future__ import annotations

import asyncio
import http
import json
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from tether.vocab.cancel import CancelSignal
from tether.models.base import Deltas, ModelReply, ProviderError, RetryNotice
from tether.models.pools import Pools
from tether.models.tokens import TokenCounter

REDACTED = "[redacted]"
# Keys shorter than this are placeholders ("none", "x", "EMPTY") that local servers
# accept; they are not secrets, and redacting them would mangle ordinary replies.
MIN_SECRET_LEN = 8
_DETAIL_LIMIT = 300
# Besides 5xx: a request timeout and rate limiting are the transient 4xx.
_RETRY_STATUSES = frozenset({408, 429})


class _Transient(Exception):
    """An attempt failed in a way that asking again may fix; never leaves this module."""

    def __init__(self, status: int | None, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


@dataclass(slots=True)
class _Parsed:
    content: str | None
    tool_calls: list[dict]
    finish_reason: str
    usage: tuple[int, int] | None
    ttft_ms: float | None = None
    stream_ms: float | None = None


class _Redactor:
    """Replaces the API key, and any ``Bearer <key>``, with ``[redacted]``."""

    __slots__ = ("_bearer", "_key")

    def __init__(self, key: str | None) -> None:
        self._key = key if key and len(key) >= MIN_SECRET_LEN else None
        self._bearer = f"Bearer {key}"

    def __call__(self, text: str) -> str:
        if self._key is None or self._key not in text:
            return text
        return text.replace(self._bearer, REDACTED).replace(self._key, REDACTED)


def without_credentials(url: str) -> str:
    """``url`` without a ``user:password@`` part: the form shown in messages and saved."""
    return str(httpx.URL(url).copy_with(userinfo=b""))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# Messages are kept in frozen segments of about this size; a request copies at most one.
SEGMENT_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class RequestBody:
    """A request body as the chunks it is written in, and its total length."""

    chunks: tuple[bytes, ...]
    length: int

    def __bytes__(self) -> bytes:
        return b"".join(self.chunks)

    def content(self) -> bytes | AsyncIterator[bytes]:
        """What httpx sends: the one chunk as it is, or the chunks one after another
        (the caller sets ``Content-Length``, so nothing is re-framed as chunked)."""
        if len(self.chunks) == 1:
            return self.chunks[0]

        async def each() -> AsyncIterator[bytes]:
            for chunk in self.chunks:
                yield chunk

        return each()


class EncodedTranscript:
    """A run's requests, kept encoded from one turn to the next.

    Every turn resends the whole transcript. Encoding it whole each time would make a
    turn cost grow with the run, and so would copying it into one body: at 1,000 turns
    that is a 700 KB copy per turn, work that grows with the run and pushes the rest of
    the turn out of the CPU's caches. Messages are append-only, so each is encoded once,
    when it is new, into an open segment; a segment that reaches ``SEGMENT_BYTES`` is
    frozen as ``bytes`` and never copied again. A request is a tuple of chunks (its
    head, the frozen segments, the open one, its tail) that httpx writes out in turn, so
    building it copies at most one segment however long the run. The head and tail
    (model, tools, options) are encoded once per run as well.
    """

    __slots__ = ("_frozen", "_open", "_count", "_length", "_frame_key", "_frame_tools", "_frame")

    def __init__(self) -> None:
        self._frozen: list[bytes] = []  # full segments of the messages' JSON, comma-separated
        self._open = bytearray()  # the segment still being filled
        self._count = 0  # messages encoded
        self._length = 0  # bytes in the frozen segments
        self._frame_key: tuple[Any, ...] | None = None
        self._frame_tools: list[dict] | None = None
        self._frame = (b"", b"")

    def _sync(self, messages: list[dict]) -> None:
        if self._count > len(messages):  # not the transcript it was built from: start over
            self._frozen.clear()
            self._open.clear()
            self._count = self._length = 0
        for message in messages[self._count:]:
            if self._count:
                self._open += b","
            self._open += _dumps(message).encode()
            self._count += 1
            if len(self._open) >= SEGMENT_BYTES:
                self._frozen.append(bytes(self._open))
                self._length += len(self._open)
                self._open.clear()

    def frame(self, model: str, tools: list[dict] | None, max_tokens: int | None,
              stream: bool) -> tuple[bytes, bytes]:
        """The body's bytes before and after the messages array. Kept while the run asks
        with the same model, options and tools list (the loop builds that list once and
        never changes it, so it is recognised by identity)."""
        key = (model, max_tokens, stream)
        if key != self._frame_key or tools is not self._frame_tools:
            payload: dict[str, Any] = {}
            if tools:
                payload["tools"] = tools
                # Explicit, because some servers only offer the tools to the model when asked to.
                payload["tool_choice"] = "auto"
            if max_tokens is not None:
                payload["max_tokens"] = max_tokens
            if stream:
                payload["stream"] = True
                payload["stream_options"] = {"include_usage": True}
            rest = _dumps(payload)[1:-1]
            head = f'{{"model":{_dumps(model)},"messages":['.encode()
            tail = f']{"," + rest if rest else ""}}}'.encode()
            self._frame_key, self._frame_tools, self._frame = key, tools, (head, tail)
        return self._frame

    def body(self, frame: tuple[bytes, bytes], messages: list[dict]) -> RequestBody:
        """The request: ``frame``'s head, the messages as a JSON array, its tail."""
        self._sync(messages)
        head, tail = frame
        length = len(head) + self._length + len(self._open) + len(tail)
        if not self._frozen:
            return RequestBody((b"".join((head, self._open, tail)),), length)
        return RequestBody((head, *self._frozen, b"".join((self._open, tail))), length)


class ModelClient:
    """A chat-completions client: kept connections (:mod:`tether.models.pools`), retries, a deadline, redaction.

    The run loop's :class:`tether.models.base.ChatModel` for every endpoint shaped like the
    chat-completions API."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        deadline_s: float = 120.0,
        max_retries: int = 4,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 8.0,
        retry_after_cap_s: float = 30.0,
        stream: bool = False,
        counter: TokenCounter | None = None,
        rng: random.Random | None = None,
    ) -> None:
        base = httpx.URL(base_url.rstrip("/"))
        if base.scheme not in ("http", "https") or not base.host:
            raise ValueError(f"base URL must be http(s)://host[:port]/path, got {base_url!r}")
        self._url = f"{base}/chat/completions"
        # The URL as shown to people: without any user:password part.
        self.url = without_credentials(self._url)
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # Pools kept for the ModelClient's life: reusing their connections is what makes a
        # turn cost little more than the raw round trip.
        timeout = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout)
        self._pools = Pools(lambda: httpx.AsyncClient(headers=headers, transport=transport, timeout=timeout),
                            shared=transport is not None)
        self._redact = _Redactor(api_key)
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._deadline_s = deadline_s
        self._max_retries = max_retries
        self._backoff_base_s = backoff_base_s
        self._backoff_cap_s = backoff_cap_s
        self._retry_after_cap_s = retry_after_cap_s
        self._stream = stream
        self._counter = counter or TokenCounter()
        self._rng = rng or random.Random()

    async def aclose(self) -> None:
        await self._pools.aclose()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def new_transcript(self) -> EncodedTranscript:
        """A run's requests, encoded once as the transcript grows (pass it to every call)."""
        return EncodedTranscript()

    async def complete(
        self,
        model: str,
        messages: list[dict],
        tools: list[dict] | None,
        *,
        max_tokens: int | None,
        signal: CancelSignal,
        on_retry: Callable[[RetryNotice], None] | None = None,
        transcript: EncodedTranscript | None = None,
        on_delta: Deltas | None = None,
    ) -> ModelReply:
        """Ask for one assistant message, retrying transient failures within the deadline.

        Pass the run's ``transcript`` so each message is JSON-encoded once for the
        run's life rather than once per turn.

        Raises :class:`ProviderError` (redacted) when no reply can be had, and
        :class:`RunCancelled` the moment ``signal`` fires.
        """
        transcript = transcript or EncodedTranscript()
        body = transcript.body(transcript.frame(model, tools, max_tokens, self._stream), messages)

        started = time.perf_counter()
        parsed = await self._send(body, signal, on_retry, on_delta)
        provider_ms = (time.perf_counter() - started) * 1000.0

        content = None if parsed.content is None else self._redact(parsed.content)
        for call in parsed.tool_calls:
            fn = call["function"]
            fn["arguments"] = self._redact(fn["arguments"])
        if parsed.usage is None:
            prompt = self._counter.prompt_tokens(messages, tools)
            completion = self._counter.completion_tokens(content, parsed.tool_calls)
        else:
            prompt, completion = parsed.usage
        return ModelReply(
            content=content,
            tool_calls=parsed.tool_calls,
            finish_reason=parsed.finish_reason,
            prompt_tokens=prompt,
            completion_tokens=completion,
            usage_estimated=parsed.usage is None,
            provider_ms=provider_ms,
            ttft_ms=parsed.ttft_ms,
            stream_ms=parsed.stream_ms,
        )

    async def _send(
        self, body: RequestBody, signal: CancelSignal, on_retry: Callable[[RetryNotice], None] | None,
        on_delta: Deltas | None = None,
    ) -> _Parsed:
        """The retry loop, all of it under one deadline."""
        last: _Transient | None = None
        started = time.monotonic()
        attempt = 0
        try:
            async with asyncio.timeout(self._deadline_s) as deadline:
                while True:
                    attempt += 1
                    try:
                        return await signal.guard(self._attempt(body, on_delta))
                    except _Transient as exc:
                        last = exc
                        if on_delta is not None:
                            on_delta(None)  # what this attempt streamed is void
                        if attempt > self._max_retries:
                            took = time.monotonic() - started
                            raise ProviderError(
                                self._redact(f"{exc.reason} (gave up after {attempt} attempt{'s' if attempt > 1 else ''}"
                                             f" over {took:.1f} s)"),
                                status=exc.status,
                                retryable=True,
                                attempts=attempt,
                                seconds=took,
                            ) from None
                        wait = self._wait_s(attempt, exc.retry_after)
                        if on_retry is not None:
                            on_retry(RetryNotice(attempt, exc.status, self._redact(exc.reason), wait))
                        await signal.sleep(wait)
        except TimeoutError:
            if not deadline.expired():
                raise
            message = f"no complete reply within {self._deadline_s:g} s (deadline, {attempt} attempt" \
                      f"{'s' if attempt > 1 else ''})"
            if last is not None:
                message += f"; last failure: {last.reason}"
            raise ProviderError(self._redact(message), status=last.status if last else None, retryable=True,
                                attempts=attempt, seconds=time.monotonic() - started) from None

    def _wait_s(self, attempt: int, retry_after: float | None) -> float:
        """The provider's ``Retry-After`` when it gave one (capped), else full jitter:
        uniform over [0, min(cap, base * 2^(attempt-1))], so clients that failed
        together do not retry together."""
        if retry_after is not None:
            return min(retry_after, self._retry_after_cap_s)
        ceiling = min(self._backoff_cap_s, self._backoff_base_s * 2 ** (attempt - 1))
        return self._rng.uniform(0.0, ceiling)

    async def _attempt(self, body: RequestBody, on_delta: Deltas | None = None) -> _Parsed:
        """One HTTP exchange; transport failures become :class:`_Transient`."""
        headers = {"Content-Length": str(body.length)}
        sent = time.perf_counter()
        try:
            with self._pools.lease() as http:
                return await self._exchange(http, body, headers, on_delta, sent)
        except httpx.RequestError as exc:
            raise _Transient(None, self._describe_transport(exc)) from exc

    async def _exchange(self, http: httpx.AsyncClient, body: RequestBody, headers: dict[str, str],
                        on_delta: Deltas | None, sent: float) -> _Parsed:
        if not self._stream:
            response = await http.post(self._url, content=body.content(), headers=headers)
            self._check_status(response)
            return self._parse_body(response)
        async with http.stream("POST", self._url, content=body.content(), headers=headers) as response:
            if not response.is_success or not response.headers.get("content-type", "").startswith(
                "text/event-stream"
            ):
                # An error, or a server that ignored ``stream``: a whole body either way.
                await response.aread()
                self._check_status(response)
                return self._parse_body(response)
            return await self._read_stream(response, on_delta, sent)

    def _check_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if 200 <= status < 300:
            return
        phrase = response.reason_phrase or _phrase(status)
        if status == 401:
            what = "provider rejected the API key"
        elif status == 403:
            what = "provider refused access"
        elif status == 404:
            what = "provider has no such endpoint or model"
        elif status == 429:
            what = "provider is rate limiting"
        elif status >= 500:
            what = "provider failed"
        elif status >= 400:
            what = "provider rejected the request"
        else:
            what = "provider answered with an unexpected status"
        reason = f"{what} ({status} {phrase}) at {self.url}"
        detail = _provider_detail(response.content)
        if detail:
            reason += f": {detail}"
        if status in _RETRY_STATUSES or status >= 500:
            raise _Transient(status, reason, _retry_after(response.headers.get("retry-after")))
        raise ProviderError(self._redact(reason), status=status, retryable=False)

    def _parse_body(self, response: httpx.Response) -> _Parsed:
        try:
            data = json.loads(response.content)
        except ValueError:
            raise _Transient(response.status_code, f"malformed reply from {self.url}: the body is not JSON") from None
        return self._parse_completion(data, response.status_code)

    def _parse_completion(self, data: Any, status: int) -> _Parsed:
        """Validate a ``chat.completion`` object; a reply we cannot use is transient."""
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices:
            raise _Transient(status, f"malformed reply from {self.url}: no choices")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise _Transient(status, f"malformed reply from {self.url}: no choices[0].message")
        usage = data.get("usage")
        return self._parsed(message.get("content"), message.get("tool_calls"), choice.get("finish_reason"),
                            usage, status)

    def _parsed(self, content: Any, raw_calls: Any, finish: Any, usage: Any, status: int) -> _Parsed:
        """Normalise a reply (whole or assembled from a stream) to one shape."""
        if content is not None and not isinstance(content, str):
            raise _Transient(status, f"malformed reply from {self.url}: content is not text")
        if raw_calls is not None and not isinstance(raw_calls, list):
            raise _Transient(status, f"malformed reply from {self.url}: tool_calls is not a list")
        calls = []
        for i, call in enumerate(raw_calls or ()):
            fn = call.get("function") if isinstance(call, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if not isinstance(name, str) or not name:
                raise _Transient(status, f"malformed reply from {self.url}: tool call {i} has no function name")
            args = fn.get("arguments")
            if not isinstance(args, str):
                # Some servers send an object; the transcript must hold the JSON text.
                args = json.dumps(args, separators=(",", ":"))
            calls.append({
                "id": call.get("id") or "",  # the loop gives it an id unique in the run
                "type": "function",
                "function": {"name": name, "arguments": args},
            })
        if not isinstance(finish, str) or not finish:
            finish = "tool_calls" if calls else "stop"
        return _Parsed(content, calls, finish, _usage(usage))

    async def _read_stream(self, response: httpx.Response, on_delta: Deltas | None = None,
                           sent: float | None = None) -> _Parsed:
        """Assemble SSE ``chat.completion.chunk``s into one reply, handing each piece of
        text to ``on_delta`` as it arrives (redacted like everything else).

        A stream cut after the message is complete (finish_reason seen) loses only its
        usage chunk, which is then counted locally; cut earlier, it is transient.
        """
        parts: list[str] = []
        calls: dict[int, dict] = {}
        finish: str | None = None
        usage: Any = None
        sent = time.perf_counter() if sent is None else sent
        first: float | None = None
        try:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators, ": keep-alive" comments, "event:" lines
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                    if "error" in chunk:
                        detail = _error_message(chunk) or "an error chunk"
                        raise _Transient(response.status_code, f"provider failed mid-stream at {self.url}: {detail}")
                    if chunk.get("usage") is not None:
                        usage = chunk["usage"]
                    for choice in chunk.get("choices") or ():
                        delta = choice.get("delta") or {}
                        if first is None and (delta.get("content") or delta.get("tool_calls")):
                            first = time.perf_counter()
                        if delta.get("content"):
                            parts.append(delta["content"])
                            if on_delta is not None:
                                on_delta(self._redact(delta["content"]))
                        for position, piece in enumerate(delta.get("tool_calls") or ()):
                            _merge_call(calls, piece, position)
                        if choice.get("finish_reason"):
                            finish = choice["finish_reason"]
                except (ValueError, TypeError, AttributeError):
                    raise _Transient(
                        response.status_code, f"malformed stream from {self.url}: a chunk is not a completion chunk"
                    ) from None
        except httpx.TransportError:
            if finish is None:
                raise
        if finish is None:
            raise _Transient(response.status_code, f"stream from {self.url} ended before the message was complete")
        content = "".join(parts) if parts else None
        parsed = self._parsed(content, [calls[i] for i in sorted(calls)], finish, usage, response.status_code)
        if first is not None:
            parsed.ttft_ms = (first - sent) * 1000.0
            parsed.stream_ms = (time.perf_counter() - first) * 1000.0
        return parsed

    def _describe_transport(self, exc: httpx.RequestError) -> str:
        if isinstance(exc, httpx.ConnectTimeout):
            return f"could not connect to {self.url}: no answer within {self._connect_timeout:g} s (connect timeout)"
        if isinstance(exc, httpx.ConnectError):
            return f"could not connect to {self.url}: {_root_cause(exc)}"
        if isinstance(exc, httpx.ReadTimeout):
            return f"no data from {self.url} for {self._read_timeout:g} s (read timeout)"
        return f"exchange with {self.url} failed: {exc or type(exc).__name__}"


def _merge_call(calls: dict[int, dict], piece: dict, position: int) -> None:
    """Fold one tool-call delta in: id and name arrive first, arguments in pieces."""
    slot = calls.setdefault(piece.get("index", position), {"id": None, "function": {"name": "", "arguments": ""}})
    if piece.get("id"):
        slot["id"] = piece["id"]
    fn = piece.get("function") or {}
    if fn.get("name"):
        slot["function"]["name"] = fn["name"]
    if fn.get("arguments"):
        slot["function"]["arguments"] += fn["arguments"]


def _usage(usage: Any) -> tuple[int, int] | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if type(prompt) is int and type(completion) is int:
        return prompt, completion
    return None


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP-date (RFC 9110 allows both)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _provider_detail(body: bytes) -> str:
    """The provider's own words, when it used the OpenAI error shape."""
    try:
        return _error_message(json.loads(body))
    except ValueError:
        return ""


def _error_message(data: Any) -> str:
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    if not isinstance(error, str):
        return ""
    text = " ".join(error.split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"


def _root_cause(exc: BaseException) -> str:
    """Why a connection failed, in words: httpx wraps the OS error a few levels deep."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror.lower()
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "unknown status"
