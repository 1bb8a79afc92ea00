"""Tool arguments against schemas: what the model sends for a call, as the loop reads it
(``RunLoop._parse_args``: the raw arguments string, then ``Tool.check_args``), for the
built-in tools (jsonschema) and for function tools (one pydantic model gives the schema and
the check, :mod:`tether.agents.tools.function`).

The rule: any arguments are a call the tool can take, or an error in words for the model; a
function tool runs with whatever its check accepted (the check and the call never disagree),
and arguments valid under the schema it shows the model are accepted; a built-in tool given
accepted arguments answers, or fails with a :class:`ToolError` in words."""

from __future__ import annotations

import asyncio
import enum
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from hypothesis import given, strategies as st
from pydantic import BaseModel, Field

from tether.vocab.cancel import CancelSignal
from tether.run.loop import RunLoop
from tether.agents.tool_errors import ToolError
from tether.agents.tools.base import ToolContext
from tether.agents.tools.builtin import DeleteFile, ListFiles, ReadFile, WriteFile
from tether.agents.tools.function import FunctionTool, tool
from tether.agents.workspace import Workspace

from tests.fuzz.strategies import dumps, garbage_lines, json_values, objects_with, texts


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    number: int = 1


@dataclass
class Point:
    x: float
    y: float


@tool
def plain(n: int, name: str, ratio: float = 0.5, flag: bool = False) -> str:
    """Plain scalars."""
    return "ok"


@tool
def structured(colour: Colour, where: Address, points: list[Point], tags: dict[str, int] | None = None,
               mode: Literal["a", "b"] = "a") -> str:
    """Enums, models, dataclasses, containers, literals."""
    return "ok"


@tool
def bounded(count: Annotated[int, Field(ge=0, le=10)], word: Annotated[str, Field(max_length=5)] = "x",
            *more: int, **extra: str) -> str:
    """Constraints, *args and **kwargs."""
    return "ok"


@tool
def nothing() -> str:
    """No arguments."""
    return "ok"


FUNCTION_TOOLS: list[FunctionTool] = [plain, structured, bounded, nothing]
BUILTINS = [ListFiles(), ReadFile(), WriteFile(), DeleteFile()]
TOOLS = {t.name: t for t in [*FUNCTION_TOOLS, *BUILTINS]}
NAMES = sorted({name for t in TOOLS.values() for name in t.parameters.get("properties", {})} | {"path", "content"})

arguments = st.one_of(json_values, objects_with({name: json_values for name in NAMES}))


def parse(name: str, raw: Any) -> tuple[dict[str, Any], str | None]:
    """``RunLoop._parse_args`` as the loop calls it, with the tools of this module."""
    return RunLoop._parse_args(SimpleNamespace(env=SimpleNamespace(tools=TOOLS)), name, raw)  # type: ignore[arg-type]


def context(workspace: Path | None = None) -> ToolContext:
    return ToolContext(run_id="fuzz", call_id="c", signal=CancelSignal(), progress=lambda _: None,
                       workspace=Workspace(workspace) if workspace is not None else None,
                       ledger=None)  # type: ignore[arg-type]  # no tool here writes


@given(st.sampled_from(sorted(TOOLS)), st.one_of(arguments.map(dumps), garbage_lines, arguments))
def test_any_arguments_are_a_call_or_an_error_in_words(name: str, raw: Any) -> None:
    """Raw bytes are what a provider's JSON could hold, decoded as the client does."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    args, problem = parse(name, raw)
    if problem is None:
        assert isinstance(args, dict)
    else:
        assert isinstance(problem, str) and problem.startswith("Error: ") and args == {}


@given(st.sampled_from(FUNCTION_TOOLS), arguments)
def test_a_function_tool_runs_with_what_its_check_accepts(fn: FunctionTool, args: Any) -> None:
    problem = fn.check_args(args)
    if problem is None:
        positional, keywords = fn._bind(args, context())  # no InvalidArguments: the check and the call agree
        assert isinstance(positional, list) and isinstance(keywords, dict)
    else:
        assert problem.startswith(f"invalid arguments for {fn.name}")


@given(st.sampled_from(FUNCTION_TOOLS), st.data())
def test_arguments_valid_under_the_shown_schema_are_accepted(fn: FunctionTool, data: st.DataObject) -> None:
    """What the schema the model reads promises, the check accepts (the module's promise)."""
    args = data.draw(instances(fn.parameters, fn.parameters), label="args")
    jsonschema.validate(args, fn.parameters)  # the generator's own check
    assert fn.check_args(args) is None


def instances(schema: dict[str, Any], root: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under the small JSON schemas pydantic writes for the tools above."""
    if "$ref" in schema:
        return instances(root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root)
    if "anyOf" in schema:
        return st.one_of([instances(s, root) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        extra = schema.get("additionalProperties", True)
        fixed = st.fixed_dictionaries({k: instances(v, root) for k, v in props.items() if k in required},
                                      optional={k: instances(v, root) for k, v in props.items() if k not in required})
        if isinstance(extra, dict):
            return st.tuples(fixed, st.dictionaries(texts.filter(lambda k: k not in props), instances(extra, root),
                                                    max_size=2)).map(lambda t: {**t[1], **t[0]})
        return fixed
    if kind == "array":
        return st.lists(instances(schema.get("items", {}), root), max_size=3)
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**40)), schema.get("maximum", 2**40))
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)
    if kind == "string":
        return st.text(max_size=schema.get("maxLength", 20))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return json_values


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    (root / "notes.txt").write_text("hello\n")
    (root / "sub").mkdir()
    (root / "sub" / "deep.log").write_bytes(b"\xff\xfe binary")
    return root


@given(st.sampled_from([ListFiles(), ReadFile()]),
       objects_with({"path": st.one_of(st.sampled_from(["notes.txt", "sub", "sub/deep.log", "../x", "/etc/passwd",
                                                         "", ".", "a\x00b", "~", "notes.txt/", "sub/../notes.txt"]),
                                       texts)}))
def test_a_read_tool_given_accepted_arguments_answers_or_fails_in_words(workspace: Path, read: Any,
                                                                        args: dict[str, Any]) -> None:
    if read.check_args(args) is not None:
        return
    try:
        text = asyncio.run(read.run(args, context(workspace)))
    except ToolError as exc:
        assert str(exc)
    else:
        assert isinstance(text, str)


# ---- what the properties pin down ------------------------------------------------------------

@pytest.mark.parametrize("raw", ['{"n": 1e999, "name": "x"}',
                                 '{"n": ' + "9" * 5000 + ', "name": "x"}',  # ValueError without .msg: AttributeError
                                 "[" * 5_000 + "]" * 5_000],  # RecursionError
                         ids=["infinite", "too-many-digits", "deep"])
def test_found_arguments_are_errors_in_words(raw: str) -> None:
    _, problem = parse("plain", raw)
    assert problem is not None
    assert problem.startswith("Error: the arguments for plain") or "invalid arguments" in problem


@pytest.mark.parametrize("raw", ['{"path": ' + "1" * 5000 + "}", "[" * 5_000 + "]" * 5_000], ids=["digits", "deep"])
def test_found_edited_arguments_are_refused_in_words(raw: str) -> None:
    from tether.approvals.decisions import check_edit
    from tether.vocab.state import NeedsApproval, RunState, Status

    call = {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    state = RunState(run_id="r", model="m", status=Status.INTERRUPTED,
                     messages=[{"role": "assistant", "content": None, "tool_calls": [call]}])
    state.interruption = NeedsApproval("c", "read_file", "{}", "why")
    words = check_edit(TOOLS, state, "c", raw)
    assert words is not None and words.startswith("the edited arguments are not JSON")
