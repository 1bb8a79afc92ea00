"""Tools from plain functions (tether.agents.tools.function): the schema a model is shown, the
check of what it sends, how the function is called, and the mistakes refused up front.

This file deliberately does *not* use ``from __future__ import annotations``: the hints
here are real objects, and string annotations (plus a ToolContext imported only under
TYPE_CHECKING) are covered by a module written to disk in ``test_string_annotations``.
"""

import asyncio
import dataclasses
import datetime
import enum
import functools
import importlib
import inspect
import json
import sys
import textwrap
import threading
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from tether.vocab.cancel import CancelSignal, RunCancelled
from tether.vocab.ledger import Ledger
from tether.agents.tools.base import Tool, ToolContext
from tether.agents.tool_errors import InvalidArguments, PermissionDenied
from tether.agents.tools.function import FunctionTool, function_tool, tool
from tether.agents.workspace import Workspace


# ---- fixtures and helpers --------------------------------------------------------------

@dataclasses.dataclass
class Harness:
    """A real ToolContext and what it records."""

    ctx: ToolContext
    labels: list[str]
    label_threads: list[int]


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    labels: list[str] = []
    threads: list[int] = []

    def progress(label: str) -> None:
        labels.append(label)
        threads.append(threading.get_ident())

    root = tmp_path / "ws"
    root.mkdir()
    ctx = ToolContext(run_id="run1", call_id="call7", signal=CancelSignal(), progress=progress,
                      workspace=Workspace(root), ledger=Ledger(tmp_path / "ledger.jsonl"))
    return Harness(ctx, labels, threads)


def titles_in(schema: Any, *, inside_properties: bool = False) -> list[str]:
    """Every schema-level ``title`` keyword (a property *named* title does not count)."""
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "title" and not inside_properties:
                found.append(str(value))
            found += titles_in(value, inside_properties=key in ("properties", "$defs"))
    elif isinstance(schema, list):
        for item in schema:
            found += titles_in(item)
    return found


# ---- module-level functions (their refs must resolve) -----------------------------------

class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    city: str
    zip_code: str = ""


@dataclasses.dataclass
class Window:
    start: int
    end: int


@tool
def get_ticket(ticket_id: int, include_comments: bool = False) -> dict[str, Any]:
    """Fetch a ticket from the tracker.

    Only open tickets are returned.

    Args:
        ticket_id (int): The ticket's number,
            as shown in the tracker.
        include_comments: Whether to include the comment thread.

    Returns:
        The ticket as a dict.
    """
    return {"id": ticket_id, "comments": [] if include_comments else None}


def plain_lookup(city: str) -> str:
    """Look up a city."""
    return f"{city}: sunny"


# ---- the schema ------------------------------------------------------------------------

def test_schema_from_hints_and_google_docstring() -> None:
    assert isinstance(get_ticket, FunctionTool) and isinstance(get_ticket, Tool)
    assert get_ticket.name == "get_ticket"
    assert get_ticket.description == "Fetch a ticket from the tracker.\n\nOnly open tickets are returned."
    assert get_ticket.parameters == {
        "type": "object",
        "properties": {
            "ticket_id": {"type": "integer", "description": "The ticket's number, as shown in the tracker."},
            "include_comments": {"type": "boolean", "default": False,
                                 "description": "Whether to include the comment thread."},
        },
        "required": ["ticket_id"],
        "additionalProperties": False,
    }
    assert get_ticket.schema() == {"type": "function", "function": {
        "name": "get_ticket", "description": get_ticket.description, "parameters": get_ticket.parameters}}


def test_common_types() -> None:
    @tool
    def search(query: str, limit: int, score: float, exact: bool, tags: list[str],
               weights: dict[str, int], note: Optional[str], extra: str | None = None) -> str:
        """Search."""
        return ""

    props = search.parameters["properties"]
    assert props["query"] == {"type": "string"}
    assert props["limit"] == {"type": "integer"}
    assert props["score"] == {"type": "number"}
    assert props["exact"] == {"type": "boolean"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["weights"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert props["extra"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    # Optional without a default is nullable but still required: only a default makes it optional.
    assert search.parameters["required"] == ["query", "limit", "score", "exact", "tags", "weights", "note"]
    assert titles_in(search.parameters) == []


def test_sphinx_docstring() -> None:
    @tool
    def move(src: str, dst: str, overwrite: bool = False) -> str:
        """Move a file inside the workspace.

        :param src: The file to move.
        :param str dst: Where to put it,
            relative to the workspace.
        :param overwrite: Replace an existing file.
        :returns: What happened.
        :raises FileNotFoundError: when src is missing.
        """
        return ""

    props = move.parameters["properties"]
    assert move.description == "Move a file inside the workspace."
    assert props["src"]["description"] == "The file to move."
    assert props["dst"]["description"] == "Where to put it, relative to the workspace."
    assert props["overwrite"]["description"] == "Replace an existing file."


def test_numpy_docstring() -> None:
    @tool
    def resample(series: list[float], width: int, low: float = 0.0, high: float = 1.0) -> list[float]:
        """Resample a series to a fixed width.

        Parameters
        ----------
        series : list of float
            The values, oldest first.
        width : int
            How many points to return.
        low, high : float
            The range the values are clipped to.

        Returns
        -------
        list of float
            The resampled values.
        """
        return []

    props = resample.parameters["properties"]
    assert resample.description == "Resample a series to a fixed width."
    assert props["series"]["description"] == "The values, oldest first."
    assert props["width"]["description"] == "How many points to return."
    assert props["low"]["description"] == props["high"]["description"] == "The range the values are clipped to."


def test_summary_stops_at_the_first_section_of_any_kind() -> None:
    @tool
    def rename(old: str, new: str) -> str:
        """Rename a file.

        The new name must not exist.

        Raises:
            FileExistsError: when it does.

        Keyword Args:
            old: The current name.
            new: The name it gets.
        """
        return ""

    assert rename.description == "Rename a file.\n\nThe new name must not exist."
    assert rename.parameters["properties"]["old"]["description"] == "The current name."
    assert rename.parameters["properties"]["new"]["description"] == "The name it gets."


def test_descriptions_without_docstring_and_overrides() -> None:
    @tool(name="lookup-city", description="  Find a city.\n  Exactly.  ")
    def undocumented(city: Annotated[str, Field(description="From Field.")], country: str = "FR") -> str:
        """Ignored summary.

        Args:
            city: From the docstring (Field wins).
            country: ISO code.
        """
        return city

    assert undocumented.name == "lookup-city"
    assert undocumented.description == "Find a city.\nExactly."
    assert undocumented.parameters["properties"]["city"]["description"] == "From Field."
    assert undocumented.parameters["properties"]["country"]["description"] == "ISO code."

    @tool
    def bare(x: int) -> int:
        return x

    assert bare.description == ""
    assert bare.parameters["properties"] == {"x": {"type": "integer"}}


def test_field_constraints_and_defaults_from_field() -> None:
    @tool
    def page(size: Annotated[int, Field(ge=1, le=100)] = 10, offset: int = Field(0, ge=0, description="Skip.")) -> str:
        """Page through results."""
        return f"{size}:{offset}"

    props = page.parameters["properties"]
    assert props["size"] == {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}
    assert props["offset"] == {"type": "integer", "minimum": 0, "default": 0, "description": "Skip."}
    assert "required" not in page.parameters
    assert page.check_args({"size": 0}) == (
        "invalid arguments for page: size: Input should be greater than or equal to 1.")


async def test_literal_enum_nested_model_and_dataclass(harness: Harness) -> None:
    seen: dict[str, Any] = {}

    @tool
    def ship(to: Address, priority: Priority, window: Window, mode: Literal["air", "sea"] = "sea") -> str:
        """Ship a parcel."""
        seen.update(to=to, priority=priority, window=window, mode=mode)
        return "shipped"

    params = ship.parameters
    assert params["properties"]["mode"] == {"enum": ["air", "sea"], "type": "string", "default": "sea"}
    assert params["properties"]["priority"] == {"$ref": "#/$defs/Priority"}
    assert params["$defs"]["Priority"]["enum"] == ["low", "high"]
    assert params["$defs"]["Address"]["properties"]["city"] == {"type": "string"}
    assert params["$defs"]["Address"]["required"] == ["city"]
    assert params["$defs"]["Window"]["required"] == ["start", "end"]
    assert params["required"] == ["to", "priority", "window"]

    args = {"to": {"city": "Lyon"}, "priority": "high", "window": {"start": "9", "end": 17}}
    assert ship.check_args(args) is None
    assert await ship.run(args, harness.ctx) == "shipped"
    # The function gets real Python values, not the JSON the model sent.
    assert seen == {"to": Address(city="Lyon"), "priority": Priority.HIGH,
                    "window": Window(9, 17), "mode": "sea"}


async def test_unannotated_parameters_and_star_args_are_any(harness: Harness) -> None:
    @tool
    def join(sep, *parts: str, **labels) -> str:
        """Join parts.

        Args:
            sep: The separator.
            *parts: The parts.
            **labels: Extra labels.
        """
        return sep.join(parts) + "".join(f" {k}={v}" for k, v in sorted(labels.items()))

    props = join.parameters["properties"]
    assert props["sep"] == {"description": "The separator."}
    assert props["parts"] == {"type": "array", "items": {"type": "string"}, "default": [],
                              "description": "The parts."}
    assert props["labels"] == {"type": "object", "additionalProperties": True, "default": {},
                               "description": "Extra labels."}
    assert join.parameters["required"] == ["sep"]
    result = await join.run({"sep": "-", "parts": ["a", "b"], "labels": {"x": 1}}, harness.ctx)
    assert result == "a-b x=1"


async def test_positional_only_and_keyword_only_parameters(harness: Harness) -> None:
    @tool
    def span(start: int, /, stop: int, *, step: int = 1) -> list[int]:
        """A range."""
        return list(range(start, stop, step))

    assert span.parameters["required"] == ["start", "stop"]
    assert await span.run({"start": 1, "stop": 8, "step": 3}, harness.ctx) == "[1, 4, 7]"
    assert await span.run({"stop": 3, "start": 0}, harness.ctx) == "[0, 1, 2]"


async def test_a_bound_method_is_a_tool_without_self(harness: Harness) -> None:
    class Tracker:
        def __init__(self) -> None:
            self.opened: list[str] = []

        def open_ticket(self, title: str) -> str:
            """Open a ticket.

            Args:
                title: One line.
            """
            self.opened.append(title)
            return f"opened #{len(self.opened)}"

    tracker = Tracker()
    made = function_tool(tracker.open_ticket)
    assert made.name == "open_ticket"
    assert made.parameters["properties"] == {"title": {"type": "string", "description": "One line."}}
    assert await made.run({"title": "printer on fire"}, harness.ctx) == "opened #1"
    assert tracker.opened == ["printer on fire"]
    assert made.ref is None  # an instance's method cannot be imported by another process


async def test_a_sync_wrapper_around_an_async_function_is_awaited(harness: Harness) -> None:
    async def fetch(n: int) -> str:
        return f"fetched {n} on {threading.get_ident()}"

    @functools.wraps(fetch)
    def logged(*args: Any, **kwargs: Any) -> Any:  # a decorator that forgot to be async
        return fetch(*args, **kwargs)

    made = function_tool(logged)
    assert made.parameters["required"] == ["n"]  # the signature is the wrapped function's
    assert await made.run({"n": 2}, harness.ctx) == f"fetched 2 on {threading.get_ident()}"


async def test_parameters_named_like_pydantic_internals(harness: Harness) -> None:
    @tool
    def export(json: bool, copy: int, schema: str, model_config: str = "") -> str:
        """Names a pydantic model could not have as fields."""
        return f"{json} {copy} {schema} {model_config}"

    assert list(export.parameters["properties"]) == ["json", "copy", "schema", "model_config"]
    args = {"json": True, "copy": 2, "schema": "s", "model_config": "m"}
    assert await export.run(args, harness.ctx) == "True 2 s m"


async def test_string_annotations_and_type_checking_only_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           harness: Harness) -> None:
    (tmp_path / "fn_tools_future.py").write_text(textwrap.dedent('''
        from __future__ import annotations

        from typing import TYPE_CHECKING, Literal

        from pydantic import BaseModel

        from tether.agents.tools.function import tool

        if TYPE_CHECKING:
            from tether.agents.tools.base import ToolContext


        class Place(BaseModel):
            city: str


        @tool(read_only=True)
        def forecast(place: Place, ctx: ToolContext, unit: Literal["C", "F"] = "C") -> str:
            """Forecast for a place."""
            ctx.progress("looking")
            return f"{place.city} 21{unit} ({ctx.call_id})"
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("fn_tools_future")
    monkeypatch.setitem(sys.modules, "fn_tools_future", module)  # forgotten after the test
    forecast = module.forecast
    assert list(forecast.parameters["properties"]) == ["place", "unit"]
    assert forecast.parameters["$defs"]["Place"]["properties"] == {"city": {"type": "string"}}
    assert await forecast.run({"place": {"city": "Nice"}}, harness.ctx) == "Nice 21C (call7)"
    assert harness.labels == ["looking"]
    assert forecast.ref == "fn_tools_future:forecast"
    assert forecast.source == "fn_tools_future"


# ---- the context -----------------------------------------------------------------------

async def test_context_is_injected_by_annotation_and_left_out_of_the_schema(harness: Harness) -> None:
    @tool(needs_approval=True)
    async def archive(name: str, context: ToolContext) -> str:
        """Archive a note: an idempotent write through the ledger."""
        key = context.idempotency_key
        entry = context.ledger.lookup(key)
        if entry is not None and entry.status == "done":
            return entry.result or ""
        context.ledger.begin(key, {"name": name})
        context.progress(f"writing {name}")
        assert context.workspace is not None
        (context.workspace.root / name).write_text("archived")
        context.ledger.complete(key, f"archived {name}")
        return f"archived {name} in {context.run_id}"

    assert archive.parameters == {"type": "object", "properties": {"name": {"type": "string"}},
                                  "required": ["name"], "additionalProperties": False}
    assert archive.check_args({"name": "a.txt", "context": {}}) is not None  # a model cannot forge it
    assert await archive.run({"name": "a.txt"}, harness.ctx) == "archived a.txt in run1"
    assert harness.labels == ["writing a.txt"]
    assert harness.ctx.workspace is not None
    assert (harness.ctx.workspace.root / "a.txt").read_text() == "archived"
    assert harness.ctx.ledger.lookup("run1:call7").result == "archived a.txt"  # type: ignore[union-attr]
    # The same call again replays the ledger's answer instead of writing twice.
    assert await archive.run({"name": "a.txt"}, harness.ctx) == "archived a.txt"


async def test_optional_context_in_a_sync_function_reports_progress_on_the_loop(harness: Harness) -> None:
    loop_thread = threading.get_ident()

    @tool
    def count(n: int, ctx: Optional[ToolContext] = None) -> str:
        """Count, reporting each step."""
        assert ctx is not None
        for i in range(n):
            ctx.progress(f"step {i + 1} of {n}")
        ctx.partial = f"{n} of {n}"
        return "counted"

    assert "ctx" not in count.parameters["properties"]
    assert await count.run({"n": 3}, harness.ctx) == "counted"
    assert harness.labels == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert set(harness.label_threads) == {loop_thread}  # the sinks are not called from the worker
    assert harness.ctx.partial == "3 of 3"  # the loop's context sees what the tool wrote


# ---- validation ------------------------------------------------------------------------

async def test_validation_problems_are_worded_for_the_model(harness: Harness) -> None:
    assert get_ticket.check_args({"ticket_id": 7}) is None
    assert get_ticket.check_args({"ticket_id": "7"}) is None  # lax: the model's "7" is fine
    assert get_ticket.check_args({"ticket_id": "seven"}) == (
        "invalid arguments for get_ticket: ticket_id: Input should be a valid integer, "
        "unable to parse string as an integer.")
    assert get_ticket.check_args({}) == "invalid arguments for get_ticket: ticket_id: Field required."
    assert get_ticket.check_args({"ticket_id": 1, "tciket": 2}) == (
        "invalid arguments for get_ticket: tciket: unknown argument; "
        "the parameters are ticket_id, include_comments.")
    assert get_ticket.check_args([1]) == (  # type: ignore[arg-type]
        "invalid arguments for get_ticket: send a JSON object of named arguments.")
    with pytest.raises(InvalidArguments, match="ticket_id: Input should be a valid integer"):
        await get_ticket.run({"ticket_id": "seven"}, harness.ctx)


def test_several_problems_are_listed_briefly() -> None:
    @tool
    def form(a: int, b: int, c: int, d: int, nested: Address) -> str:
        """A form."""
        return ""

    problem = form.check_args({"a": "x", "b": "x", "c": "x", "d": "x", "nested": {}})
    assert problem == ("invalid arguments for form: a: Input should be a valid integer, unable to parse "
                       "string as an integer; b: Input should be a valid integer, unable to parse string as "
                       "an integer; c: Input should be a valid integer, unable to parse string as an integer "
                       "(and 2 more problems).")
    assert form.check_args({"a": 1, "b": 2, "c": 3, "d": 4, "nested": {"zip_code": "1"}}) == (
        "invalid arguments for form: nested/city: Field required.")


# ---- running ---------------------------------------------------------------------------

async def test_sync_function_runs_in_a_worker_thread(harness: Harness) -> None:
    @tool
    def where() -> int:
        """Which thread am I on."""
        return threading.get_ident()

    worker = int(await where.run({}, harness.ctx))
    assert worker != threading.get_ident()


async def test_async_function_is_awaited_on_the_loop(harness: Harness) -> None:
    @tool
    async def where(delay_turns: int = 1) -> int:
        """Which thread am I on."""
        for _ in range(delay_turns):
            await asyncio.sleep(0)
        return threading.get_ident()

    assert int(await where.run({}, harness.ctx)) == threading.get_ident()


async def test_stop_cancels_a_slow_async_tool(harness: Harness) -> None:
    started, never = asyncio.Event(), asyncio.Event()
    cleaned_up: list[str] = []

    @tool
    async def wait_forever() -> str:
        """Wait for an event nobody sets."""
        started.set()
        try:
            await never.wait()
        finally:
            cleaned_up.append("yes")
        return "unreachable"

    task = asyncio.create_task(wait_forever.run({}, harness.ctx))
    await started.wait()
    harness.ctx.signal.cancel("the operator pressed Stop")
    with pytest.raises(RunCancelled) as raised:
        await task
    assert raised.value.reason == "the operator pressed Stop"
    assert cleaned_up == ["yes"]  # the coroutine was cancelled, so its cleanup ran


async def test_stop_abandons_a_slow_sync_tool_and_drops_its_late_progress(harness: Harness) -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    @tool
    def block(ctx: ToolContext) -> str:
        """Block a thread until released."""
        ctx.progress("started")
        started.set()
        release.wait()
        ctx.progress("late")
        finished.set()
        return "ignored"

    task = asyncio.create_task(block.run({}, harness.ctx))
    try:
        await asyncio.to_thread(started.wait)
        harness.ctx.signal.cancel("stop")
        with pytest.raises(RunCancelled):
            await task  # returns while the thread is still blocked
        assert not finished.is_set()
    finally:
        release.set()
    await asyncio.to_thread(finished.wait)
    await asyncio.sleep(0)
    assert harness.labels == ["started"]


async def test_a_stopped_run_does_not_start_the_function(harness: Harness) -> None:
    calls: list[int] = []

    @tool
    async def once() -> str:
        """Record a call."""
        calls.append(1)
        return "ran"

    harness.ctx.signal.cancel("already stopped")
    with pytest.raises(RunCancelled):
        await once.run({}, harness.ctx)
    assert calls == []


class Status(str, enum.Enum):
    OPEN = "open"


@pytest.mark.parametrize(("value", "text"), [
    ("plain text", "plain text"),
    (Status.OPEN, "open"),
    (None, ""),
    (42, "42"),
    (True, "true"),
    ({"city": "Zürich", "temps": [1.5, 2]}, '{"city": "Zürich", "temps": [1.5, 2]}'),
    (Address(city="Köln"), '{"city": "Köln", "zip_code": ""}'),
    (Window(1, 2), '{"start": 1, "end": 2}'),
    ([Priority.HIGH, datetime.date(2024, 5, 1)], '["high", "2024-05-01"]'),
    ({"blob": object}, json.dumps({"blob": str(object)})),
])
async def test_return_values_become_text(harness: Harness, value: Any, text: str) -> None:
    @tool
    def give() -> Any:
        """Return the value under test."""
        return value

    @tool
    async def give_async() -> Any:
        """Return the value under test."""
        return value

    assert await give.run({}, harness.ctx) == text
    assert await give_async.run({}, harness.ctx) == text


async def test_exceptions_propagate(harness: Harness) -> None:
    @tool
    def broken(n: int) -> str:
        """Fail."""
        raise ValueError(f"cannot handle {n}")

    @tool
    async def refused() -> str:
        """Fail for good."""
        raise PermissionDenied("not allowed")

    with pytest.raises(ValueError, match="cannot handle 3"):
        await broken.run({"n": 3}, harness.ctx)
    with pytest.raises(PermissionDenied) as raised:
        await refused.run({}, harness.ctx)
    assert raised.value.permanent


# ---- the decorator and the plain function ------------------------------------------------

def test_decorator_forms_and_defaults() -> None:
    @tool()
    def a() -> str:
        """A."""
        return "a"

    @tool(read_only=True, needs_approval=True, idempotent=True)
    async def b() -> str:
        """B."""
        return "b"

    assert (a.read_only, a.needs_approval, a.idempotent) == (False, False, False)
    assert (b.read_only, b.needs_approval, b.idempotent) == (True, True, True)
    assert get_ticket.source == __name__
    assert [t.name for t in (a, b, get_ticket)] == ["a", "b", "get_ticket"]
    assert function_tool(plain_lookup, read_only=True).read_only


async def test_the_decorated_function_is_still_the_function() -> None:
    assert get_ticket(5) == {"id": 5, "comments": None}
    assert get_ticket(5, include_comments=True) == {"id": 5, "comments": []}
    assert get_ticket.__wrapped__.__name__ == "get_ticket"
    assert get_ticket.__name__ == "get_ticket"
    assert get_ticket.__doc__ is not None and get_ticket.__doc__.startswith("Fetch a ticket")
    assert list(inspect.signature(get_ticket).parameters) == ["ticket_id", "include_comments"]

    @tool
    async def double(x: int) -> int:
        """Double."""
        return 2 * x

    assert await double(4) == 8  # no validation when called directly: it is the function


# ---- references ------------------------------------------------------------------------

def test_ref_of_a_module_level_function_resolves_back_to_it() -> None:
    for made, target in ((get_ticket, get_ticket), (function_tool(plain_lookup), plain_lookup)):
        module_name, _, qualname = made.ref.partition(":")  # type: ignore[union-attr]
        assert module_name == __name__
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        assert obj is target


def test_ref_of_nested_functions_lambdas_and_main(monkeypatch: pytest.MonkeyPatch) -> None:
    @tool
    def nested() -> str:
        """Nested."""
        return ""

    assert nested.ref is None
    assert function_tool(lambda: "x", name="anon").ref is None

    def in_main() -> str:
        """Pretend this was defined in the program that started the run."""
        return ""

    in_main.__module__, in_main.__qualname__ = "__main__", "in_main"
    made = function_tool(in_main)
    assert made.ref is None  # not bound in __main__ yet
    monkeypatch.setattr(sys.modules["__main__"], "in_main", made, raising=False)
    assert made.ref == "__main__:in_main"
    assert made.source == "__main__"


def test_an_agent_keeps_the_ref_of_a_function_tool() -> None:
    from tether.agents.agent import as_tool

    @tool
    def local() -> str:
        """Local."""
        return ""

    # Not "the FunctionTool class": a tool that cannot be rebuilt says so with None.
    assert as_tool(local).ref is None
    assert as_tool(get_ticket).ref == f"{__name__}:get_ticket"
    assert as_tool(plain_lookup).ref == f"{__name__}:plain_lookup"
    explicit = function_tool(plain_lookup)
    explicit.ref = "elsewhere:lookup"
    assert as_tool(explicit).ref == "elsewhere:lookup"


# ---- what cannot become a tool -----------------------------------------------------------

class Connection:
    """Not something a model can send."""


class CallableThing:
    def __call__(self, x: int) -> int:
        return x


def _two_contexts(a: ToolContext, b: ToolContext) -> str:
    return ""


def _yields(n: int):  # type: ignore[no-untyped-def]
    yield n


def _needs_connection(conn: Connection, n: int) -> str:
    return ""


def _unresolvable(n: "NoSuchType") -> str:  # type: ignore[name-defined]  # noqa: F821
    return ""


@pytest.mark.parametrize(("target", "words"), [
    (42, "a tool is made from a function (def or async def), got int 42"),
    (CallableThing(), "a tool is made from a function (def or async def), got CallableThing"),
    (Connection, "Connection is a class, not a function"),
    (get_ticket, "get_ticket is already a tool; to change its options, wrap its function"),
    (_yields, "_yields yields values, but a tool returns one result"),
    (_two_contexts, "_two_contexts takes 2 ToolContext parameters (a, b)"),
    (lambda: 1, "a lambda has no name for the model to call it by: pass name=..."),
    (_needs_connection, "parameter 'conn' of _needs_connection has a type the model cannot send (Connection"),
    (_unresolvable, "cannot resolve the annotation 'NoSuchType' of parameter 'n' of _unresolvable"),
])
def test_decoration_errors_are_worded(target: Any, words: str) -> None:
    with pytest.raises(TypeError) as raised:
        function_tool(target)
    assert words in str(raised.value)


def test_decoration_errors_for_misused_options() -> None:
    with pytest.raises(TypeError, match=r"write @tool\(name='lookup'\)"):
        tool("lookup")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="'has space' cannot be a tool name"):
        tool(name="has space")(plain_lookup)
