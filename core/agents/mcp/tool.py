"""One tool of an MCP server, as the loop sees it: its name, schema and policy (annotations
believed only for a trusted server), and its result in the words the model reads.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from typing import TYPE_CHECKING, Any

import jsonschema

from tether.agents.tools.base import Tool, ToolContext
from tether.agents.tool_errors import ToolError
from tether.vocab.cancel import RunCancelled

if TYPE_CHECKING:
    from mcp_types import CallToolResult
    from mcp_types import Tool as ListedTool

    from tether.agents.mcp.link import _Link

log = logging.getLogger("tether.agents.mcp")

_ANY_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}


class MCPTool(Tool):
    """One tool of an MCP server, called on that server's session.

    ``name`` is the server's name for it unless it collides with another tool of the agent,
    then ``<server>.<name>``; ``remote_name`` is what the server calls it. The model is offered
    it as ``offered_name(name)`` (see :func:`~tether.agents.tools.base.offered_name`).
    """

    def __init__(self, link: _Link, listed: ListedTool, name: str) -> None:
        self._link = link
        self.name = name
        self.remote_name = listed.name
        self.server = link.spec.name
        self.source = f"mcp:{link.spec.name}"
        self.ref = None
        self.annotations = listed.annotations
        self.parameters, self.schema_problem = usable_schema(listed.input_schema)
        description = (listed.description or "").strip() or (
            listed.annotations.title if listed.annotations and listed.annotations.title else "")
        if not description:
            description = f"{listed.name} (a tool of the MCP server {self.server}, which gave no description)"
        if self.schema_problem:
            description += (f"\n(Its input schema could not be used: {self.schema_problem}. Any arguments are "
                            "accepted here; the server checks them.)")
            log.warning("MCP server %r, tool %r: input schema not usable (%s); accepting any arguments",
                        self.server, listed.name, self.schema_problem)
        self.description = description
        self.read_only, self.needs_approval, self.idempotent = policy(listed.annotations, link.spec.trust_annotations)

    def __repr__(self) -> str:
        return f"<MCPTool {self.name} ({self.source})>"

    def approval_reason(self) -> str:
        """An untrusted server's tool needs approval because its annotations are not believed,
        not because of what they say: the reason says that, and how to trust the server. A
        trusted server's tool needs it because of what its annotations say, or leave out."""
        said = annotation_words(self.annotations)
        if self._link.spec.trust_annotations:
            if self.annotations is None:
                return (f"the MCP server {self.server!r} gives it no annotations, so it counts as destructive "
                        "(the MCP default)")
            if self.annotations.destructive_hint is True:
                return f"the MCP server {self.server!r} marks it destructive"
            return (f"the MCP server {self.server!r} marks it neither read-only nor not destructive ({said}), "
                    "so it counts as destructive (the MCP default)")
        untrusted = f"the MCP server {self.server!r} is not trusted"
        _, trusted_needs_approval, _ = policy(self.annotations, True)
        if trusted_needs_approval:
            own = ("this tool gives no annotations" if self.annotations is None
                   else f"this tool's annotations ({said}) ask for approval too")
            return f"{untrusted}, so each of its tools counts as one that writes; {own}, so trusting it would not help"
        return (f"{untrusted}, so its tools' annotations ({said}) are not believed; trust it with "
                f"trust_annotations = true under [mcp.{_toml_key(self.server)}] in the agent file to use them")

    def check_args(self, args: dict[str, Any]) -> str | None:
        try:
            return super().check_args(args)
        except Exception as exc:  # e.g. a $ref the validator cannot resolve: leave the checking to the server
            log.debug("MCP tool %s: arguments not checked here (%s)", self.name, exc)
            return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        """Call the tool. A Stop cancels the request (the server is told); a tool error, a
        refusal or a dead server is a :class:`ToolError` in words."""
        phase = ["waiting"]  # waiting -> starting (a restart) -> sent
        try:
            result = await ctx.signal.guard(self._link.call(self.remote_name, args, ctx, phase))
        except RunCancelled:
            if phase[0] == "sent":
                ctx.partial = f"the MCP request was cancelled (notifications/cancelled sent to {self.server})"
            elif phase[0] == "starting":
                ctx.partial = f"the MCP server {self.server} was restarting; nothing was sent to it"
            raise
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"the MCP tool {self.remote_name} reported an error and gave no message")
        return text


def policy(annotations: Any, trusted: bool) -> tuple[bool, bool, bool]:
    """(read_only, needs_approval, idempotent) from a tool's annotations.

    Untrusted: writes, needs approval, not idempotent, whatever the server says. Trusted: the
    spec's reading, with its defaults for what is left out (not read-only, destructive, not
    idempotent): read-only needs no approval; otherwise only a tool that declares itself not
    destructive goes without approval."""
    if not trusted:
        return False, True, False
    read_only = bool(annotations is not None and annotations.read_only_hint is True)
    if read_only:
        return True, False, True
    destructive = annotations is None or annotations.destructive_hint is not False
    idempotent = bool(annotations is not None and annotations.idempotent_hint is True)
    return False, destructive, idempotent


def annotation_words(annotations: Any) -> str:
    """What a tool's annotations say about policy, in words ("read-only", "not destructive, idempotent")."""
    if annotations is None:
        return "none given"
    if annotations.read_only_hint is True:
        words = ["read-only"]
    else:
        words = {True: ["destructive"], False: ["not destructive"]}.get(annotations.destructive_hint, [])
    if annotations.idempotent_hint is True:
        words.append("idempotent")
    return ", ".join(words) or "no hints about writing"


def _toml_key(name: str) -> str:
    """A server's name as a key of the agent file's [mcp.<name>] table (quoted when it must be)."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def usable_schema(schema: Any) -> tuple[dict[str, Any], str | None]:
    """The tool's input schema, or an object schema that accepts anything and why."""
    if not isinstance(schema, dict):
        return dict(_ANY_OBJECT), "it is not a JSON object"
    if schema.get("type") != "object":
        return dict(_ANY_OBJECT), 'its root is not {"type": "object"}'
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return dict(_ANY_OBJECT), f"it is not a valid JSON schema ({exc.message})"
    except Exception as exc:  # e.g. an unresolvable $schema or $ref
        return dict(_ANY_OBJECT), f"it could not be checked ({exc})"
    return schema, None


def result_text(result: CallToolResult) -> str:
    """A tool result as the text the model reads: text blocks joined, other blocks described in
    words, and the structured content as JSON when there is no text."""
    parts: list[str] = []
    has_text = False
    for block in result.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
            has_text = True
        elif kind in ("image", "audio"):
            parts.append(f"[{block.mime_type}, {_decoded_size(block.data)} bytes]")
        elif kind == "resource_link":
            words = f"[resource link {block.uri}"
            if getattr(block, "name", None):
                words += f" ({block.name})"
            parts.append(words + "]")
        elif kind == "resource":
            res = block.resource
            if getattr(res, "text", None) is not None:
                parts.append(f"[resource {res.uri}]\n{res.text}")
                has_text = True
            else:
                mime = getattr(res, "mime_type", None) or "binary"
                parts.append(f"[resource {res.uri}, {mime}, {_decoded_size(getattr(res, 'blob', ''))} bytes]")
        else:
            parts.append(f"[a {kind or type(block).__name__} block]")
    if not has_text and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4
