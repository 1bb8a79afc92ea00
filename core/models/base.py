"""What the run loop needs from a model, and what a model call gives back.

The loop depends on :class:`ChatModel` alone: one call that asks for the next assistant
message. :class:`tether.models.client.ModelClient` is the implementation for any endpoint shaped
like the chat-completions API (the scripted provider, llama.cpp, hosted endpoints); a
test or another transport can stand in for it with anything of this shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tether.vocab.cancel import CancelSignal

__all__ = ["ChatModel", "Deltas", "ModelReply", "ProviderError", "RetryNotice"]


@dataclass(frozen=True, slots=True)
class ModelReply:
    content: str | None
    tool_calls: list[dict]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool
    """True when the provider gave no usage and the tokens were counted locally."""
    provider_ms: float
    """Wall time of the whole call: every attempt and every wait between attempts."""
    ttft_ms: float | None = None
    """Streamed replies: from sending the request that succeeded to its first delta."""
    stream_ms: float | None = None
    """Streamed replies: from the first delta to the end of the stream."""

    def message(self) -> dict:
        """The assistant message to append to the transcript.

        ``tool_calls`` is left out when empty: several servers reject an empty list.
        ``content`` is a string even beside tool calls: some servers (llama.cpp's) reject null.
        """
        if self.tool_calls:
            return {"role": "assistant", "content": self.content or "", "tool_calls": list(self.tool_calls)}
        return {"role": "assistant", "content": self.content or ""}


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """Handed to ``on_retry`` before each wait, so the loop can trace why a turn is slow."""

    attempt: int
    """The attempt that just failed (1-based)."""
    status: int | None
    reason: str
    wait_s: float


class ProviderError(Exception):
    """The model call failed; ``message`` is for the operator and is already redacted.

    ``retryable`` tells whether the failure was transient (the run may be resumed
    later) or permanent (a bad key, a bad request: resuming would fail the same way).
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False,
                 attempts: int = 1, seconds: float = 0.0) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable
        self.attempts = attempts
        self.seconds = seconds


Deltas = Callable[[str | None], None]
"""Receives a streamed reply's text as it arrives; ``None`` means the attempt failed and the
text so far is void (a retry starts the reply over)."""



class ChatModel(Protocol):
    """A model the run loop can ask for the next assistant message."""

    def new_transcript(self) -> Any:
        """Per-run state kept from one call to the next (the HTTP client keeps the
        transcript JSON-encoded); the loop makes one per run and passes it to each call."""

    async def complete(
        self,
        model: str,
        messages: list[dict],
        tools: list[dict] | None,
        *,
        max_tokens: int | None,
        signal: CancelSignal,
        on_retry: Callable[[RetryNotice], None] | None = None,
        transcript: Any = None,
        on_delta: Deltas | None = None,
    ) -> ModelReply:
        """One assistant message for ``messages``, with its usage and cost inputs.

        Raises :class:`ProviderError` (in words, with no secret in them) when no reply can
        be had, and :class:`tether.vocab.cancel.RunCancelled` the moment ``signal`` fires.
        ``on_delta`` receives streamed text as it arrives, ``on_retry`` each retry."""

    async def aclose(self) -> None: ...
