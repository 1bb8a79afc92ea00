"""What outside input looks like, for every parser in the campaign: JSON of every shape,
garbage lines, torn lines, and the nesting that trips a recursive decoder."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# Integers beyond a float (float(10**400) raises OverflowError), beyond an int64, and small.
integers = st.one_of(st.integers(-10, 10), st.integers(-(2**70), 2**70), st.sampled_from([10**400, -(10**400)]))
floats = st.floats(allow_nan=True, allow_infinity=True)
texts = st.text(max_size=40)
scalars = st.one_of(st.none(), st.booleans(), integers, floats, texts)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)


def dumps(value: Any) -> bytes:
    """JSON as a parser meets it (NaN and Infinity included: Python's json reads them)."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def deep(depth: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    """A JSON document nested ``depth`` deep: Python's json raises RecursionError on it (not
    ValueError) once the depth passes the interpreter's recursion limit."""
    return opener * depth + closer * depth


deep_json = st.one_of(
    st.integers(1_000, 20_000).map(deep),
    st.integers(1_000, 20_000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    st.integers(1_000, 20_000).map(lambda n: b"[" * n),  # torn as well as deep
)

# One line of garbage (no newline in it): bytes, text, JSON of any shape, or too deep.
garbage_lines = st.one_of(
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),
    texts.map(lambda t: t.replace("\n", "").encode("utf-8", "surrogatepass")),
    json_values.map(dumps),
    deep_json,
)


def objects_with(keys: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object that has some of ``keys`` (each with its strategy, or any JSON value),
    and maybe other keys: how a parser meets a message that is almost right."""
    return st.fixed_dictionaries({}, optional={k: st.one_of(v, json_values) for k, v in keys.items()}).flatmap(
        lambda d: st.dictionaries(texts, json_values, max_size=2).map(lambda extra: {**extra, **d}))


def examples(n: int) -> Any:
    """``max_examples=n`` for a slow property in ``make test`` (the default profile); the
    fuzzing profile's own number otherwise."""
    import os

    from hypothesis import settings

    if os.environ.get("TETHER_HYPOTHESIS_PROFILE", "tether") != "tether":
        return lambda test: test
    return settings(max_examples=n)
