"""Tools from plain functions: ``@tool`` and :func:`function_tool`.

A user writes an ordinary Python function with type hints and a docstring; this module
turns it into a :class:`~tether.agents.tools.base.Tool` the loop can offer to a model. The
JSON schema the model sees, and the check of what the model sends back, both come from
one pydantic model built from the signature, so the two cannot disagree: whatever the
schema promises, validation accepts, and the function receives coerced Python values
(an ``int`` for ``"5"``, an ``Enum`` member, a ``BaseModel`` or dataclass instance).

Choices, and why:

* **Conservative defaults.** ``read_only=False``: a plain function may have side effects,
  so the loop neither dedupes its calls nor skips recording its intent. ``needs_approval``
  and ``idempotent`` default to False; say so explicitly when they are true.
* **Parameter descriptions from the docstring** (Google ``Args:``, Sphinx ``:param x:``,
  NumPy ``Parameters`` / ``----------``), because that is where Python programmers
  already write them (:mod:`tether.agents.tools.docstrings`). A ``Field(description=...)``
  in ``Annotated`` wins over the docstring.
* **The context by annotation.** A parameter annotated :class:`ToolContext` (any name)
  is left out of the schema and receives the call's context: a model cannot forge it.
* **A sync function runs in a worker thread**, so a slow one does not freeze the event
  loop (and with it the console and every other run). Its ``ctx.progress`` is delivered
  on the event loop, where the trace and the console's sinks expect to be called.
* **Stop returns at once.** The call is wrapped in ``ctx.signal.guard``: an async
  function is cancelled; a thread cannot be interrupted, so a sync function keeps running
  until it returns by itself and its result is discarded. A sync function that may run
  long should poll ``ctx.signal.cancelled`` and return early; until it returns, it holds
  one of the default executor's worker threads.
* **Return values.** A ``str`` is the text the model reads. ``None`` becomes ``""``: the
  function said nothing, and inventing words ("done") would mislead the model when None
  means "not found". Anything else is JSON (``to_jsonable_python``, then ``json.dumps``
  with ``ensure_ascii=False``); a value pydantic cannot encode is written with ``str()``.
* **A preview for the approval dialog** (``preview=fn``, for a tool that needs approval):
  ``fn`` takes the tool's arguments by name, validated and coerced as the tool gets them
  (any subset of them, or ``**kwargs`` for all; never the ToolContext: a preview belongs to
  no call yet), and returns text (a unified diff is shown as a diff, other text as a
  summary), a :class:`~tether.vocab.preview.Preview`, or None. Names, not an args dict,
  so the preview reads like the tool and a typo is a TypeError at decoration. It must only
  read; a sync one runs in a worker thread, and what it raises is shown as a failed
  preview (:func:`tether.agents.tools.preview.preview_call`).
* **Exceptions propagate**: the loop's tool-error policy decides what the model reads,
  and a :class:`~tether.agents.tool_errors.ToolError` keeps its meaning (e.g. ``permanent``).
* **Arguments are validated before the call**, by :meth:`FunctionTool.check_args` (the
  problem in words, for the model) and again in :meth:`FunctionTool.run`. Unknown
  arguments are refused (``additionalProperties: false``), so a misspelt optional
  argument is not silently dropped.
* **Mistakes are found at decoration time**, as a ``TypeError`` that names the function
  and the parameter and says how to fix it, not at the model's first call.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import importlib
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticUndefined, to_jsonable_python

from tether.agents.tools.base import Tool, ToolContext
from tether.agents.tools.docstrings import parse_docstring
from tether.agents.tool_errors import InvalidArguments

if TYPE_CHECKING:
    from tether.vocab.preview import Preview
    from tether.agents.workspace import Workspace

__all__ = ["FunctionTool", "function_tool", "tool"]

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what chat-completions APIs accept
_MAX_PROBLEMS = 3  # enough for the model to fix its call, short enough to read
_UNRESOLVED = object()  # ``ref`` not looked up yet: see FunctionTool.ref
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class FunctionTool(Tool):
    """A tool whose work is a plain (sync or async) Python function.

    Made by :func:`tool` or :func:`function_tool`; still callable like the function
    (``get_ticket(7)`` calls it directly, ``__wrapped__`` is the function), so users can
    unit-test what they wrote without a loop.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        needs_approval: bool = False,
        idempotent: bool = False,
        preview: Callable[..., Any] | None = None,
        approvals: int = 1,
    ) -> None:
        _check_callable(fn)
        if isinstance(approvals, bool) or not isinstance(approvals, int) or not 1 <= approvals <= 5:
            raise TypeError(f"approvals is how many different people approve each call, 1 to 5; not {approvals!r}")
        if approvals > 1 and not needs_approval:
            raise TypeError(f"approvals={approvals} is for a tool that needs approval: add needs_approval=True")
        # Not ``updated``: the function's own __dict__ must not overwrite our attributes.
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.name = _tool_name(fn, name)
        summary, documented = parse_docstring(fn.__doc__)
        self.description = summary if description is None else inspect.cleandoc(description).strip()
        self.read_only = bool(read_only)
        self.needs_approval = bool(needs_approval)
        self.approvals = approvals
        self.idempotent = bool(idempotent)
        self.source = str(getattr(fn, "__module__", None) or "__main__")
        # Kept in the instance dict so that code asking whether a tool set its own ref
        # (``"ref" in vars(tool)``, as tether.agents.agent does) sees that this one did.
        self.__dict__["ref"] = _UNRESOLVED
        self._is_async = inspect.iscoroutinefunction(fn)
        self._model, self._params, self.parameters = _arguments_model(fn, self.name, documented)
        self._wants_context = any(p.field is None for p in self._params)
        self._preview = preview
        self._preview_takes = None if preview is None else _preview_takes(preview, self.name, self._params)

    # ---- what the loop reads ---------------------------------------------------------
    @property
    def ref(self) -> str | None:
        """``module:qualname`` when importing the module and following the qualname gives
        back this tool or its function, else None (a lambda, a nested function, a bound
        method). A function of ``__main__`` gets ``__main__:name``: only this process can
        resolve it, and the code that saves runs says so.

        Looked up on first use, not at decoration: while ``@tool`` runs, the module has
        not yet bound the name to the tool."""
        value = self.__dict__["ref"]
        if value is _UNRESOLVED:
            value = _reachable_ref(self)
            if value is not None:  # a miss may only mean "not bound yet": look again next time
                self.__dict__["ref"] = value
        return typing.cast("str | None", value)

    @ref.setter
    def ref(self, value: str | None) -> None:
        self.__dict__["ref"] = value

    def approval_reason(self) -> str:
        """What made the function a tool that waits: its own ``needs_approval=True``, and
        where the function is, so the operator knows whose word it is."""
        return f"its definition says needs_approval=True ({self.ref or self.source})"

    def check_args(self, args: dict[str, Any]) -> str | None:
        """Why the model's ``args`` cannot be passed to the function, in words, or None."""
        if not isinstance(args, Mapping):
            return f"invalid arguments for {self.name}: send a JSON object of named arguments."
        try:
            self._model.model_validate(args)
        except ValidationError as exc:
            return self._problem(exc)
        return None

    async def preview(self, args: dict[str, Any], workspace: Workspace | None) -> Preview | str | None:
        """What the ``preview=`` function says of a call with ``args`` (None without one).
        ``workspace`` is not passed on: a function tool has no folder of Tether's."""
        if self._preview is None:
            return None
        try:
            values = self._model.model_validate(args)
        except ValidationError as exc:
            raise InvalidArguments(self._problem(exc)) from None
        named: dict[str, Any] = {}
        for param in self._params:
            if param.field is None:
                continue
            value = getattr(values, param.field)
            if param.kind is inspect.Parameter.VAR_KEYWORD:
                named.update(value)
            else:
                named[param.name] = value
        if self._preview_takes is not None:
            named = {name: value for name, value in named.items() if name in self._preview_takes}
        if inspect.iscoroutinefunction(self._preview):
            result = await self._preview(**named)
        else:
            result = await asyncio.to_thread(functools.partial(self._preview, **named))
        if inspect.isawaitable(result):  # a sync wrapper around an async function
            result = await result
        return typing.cast("Preview | str | None", result)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        """Validate ``args`` again (to get coerced values), call the function, and return
        its result as text. Raises :class:`InvalidArguments` for arguments that
        :meth:`check_args` would refuse, RunCancelled on Stop, and whatever the function
        raises."""
        progress: _LoopProgress | None = None
        if self._wants_context and not self._is_async:
            progress = _LoopProgress(ctx.progress, asyncio.get_running_loop())
            # The context is this call's own: what the function writes back (``partial``)
            # is read by the loop from this same object.
            ctx.progress = progress
        positional, keywords = self._bind(args, ctx)
        try:
            if self._is_async:
                result = await ctx.signal.guard(self.fn(*positional, **keywords))
            else:
                call = functools.partial(self.fn, *positional, **keywords)
                result = await ctx.signal.guard(asyncio.to_thread(call))
            if inspect.isawaitable(result):  # a sync wrapper around an async function
                result = await ctx.signal.guard(result)
        finally:
            if progress is not None:
                progress.open = False  # an abandoned thread's late labels reach no one
        return _as_text(result)

    # ---- plain-function behaviour ------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function itself (no validation, no thread): for the user's own tests."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<FunctionTool {self.name} ({self.source})>"

    # ---- helpers -----------------------------------------------------------------------
    def _bind(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[list[Any], dict[str, Any]]:
        try:
            values = self._model.model_validate(args)
        except ValidationError as exc:
            raise InvalidArguments(self._problem(exc)) from None
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for param in self._params:
            value = ctx if param.field is None else getattr(values, param.field)
            if param.kind in _POSITIONAL:
                positional.append(value)
            elif param.kind is inspect.Parameter.VAR_POSITIONAL:
                positional.extend(value)
            elif param.kind is inspect.Parameter.KEYWORD_ONLY:
                keywords[param.name] = value
            else:
                keywords.update(value)
        return positional, keywords

    def _problem(self, exc: ValidationError) -> str:
        errors = exc.errors(include_url=False, include_input=False)
        names = [p.name for p in self._params if p.field is not None]
        parts = []
        for error in errors[:_MAX_PROBLEMS]:
            where = "/".join(str(part) for part in error["loc"]) or "arguments"
            if error["type"] == "extra_forbidden" and len(error["loc"]) == 1:
                known = ", ".join(names) if names else "none (call it with {})"
                message = f"unknown argument; the parameters are {known}"
            else:
                message = str(error["msg"]).rstrip(".")
            parts.append(f"{where}: {message}")
        more = len(errors) - len(parts)
        tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
        return f"invalid arguments for {self.name}: {'; '.join(parts)}{tail}."


# ---- the public constructors ---------------------------------------------------------

@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    needs_approval: bool = False,
    idempotent: bool = False,
    preview: Callable[..., Any] | None = None,
    approvals: int = 1,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    needs_approval: bool = False,
    idempotent: bool = False,
    preview: Callable[..., Any] | None = None,
    approvals: int = 1,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a function a tool: ``@tool`` or ``@tool(read_only=True, ...)``.

    The name is the function's, the description its docstring's summary, the schema
    comes from its type hints, and the parameter descriptions from its docstring.
    ``preview`` shows the people approving a call what it would change: a function taking
    the tool's arguments by name (see the module's notes), e.g.
    ``@tool(needs_approval=True, preview=refund_preview)``. ``approvals=2`` makes each call
    wait for two different people (a payment, a production deploy).
    Raises TypeError, in words, for what cannot become a tool.
    """
    options: dict[str, Any] = dict(name=name, description=description, read_only=read_only,
                                   needs_approval=needs_approval, idempotent=idempotent, preview=preview,
                                   approvals=approvals)
    if fn is None:
        return lambda f: FunctionTool(f, **options)
    if isinstance(fn, str):
        raise TypeError(f"@tool({fn!r}) passes the name as a function: write @tool(name={fn!r})")
    return FunctionTool(fn, **options)


def function_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    needs_approval: bool = False,
    idempotent: bool = False,
    preview: Callable[..., Any] | None = None,
    approvals: int = 1,
) -> FunctionTool:
    """A tool from a function that was not decorated (an agent listing a plain function).
    Same options and defaults as :func:`tool`."""
    return FunctionTool(fn, name=name, description=description, read_only=read_only,
                        needs_approval=needs_approval, idempotent=idempotent, preview=preview, approvals=approvals)


# ---- what may become a tool ----------------------------------------------------------

def _check_callable(fn: Any) -> None:
    what = getattr(fn, "__qualname__", None) or repr(fn)
    if isinstance(fn, FunctionTool):
        raise TypeError(f"{fn.name} is already a tool; to change its options, wrap its function: "
                        f"function_tool({fn.name}.__wrapped__, ...)")
    if isinstance(fn, Tool):
        raise TypeError(f"{what} is already a Tool; list it as it is")
    if inspect.isclass(fn):
        raise TypeError(f"{what} is a class, not a function: a tool is made from a function "
                        "(subclass tether.agents.tools.base.Tool for a tool class)")
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise TypeError(f"a tool is made from a function (def or async def), got "
                        f"{type(fn).__name__} {_short(fn)}; wrap it in a def")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"{what} yields values, but a tool returns one result: "
                        "return a list (or a string) instead of yielding")


def _preview_takes(preview: Any, tool_name: str, params: tuple[_Param, ...]) -> frozenset[str] | None:
    """The tool's arguments ``preview`` takes by name (None: all of them, it has ``**kwargs``),
    or a TypeError that says what to change."""
    if isinstance(preview, Tool) or not callable(preview):
        raise TypeError(f"preview= of {tool_name} must be a function of the tool's arguments, "
                        f"got {type(preview).__name__} {_short(preview)}")
    try:
        signature = inspect.signature(preview)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot read the signature of the preview of {tool_name}: {exc}") from None
    known = [p.name for p in params if p.field is not None]
    takes: set[str] = set()
    for p in signature.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL):
            raise TypeError(f"the preview of {tool_name} takes {p.name!r} by position; it is called with "
                            "the tool's arguments by name: make it a named parameter")
        if p.name in known:
            takes.add(p.name)
        elif p.default is inspect.Parameter.empty:
            raise TypeError(f"the preview of {tool_name} takes {p.name!r}, which is not an argument of the "
                            f"tool (its arguments are {', '.join(known) or 'none'}); give it a default or remove it")
    return frozenset(takes)


def _tool_name(fn: Callable[..., Any], name: str | None) -> str:
    chosen = fn.__name__ if name is None else name
    if not isinstance(chosen, str) or not _TOOL_NAME.fullmatch(chosen):
        hint = "pass name=... (letters, digits, _ and -, at most 64)"
        if name is None and chosen == "<lambda>":
            raise TypeError(f"a lambda has no name for the model to call it by: {hint}")
        raise TypeError(f"{chosen!r} cannot be a tool name: {hint}")
    return chosen


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


# ---- the arguments model and the schema ----------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class _Param:
    """One parameter of the function: how it is passed and which field holds its value
    (None: it receives the ToolContext)."""

    name: str
    kind: inspect._ParameterKind
    field: str | None
    annotation: Any = None


class _NoFieldTitles(GenerateJsonSchema):
    # Pydantic titles every field ("Ticket Id"); they repeat the property name and cost tokens.
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _arguments_model(
    fn: Callable[..., Any], tool_name: str, documented: dict[str, str]
) -> tuple[type[BaseModel], tuple[_Param, ...], dict[str, Any]]:
    """The pydantic model of the function's arguments, how each parameter is passed, and
    the ``parameters`` schema the model is shown.

    Field names are internal (``p0``, ``p1``...) and each field's alias is the parameter's
    name, so a parameter may be called ``json``, ``copy`` or ``_private`` without
    colliding with pydantic's own names; schema, validation and error paths use the alias.
    """
    what = getattr(fn, "__qualname__", tool_name)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot read the signature of {what}: {exc}") from None
    globalns = getattr(inspect.unwrap(getattr(fn, "__func__", fn)), "__globals__", {})
    fields: dict[str, Any] = {}
    params: list[_Param] = []
    contexts: list[str] = []
    for index, p in enumerate(signature.parameters.values()):
        hint = _resolve_hint(p, globalns, what)
        if _is_context(hint):
            contexts.append(p.name)
            params.append(_Param(p.name, p.kind, None))
            continue
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            annotation, default = list[hint], []  # type: ignore[valid-type]
        elif p.kind is inspect.Parameter.VAR_KEYWORD:
            annotation, default = dict[str, hint], {}  # type: ignore[valid-type]
        else:
            annotation = hint
            default = PydanticUndefined if p.default is inspect.Parameter.empty else p.default
        if isinstance(default, FieldInfo):  # ``x: int = Field(3, ge=1)``
            annotation, default = Annotated[annotation, default], PydanticUndefined
        extra: dict[str, Any] = {}
        if p.name in documented and not _has_description(annotation):
            extra["description"] = documented[p.name]
        field = f"p{index}"
        fields[field] = (annotation, Field(default, alias=p.name, **extra))
        params.append(_Param(p.name, p.kind, field, annotation))
    if len(contexts) > 1:
        raise TypeError(f"{what} takes {len(contexts)} ToolContext parameters "
                        f"({', '.join(contexts)}); one receives the call's context, keep one")
    try:
        model = create_model("Arguments", __config__=ConfigDict(extra="forbid"), **fields)
        schema = model.model_json_schema(schema_generator=_NoFieldTitles)
    except Exception as exc:
        raise TypeError(_schema_problem(what, params, exc)) from exc
    return model, tuple(params), _parameters_schema(schema)


def _parameters_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions ``parameters`` object: type, properties, required (when any),
    ``additionalProperties: false``, and ``$defs`` for nested models and enums (pydantic's
    top-level title, "Arguments", is dropped)."""
    parameters: dict[str, Any] = {"type": "object", "properties": schema.get("properties", {})}
    if schema.get("required"):
        parameters["required"] = schema["required"]
    parameters["additionalProperties"] = False
    if "$defs" in schema:
        parameters["$defs"] = schema["$defs"]
    return parameters


def _schema_problem(what: str, params: list[_Param], exc: Exception) -> str:
    """Which parameter pydantic could not describe, and what to write instead."""
    for param in params:
        if param.field is None:
            continue
        try:
            TypeAdapter(param.annotation).json_schema()
        except Exception as own:
            reason = str(own).strip().splitlines()[0] if str(own).strip() else type(own).__name__
            return (f"parameter {param.name!r} of {what} has a type the model cannot send "
                    f"({_type_name(param.annotation)}: {reason}). Annotate it with a JSON type "
                    "(str, int, float, bool, list[...], dict[str, ...], Literal, an Enum, a pydantic "
                    "model or a dataclass), or with ToolContext to receive the call's context")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"cannot build the arguments schema of {what}: {first}"


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__qualname__", None) or repr(annotation)


def _resolve_hint(param: inspect.Parameter, globalns: dict[str, Any], what: str) -> Any:
    """The parameter's type hint, resolved as :func:`typing.get_type_hints` would (string
    annotations too, as under ``from __future__ import annotations``). No annotation: Any.

    ``ToolContext`` resolves even when the module imports it only under TYPE_CHECKING (a
    common way to import a name used only in hints); every other name must be importable.
    Each parameter is resolved on its own, so an error names the parameter, and a return
    annotation that does not resolve does no harm."""
    if param.annotation is inspect.Parameter.empty:
        return Any
    holder = types.SimpleNamespace(__annotations__={param.name: param.annotation})
    localns = collections.ChainMap(globalns, {"ToolContext": ToolContext})
    try:
        return typing.get_type_hints(holder, globalns=globalns, localns=localns,  # type: ignore[arg-type]
                                     include_extras=True)[param.name]
    except Exception as exc:
        raise TypeError(f"cannot resolve the annotation {param.annotation!r} of parameter "
                        f"{param.name!r} of {what}: {exc}. Import the name at module level "
                        "(not only under TYPE_CHECKING), or define it before the function") from None


def _is_context(hint: Any) -> bool:
    """``ToolContext``, ``ToolContext | None`` or ``Annotated[ToolContext, ...]``."""
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(members) == 1:
            hint = members[0]
    return inspect.isclass(hint) and issubclass(hint, ToolContext)


def _has_description(annotation: Any) -> bool:
    """Whether ``Annotated[..., Field(description=...)]`` already describes the parameter
    (it then wins over the docstring)."""
    if typing.get_origin(annotation) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in annotation.__metadata__)


# ---- running -------------------------------------------------------------------------

class _LoopProgress:
    """``ctx.progress`` for a function in a worker thread: each label is handed to the
    event loop, where the loop's sinks (trace, console) run, and labels from a call
    that was abandoned on Stop are dropped."""

    def __init__(self, progress: Callable[[str], None], loop: asyncio.AbstractEventLoop) -> None:
        self._progress = progress
        self._loop = loop
        self.open = True

    def __call__(self, label: str) -> None:
        if not self.open:
            return
        try:
            self._loop.call_soon_threadsafe(self._deliver, label)
        except RuntimeError:  # the loop has closed: nobody is listening any more
            pass

    def _deliver(self, label: str) -> None:
        if self.open:
            self._progress(label)


def _as_text(value: Any) -> str:
    """What the model reads: a str as is, None as "", anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return str.__str__(value)  # the text itself, not an Enum's "Color.RED"
    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)


def _reachable_ref(tool: FunctionTool) -> str | None:
    fn = tool.fn
    module_name = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module_name or not qualname or "<" in qualname:  # <lambda>, <locals>
        return None
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception:
        return None
    return f"{module_name}:{qualname}" if obj is tool or obj is fn else None
