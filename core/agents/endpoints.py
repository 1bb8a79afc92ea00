"""The model clients a harness talks through: one per endpoint, kept for the harness's life.

Reused connections are what keep a turn close to the raw round trip, so a client is made the
first time an endpoint is used and closed with the harness. An agent names its endpoint
(``base_url``, its key in ``api_key_env``); one that names none talks to the harness's own:
its ``base_url``, else an ``embedded_url``, else the in-process endpoint one of its agent sets
offers (the demo's scripted provider).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from tether.models.base import ChatModel
from tether.models.client import ModelClient
from tether.models.tokens import TokenCounter
from tether.vocab.state import StateError
from tether.agents.agent import AgentError

if TYPE_CHECKING:
    from tether.agents.agent import Agent


class Endpoints:
    """The clients of one harness. ``client``, when given, answers for every agent;
    ``offered`` makes the in-process endpoint of the harness's agent sets (None: none offers one)."""

    def __init__(self, counter: TokenCounter, *, base_url: str | None, api_key: str | None,
                 client: ChatModel | None, embedded_url: str | None, stream: bool | Literal["auto"],
                 offered: Callable[[], ChatModel | None]) -> None:
        self.counter = counter
        self.base_url = base_url
        self.api_key = api_key
        self.client = client
        self.embedded_url = embedded_url
        self.stream = stream
        self.offered = offered
        self._clients: dict[tuple[str, str | None], ChatModel] = {}

    def client_for(self, agent: Agent | None) -> ChatModel:
        """The client ``agent`` talks through (None: the harness's own endpoint)."""
        if self.client is not None:
            return self.client
        if agent is not None and agent.base_url:
            key_env = agent.api_key_env
            api_key = os.environ.get(key_env) if key_env else self.api_key
            slot = (agent.base_url, key_env)
            if slot not in self._clients:
                self._clients[slot] = ModelClient(agent.base_url, api_key, stream=bool(self.stream),
                                                  counter=self.counter)
            return self._clients[slot]
        slot = ("embedded", None)
        if slot not in self._clients:
            stream = self.stream is True  # "auto" streams from real endpoints only
            if self.base_url:
                client = ModelClient(self.base_url, self.api_key, stream=stream, counter=self.counter)
            elif self.embedded_url:
                client = ModelClient(self.embedded_url, stream=stream, counter=self.counter)
            else:
                found = self.offered()
                if found is None:
                    name = agent.name if agent is not None else "the harness's"
                    raise StateError(f"agent {name} names no endpoint (base_url), and this harness has no "
                                     "agent set that offers one")
                client = found
            self._clients[slot] = client
        return self._clients[slot]

    def secrets(self, agent: Agent | None = None) -> tuple[str, ...]:
        """The API keys this process uses (for ``agent`` too): what the trace and exports redact."""
        keys = [self.api_key, os.environ.get("LLM_API_KEY")]
        if agent is not None and agent.api_key_env:
            keys.append(os.environ.get(agent.api_key_env))
        if agent is not None and agent.acp is not None:  # what its env took from this process's
            with contextlib.suppress(AgentError):
                keys.extend(agent.acp.resolved_env()[1])
        return tuple(k for k in keys if k)

    async def aclose(self) -> None:
        clients = {id(c): c for c in [*self._clients.values(), *([self.client] if self.client else [])]}
        for client in clients.values():
            await client.aclose()
        self._clients.clear()
