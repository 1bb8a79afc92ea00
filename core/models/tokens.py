"""Token accounting with the o200k_base encoding, offline.

The rank file ships inside the package (``core/data/o200k_base.tiktoken``) and is
loaded through tiktoken's own loader, which checks its sha256; nothing is fetched. The
ranks it parses are kept in the user's cache folder, with their own sha256, so that the
next process reads them instead of parsing the file again.

How a request is rendered for counting
--------------------------------------
Both the scripted provider (to report ``usage``) and the harness (to estimate a
prompt before sending it, in strict budget mode, or when a provider omits usage)
count the same rendering, so their numbers agree exactly:

* Every message is rendered on its own as::

      <|role|>            role marker: "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"
      {content}           the text content ("" when null)

  A tool message adds its call id to the marker: ``<|tool|>{tool_call_id}``.
  An assistant message adds one line per tool call: ``<|call|>{name} {arguments}``,
  with ``arguments`` the JSON string exactly as sent.
  The parts are joined with newlines.
* Each message costs ``MESSAGE_OVERHEAD`` (3) tokens on top of its rendering,
  and the prompt costs ``REPLY_PRIMING`` (3) more, as with OpenAI's chat format.
* Tool definitions are rendered once per request as ``<|tools|>`` followed by the
  JSON of the ``tools`` array (keys sorted, compact separators), and counted once.
* A completion (the assistant reply) is rendered like an assistant message but
  without the overhead: ``{content}`` then one ``<|call|>name arguments`` line per call.

Text is encoded with ``encode_ordinary``: a marker-like string inside a message is
ordinary text, never a special token.

The provider recounts the whole transcript on every request, so per-message counts
are cached by their rendering: a request costs in proportion to what is new in it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import tiktoken
import tiktoken.load
from tiktoken_ext import openai_public

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
MESSAGE_OVERHEAD = 3
REPLY_PRIMING = 3
_CACHE_LIMIT = 200_000

_encoding: tiktoken.Encoding | None = None
_encoding_lock = threading.Lock()


def rank_file_path() -> str:
    """Path of the rank file shipped as package data."""
    return str(resources.files("tether") / "data" / "o200k_base.tiktoken")


def encoding() -> tiktoken.Encoding:
    """The o200k_base encoding, loaded once from the shipped, hash-checked rank file."""
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                ranks = _ranks()
                # Reuse tiktoken's own definition of o200k_base (split pattern, special
                # tokens); only where the ranks come from is ours: its loader is swapped for
                # the one call (unittest.mock would do the same, and load difflib with it).
                loader = openai_public.load_tiktoken_bpe
                openai_public.load_tiktoken_bpe = lambda *_, **__: ranks
                try:
                    spec = openai_public.o200k_base()
                finally:
                    openai_public.load_tiktoken_bpe = loader
                _encoding = tiktoken.Encoding(**spec)
    return _encoding


def ranks_cache_path() -> Path | None:
    """Where the rank file's parsed ranks are kept between processes: the user's cache folder
    (``$XDG_CACHE_HOME``, else ``~/.cache``), named by the rank file's hash and the marshal
    format; None where there is no home folder."""
    root = os.environ.get("XDG_CACHE_HOME")
    try:
        folder = Path(root) if root else Path.home() / ".cache"
    except RuntimeError:  # no HOME, and no user in the password database
        return None
    return folder / "tether" / f"o200k_base-{O200K_SHA256[:16]}.ranks{marshal.version}"


def _ranks() -> dict[bytes, int]:
    """The ranks of the shipped rank file. Parsing its 200,000 base64 lines is most of what a
    process pays to count tokens, and every ``tether`` process that runs a model loop pays it:
    the parsed ranks are kept in the user's cache, with their own SHA-256, and read from
    there when they are whole. Anything else (no cache, a torn or foreign file, a folder that
    cannot be written) falls back to tiktoken's loader, which checks the rank file's hash."""
    cached = ranks_cache_path()
    if cached is not None:
        with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
            blob = cached.read_bytes()
            digest, payload = blob[:32], blob[32:]
            if hashlib.sha256(payload).digest() == digest:
                ranks = marshal.loads(payload)
                if isinstance(ranks, dict) and ranks:
                    return ranks
    path = rank_file_path()
    # tiktoken checks the hash too, except when TIKTOKEN_CACHE_DIR is "": check it ourselves.
    if not tiktoken.load.check_hash(Path(path).read_bytes(), O200K_SHA256):
        raise ValueError(f"{path} does not match its sha256 {O200K_SHA256}; reinstall tether")
    ranks = tiktoken.load.load_tiktoken_bpe(path, expected_hash=O200K_SHA256)
    if cached is not None:
        _keep(cached, ranks)
    return ranks


def _keep(cached: Path, ranks: dict[bytes, int]) -> None:
    """Write the ranks' cache whole or not at all (a temporary file renamed over it): processes
    that start together may each write it, and a reader never sees half of one."""
    payload = marshal.dumps(ranks)
    with contextlib.suppress(OSError):
        cached.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=cached.parent, prefix=".ranks-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(payload).digest() + payload)
            os.replace(temporary, cached)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def encoding_loaded() -> bool:
    """True once :func:`encoding` has loaded the rank file: callers that load it off the
    event loop (a thread hop, ~0.1 ms or more) need not do so again."""
    return _encoding is not None


def count_text(text: str) -> int:
    return len(encoding().encode_ordinary(text))


def render_message(message: Mapping[str, Any]) -> str:
    role = message.get("role", "")
    marker = f"<|{role}|>"
    if role == "tool":
        marker += str(message.get("tool_call_id") or "")
    parts = [marker, content_text(message.get("content"))]
    parts.extend(_render_calls(message.get("tool_calls")))
    return "\n".join(parts)


def render_completion(content: str | None, tool_calls: Sequence[Mapping[str, Any]] | None) -> str:
    return "\n".join([content_text(content), *_render_calls(tool_calls)])


def render_tools(tools: Sequence[Mapping[str, Any]] | None) -> str:
    if not tools:
        return ""
    return "<|tools|>" + json.dumps(list(tools), sort_keys=True, separators=(",", ":"))


class TokenCounter:
    """Counts prompts and completions, caching each distinct rendering.

    Thread-safe; one instance is shared by a provider or a harness process.
    """

    def __init__(self, cache_limit: int = _CACHE_LIMIT) -> None:
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._limit = cache_limit
        self._lock = threading.Lock()

    def _count_cached(self, rendering: str) -> int:
        with self._lock:
            hit = self._cache.get(rendering)
            if hit is not None:
                self._cache.move_to_end(rendering)
                return hit
        n = count_text(rendering)
        with self._lock:
            self._cache[rendering] = n
            if len(self._cache) > self._limit:
                self._cache.popitem(last=False)
        return n

    def message_tokens(self, message: Mapping[str, Any]) -> int:
        return self._count_cached(render_message(message)) + MESSAGE_OVERHEAD

    def prompt_tokens(
        self, messages: Iterable[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        total = REPLY_PRIMING + sum(self.message_tokens(m) for m in messages)
        rendered_tools = render_tools(tools)
        if rendered_tools:
            total += self._count_cached(rendered_tools)
        return total

    def completion_tokens(
        self, content: str | None, tool_calls: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        return count_text(render_completion(content, tool_calls))


def content_text(content: Any) -> str:
    """The text of a message's content, string or list-of-parts form."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # Content parts (the list form): count the text parts, in order.
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return str(content)


def _render_calls(tool_calls: Sequence[Mapping[str, Any]] | None) -> list[str]:
    lines = []
    for call in tool_calls or ():
        fn = call.get("function") or {}
        lines.append(f"<|call|>{fn.get('name', '')} {fn.get('arguments', '')}")
    return lines
