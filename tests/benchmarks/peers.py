"""The four contestants of the harness benchmark, each running the same runaway task.

Every one of them talks to the same ``tether provider`` process over loopback, asks the
``runaway`` scenario (a ``list_files {}`` call every turn, never an answer), runs a
``list_files`` tool that lists the workspace the way Tether's does, and stops after
``turns`` model requests:

* **floor**: a raw ``httpx.AsyncClient`` loop that resends the growing transcript and
  appends a fixed tool result per turn; no validation, no persistence, no trace.
* **tether**: ``tether.harness.Harness`` with ``Limits(max_turns=turns)``: a full run,
  saved after every step, with its JSONL trace.
* **pydantic-ai**: ``Agent`` on ``OpenAIChatModel`` + ``OpenAIProvider(base_url=...)``,
  stopped by ``UsageLimits(request_limit=turns)``.
* **openai-agents**: ``Agent`` on ``OpenAIChatCompletionsModel`` + ``AsyncOpenAI(base_url=...)``,
  tracing disabled, stopped by ``Runner.run(..., max_turns=turns)``.

Each runner is built once (clients, agents) and then called once per timed run; the
returned number is the count of model requests the run made, checked by the caller.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from tether.agents.agent import DEFAULT_INSTRUCTIONS as SYSTEM_PROMPT
from tether.demo.agents import SCENARIO_TASKS
from tether.harness import Harness
from tether.vocab.state import Limits
from tether.agents.tools.builtin import list_files_text
from tether.agents.sample import ensure_sample
from tether.demo.agents import DEMO

MODEL = "runaway"
TASK = SCENARIO_TASKS[MODEL]
API_KEY = "sk-bench-dummy-key"  # the scripted provider takes any key; nothing leaves loopback

# What a peer calls once per timed run; returns how many model requests it made.
Runner = Callable[[], Awaitable[int]]


def quiet_env() -> None:
    """No tracing, no telemetry, no key lookups that could reach a network."""
    os.environ.setdefault("OPENAI_API_KEY", API_KEY)
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    os.environ["OPENAI_AGENTS_DONT_LOG_MODEL_DATA"] = "1"
    os.environ["OPENAI_AGENTS_DONT_LOG_TOOL_DATA"] = "1"
    os.environ["LOGFIRE_SEND_TO_LOGFIRE"] = "false"
    os.environ["OTEL_SDK_DISABLED"] = "true"
    os.environ["DO_NOT_TRACK"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"


LIST_FILES_SCHEMA = {
    "type": "function",
    "function": {
        "name": "list_files",
        "description": "List the files in the workspace with their sizes in bytes.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}


class Contestant:
    """Owns whatever a harness needs between runs (clients, directories)."""

    name = "?"

    def __init__(self, base_url: str, workdir: Path) -> None:
        self.base_url = base_url
        self.workdir = workdir
        self.workspace = ensure_sample(workdir / "workspace")

    async def setup(self) -> None:
        pass

    async def run(self, turns: int) -> int:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


class Floor(Contestant):
    name = "floor (raw httpx)"

    async def setup(self) -> None:
        self.http = httpx.AsyncClient(base_url=self.base_url, headers={"Authorization": f"Bearer {API_KEY}"})
        self.result = list_files_text(self.workspace)

    async def run(self, turns: int) -> int:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": TASK},
        ]
        for _ in range(turns):
            body = json.dumps({"model": MODEL, "messages": messages, "tools": [LIST_FILES_SCHEMA]}).encode()
            response = await self.http.post("/chat/completions", content=body,
                                            headers={"Content-Type": "application/json"})
            response.raise_for_status()
            message = response.json()["choices"][0]["message"]
            messages.append(message)
            for call in message.get("tool_calls") or ():
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": self.result})
        return turns

    async def aclose(self) -> None:
        await self.http.aclose()


class Tether(Contestant):
    name = "tether"

    async def setup(self) -> None:
        self.harness = Harness(self.workdir / "runs", self.workspace.root, base_url=self.base_url, api_key=API_KEY, agent_sets=(DEMO,))
        self.last_run_id: str | None = None

    async def run(self, turns: int) -> int:
        state = self.harness.new_run(MODEL, limits=Limits(max_turns=turns))
        outcome = await self.harness.run(state.run_id)
        self.last_run_id = state.run_id
        if outcome.state.status.value != "max_turns_exceeded":
            raise RuntimeError(f"tether run ended {outcome.state.status.value}: {outcome.state.error}")
        return outcome.state.turns

    def trace_path(self, run_id: str) -> Path:
        return self.harness.store.run_dir(run_id) / "trace.jsonl"

    async def aclose(self) -> None:
        await self.harness.aclose()


class PydanticAI(Contestant):
    name = "pydantic-ai"

    async def setup(self) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=self.base_url, api_key=API_KEY))
        self.agent = Agent(model, instructions=SYSTEM_PROMPT)
        workspace = self.workspace
        self.calls = 0

        @self.agent.tool_plain
        async def list_files() -> str:
            """List the files in the workspace with their sizes in bytes."""
            self.calls += 1
            return list_files_text(workspace)

    async def run(self, turns: int) -> int:
        from pydantic_ai.exceptions import UsageLimitExceeded
        from pydantic_ai.usage import UsageLimits

        before = self.calls
        try:
            result = await self.agent.run(TASK, usage_limits=UsageLimits(request_limit=turns))
        except UsageLimitExceeded:
            pass
        else:
            raise RuntimeError(f"pydantic-ai answered instead of hitting its limit: {result.output!r}")
        return self.calls - before  # one list_files call per model request


class OpenAIAgents(Contestant):
    name = "openai-agents"

    async def setup(self) -> None:
        from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
        from openai import AsyncOpenAI

        set_tracing_disabled(True)
        self.client = AsyncOpenAI(base_url=self.base_url, api_key=API_KEY)
        workspace = self.workspace
        self.calls = 0

        @function_tool
        async def list_files() -> str:
            """List the files in the workspace with their sizes in bytes."""
            self.calls += 1
            return list_files_text(workspace)

        self.agent = Agent(
            name="bench",
            instructions=SYSTEM_PROMPT,
            model=OpenAIChatCompletionsModel(model=MODEL, openai_client=self.client),
            tools=[list_files],
        )

    async def run(self, turns: int) -> int:
        from agents import MaxTurnsExceeded, Runner

        before = self.calls
        try:
            await Runner.run(self.agent, TASK, max_turns=turns)
        except MaxTurnsExceeded:
            return self.calls - before  # one list_files call per model request
        raise RuntimeError("openai-agents answered instead of hitting max_turns")

    async def aclose(self) -> None:
        await self.client.close()


CONTESTANTS: tuple[type[Contestant], ...] = (Floor, Tether, PydanticAI, OpenAIAgents)


def scratch_dir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix=f"tether-bench-{prefix}-")
