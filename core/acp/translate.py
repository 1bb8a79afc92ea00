"""``session/update`` payloads (the ``acp`` package's models) into Tether's events.

The one place that knows the schema's shapes and the agents' quirks:
- Qwen Code reports usage as ``_meta.usage`` on an empty ``agent_message_chunk`` (no text event
  is made of it);
- OpenCode's ``usage_update.cost`` is the session's running total;
- tool call content mixes diffs, text blocks and terminal references.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from acp import schema

from tether.acp.events import (
    AcpEvent,
    CommandsAvailable,
    ConfigOptions,
    OtherUpdate,
    PlanItem,
    PlanUpdated,
    ShellOutput,
    SlashCommand,
    TextChunk,
    ThoughtChunk,
    ToolCallStarted,
    ToolCallUpdated,
    UsageReported,
)
from tether.acp.touches import Diff, Location


def update_events(update: Any) -> list[AcpEvent]:
    """The events of one ``session/update`` (usually one; a chunk carrying usage gives two)."""
    if isinstance(update, schema.AgentMessageChunk):
        events: list[AcpEvent] = []
        text = _block_text(update.content)
        if text:
            events.append(TextChunk(text, update.message_id))
        usage = _meta_usage(update.field_meta)
        if usage is not None:
            events.append(usage)
        return events
    if isinstance(update, schema.AgentThoughtChunk):
        text = _block_text(update.content)
        return [ThoughtChunk(text)] if text else []
    if isinstance(update, schema.ToolCallStart):
        return [_tool_call_started(update), *shell_output(update.tool_call_id, update.field_meta)]
    if isinstance(update, schema.ToolCallProgress):  # its output first: the update may also end the call
        return [*shell_output(update.tool_call_id, update.field_meta), _tool_call_updated(update)]
    if isinstance(update, schema.AgentPlanUpdate):
        return [PlanUpdated(tuple(PlanItem(e.content, str(e.priority), str(e.status)) for e in update.entries))]
    if isinstance(update, schema.UsageUpdate):
        cost = update.cost
        return [UsageReported("usage_update", context_used=update.used, context_size=update.size,
                              cost_amount=cost.amount if cost else None,
                              cost_currency=cost.currency if cost else None)]
    if isinstance(update, schema.ConfigOptionUpdate):
        return [ConfigOptions(config_list(update.config_options), "config_option_update")]
    if isinstance(update, schema.AvailableCommandsUpdate):
        return [CommandsAvailable(tuple(SlashCommand(c.name, c.description, _hint(c.input))
                                        for c in update.available_commands))]
    return [OtherUpdate(str(getattr(update, "session_update", type(update).__name__)))]


def shell_output(call_id: str, meta: dict[str, Any] | None) -> list[ShellOutput]:
    """A shell call's ``_meta.terminal_output`` (``data``) and ``terminal_exit`` (``exit_code``,
    ``signal``), as Codex's and Claude's adapters send them to a client that advertises
    ``_meta.terminal_output``; ``terminal_info`` (the terminal's id, its cwd) says nothing to show."""
    meta = meta if isinstance(meta, dict) else {}
    out, end = meta.get("terminal_output"), meta.get("terminal_exit")
    data = out.get("data") if isinstance(out, dict) else None
    events = [ShellOutput(call_id, data)] if isinstance(data, str) and data else []
    if isinstance(end, dict):
        signal = end.get("signal")
        events.append(ShellOutput(call_id, exited=True, exit_code=_int(end.get("exit_code")),
                                  signal=signal if isinstance(signal, str) else None))
    return events


def _hint(command_input: Any) -> str | None:
    hint = getattr(getattr(command_input, "root", command_input), "hint", None)
    return hint if isinstance(hint, str) and hint else None


def config_list(options: Iterable[Any] | None) -> tuple[dict[str, Any], ...]:
    """An agent's session config options as plain records: ``{id, name, category, value,
    values}`` (a select's values flattened out of their groups; a boolean's are true, false)."""
    out = []
    for option in options or ():
        values: list[Any] = []
        labels: list[str] = []
        if getattr(option, "type", None) == "select":
            for choice in option.options:
                for c in getattr(choice, "options", None) or [choice]:
                    values.append(c.value)
                    labels.append(c.name)
            value: Any = option.current_value
        else:
            values, value = [True, False], getattr(option, "current_value", None)
        category = option.category if isinstance(option.category, str) else None
        out.append({"id": option.id, "name": option.name, "category": category, "value": value, "values": values,
                    **({"labels": labels} if labels else {})})
    return tuple(out)


def prompt_usage(usage: schema.Usage | None) -> UsageReported | None:
    """The usage of a prompt response, if the agent sent one."""
    if usage is None:
        return None
    return UsageReported("prompt_response", input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                         total_tokens=usage.total_tokens, thought_tokens=usage.thought_tokens,
                         cached_read_tokens=usage.cached_read_tokens)


def quota_usage(meta: dict[str, Any] | None) -> UsageReported | None:
    """Gemini CLI's usage: only ``_meta.quota.token_count`` of the prompt response (the turn's
    ``input_tokens`` and ``output_tokens``)."""
    count = ((meta or {}).get("quota") or {}).get("token_count") if isinstance(meta, dict) else None
    if not isinstance(count, dict):
        return None
    return UsageReported("prompt_response", input_tokens=_int(count.get("input_tokens")),
                         output_tokens=_int(count.get("output_tokens")))


def call_tokens(usage: UsageReported) -> tuple[int, int] | None:
    """The tokens of one model call, where a report is one: Qwen Code's ``_meta.usage``, and a
    ``usage_update`` without cost (Codex), whose ``used`` (the context after the call: what the
    model read and wrote) counts as that call's input tokens."""
    if usage.source == "meta":
        return usage.input_tokens or 0, usage.output_tokens or 0
    if usage.source == "usage_update" and usage.cost_amount is None and usage.context_used:
        return usage.context_used, 0
    return None


def locations(items: Sequence[schema.ToolCallLocation] | None) -> tuple[Location, ...]:
    return tuple(Location(item.path, item.line) for item in items or ())


def diffs(content: Iterable[Any] | None) -> tuple[Diff, ...]:
    return tuple(Diff(c.path, c.new_text, c.old_text) for c in content or () if isinstance(c, schema.FileEditToolCallContent))


def content_text(content: Iterable[Any] | None) -> str:
    """The text blocks of a tool call's content, joined (diffs and terminals are elsewhere)."""
    parts = [_block_text(c.content) for c in content or () if isinstance(c, schema.ContentToolCallContent)]
    return "\n".join(p for p in parts if p)


def _tool_call_started(update: schema.ToolCallStart) -> ToolCallStarted:
    meta = update.field_meta or {}
    name = meta.get("toolName")
    return ToolCallStarted(
        tool_call_id=update.tool_call_id, title=update.title, kind=_str(update.kind), status=_str(update.status),
        locations=locations(update.locations), diffs=diffs(update.content), text=content_text(update.content),
        raw_input=update.raw_input, tool_name=name if isinstance(name, str) else None,
    )


def _tool_call_updated(update: schema.ToolCallProgress) -> ToolCallUpdated:
    return ToolCallUpdated(
        tool_call_id=update.tool_call_id, title=update.title, kind=_str(update.kind), status=_str(update.status),
        locations=None if update.locations is None else locations(update.locations), diffs=diffs(update.content),
        text=content_text(update.content), raw_input=update.raw_input, raw_output=update.raw_output,
    )


def _meta_usage(meta: dict[str, Any] | None) -> UsageReported | None:
    usage = (meta or {}).get("usage")
    if not isinstance(usage, dict):
        return None
    return UsageReported("meta", input_tokens=_int(usage.get("inputTokens")),
                         output_tokens=_int(usage.get("outputTokens")), total_tokens=_int(usage.get("totalTokens")),
                         thought_tokens=_int(usage.get("thoughtTokens")),
                         cached_read_tokens=_int(usage.get("cachedReadTokens")))


def _block_text(block: Any) -> str:
    text = getattr(block, "text", None)
    return text if isinstance(text, str) else ""


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
