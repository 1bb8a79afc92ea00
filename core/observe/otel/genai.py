"""The GenAI semantic conventions' side of a span: which provider a run talks to, a
chat-completions message in the conventions' shape, and the content that may leave the
process, cut to size and with anything that looks like a credential redacted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

DEFAULT_PROVIDER = "openai"
"""``gen_ai.provider.name`` when the endpoint's host says nothing better: Tether speaks the
OpenAI chat-completions API, whoever serves it (the conventions' "best knowledge" rule)."""
MAX_CONTENT_CHARS = 8192
"""A text part (a message's text, a tool's arguments or result) is cut to this many
characters when exported."""
REDACTED = "[redacted]"


# The conventions' well-known provider names, by the host of the endpoint a run talks to.
_PROVIDER_HOSTS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    (".openai.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    ("api.anthropic.com", "anthropic"),
    ("api.groq.com", "groq"),
    ("api.deepseek.com", "deepseek"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.cohere.com", "cohere"),
    ("api.cohere.ai", "cohere"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("bedrock-runtime.", "aws.bedrock"),
)

# Defensive redaction: the events never carry API keys, but a tool's output or a
# provider's error may echo a header back.
_AUTH_HEADER = re.compile(
    r"""(?i)\b((?:proxy-)?authorization)(["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token|digest)\s+)?[^\s"',;}\]\\]+""")
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_SECRET_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")

# ToolResult.error values the loop writes itself, as low-cardinality error.type values.
_TOOL_ERROR_TYPES = {"unknown tool": "unknown_tool", "invalid arguments": "invalid_arguments",
                     "declined": "declined", "cancelled": "cancelled"}
_NOT_FAILURES = frozenset({"declined", "cancelled"})  # ok=False, but nothing broke


def provider_for(base_url: str | None) -> str:
    """``gen_ai.provider.name`` for a run whose model is at ``base_url``."""
    host = (urlsplit(base_url).hostname or "") if base_url else ""
    for pattern, name in _PROVIDER_HOSTS:
        if host == pattern or (pattern.startswith(".") and host.endswith(pattern)) \
                or (pattern.endswith(".") and host.startswith(pattern)):
            return name
    return DEFAULT_PROVIDER



class _Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(sorted({s for s in secrets if s and len(s) >= 8}, key=len, reverse=True))

    def __call__(self, text: Any) -> str:
        text = str(text)
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        return _SECRET_KEY.sub(REDACTED, text)


def _cut(text: str, limit: int = MAX_CONTENT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"...[{len(text) - limit} more characters not exported]"


def _text_of(content: Any) -> str | None:
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(texts) if texts else json.dumps(content, default=str)
    return str(content)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return _cut(raw)
    return raw


def _message(message: dict[str, Any], *, finish_reason: str | None = None) -> dict[str, Any]:
    """A chat-completions message in the conventions' message shape (role + parts)."""
    role = message.get("role") or "user"
    text = _text_of(message.get("content"))
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"),
                      "response": _cut(text or "")})
    elif text:
        parts.append({"type": "text", "content": _cut(text)})
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts.append({"type": "tool_call", "id": call.get("id"), "name": fn.get("name"),
                      "arguments": _arguments(fn.get("arguments"))})
    out: dict[str, Any] = {"role": role, "parts": parts}
    if finish_reason is not None:
        out["finish_reason"] = finish_reason
    return out


def _reply_index(messages: Sequence[dict[str, Any]], turn: int, turns: int | None) -> int | None:
    """Where turn ``turn``'s reply is: the last message while the run is live (the loop
    emits the turn right after adding it), else the matching assistant message."""
    if turns is None:
        if messages and messages[-1].get("role") == "assistant":
            return len(messages) - 1
        return None
    replies = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    k = len(replies) - turns + turn - 1  # earlier assistant messages the run was made with come first
    return replies[k] if 0 <= k < len(replies) else None
