"""Parameter descriptions from a function's docstring, for a tool's JSON schema: Google
(``Args:``), Sphinx (``:param x:``) and NumPy (``Parameters`` / ``----------``) styles,
because that is where Python programmers already write them. What comes before the first
section is the tool's description; sections other than the parameters' are left out.
"""

from __future__ import annotations

import inspect
import re

_GOOGLE_PARAM_SECTIONS = frozenset({
    "args", "arguments", "parameters", "params", "keyword args", "keyword arguments",
    "kwargs", "other parameters",
})
_GOOGLE_SECTIONS = _GOOGLE_PARAM_SECTIONS | {
    "attributes", "example", "examples", "methods", "note", "notes", "raise", "raises",
    "references", "return", "returns", "see also", "todo", "warning", "warnings", "warns",
    "yield", "yields",
}
_NUMPY_PARAM_SECTIONS = frozenset({"parameters", "other parameters"})
_NUMPY_SECTIONS = _NUMPY_PARAM_SECTIONS | {
    "attributes", "examples", "methods", "notes", "raises", "receives", "references",
    "returns", "see also", "warnings", "warns", "yields",
}
_SPHINX_PARAM_FIELDS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})
_GOOGLE_HEADER = re.compile(r"([A-Za-z][A-Za-z ]*):\s*")
_GOOGLE_ENTRY = re.compile(r"(\*{0,2}[A-Za-z_]\w*)\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*:\s*(.*)")
_SPHINX_FIELD = re.compile(r":(\w+)([^:]*):(.*)")
_UNDERLINE = re.compile(r"-{3,}\s*")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (everything before the first section) and each documented parameter's
    description, from a Google, Sphinx or NumPy style docstring.

    Sections are recognised at the left margin (after :func:`inspect.cleandoc`): a known
    Google header (``Args:``), a known NumPy header underlined with dashes, or a Sphinx
    field (``:param x:``). Descriptions are joined into one line; ``*args`` documents ``args``.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    summary_end = len(lines)
    i = 0
    while i < len(lines):
        line = lines[i]
        header = line.strip().lower()
        at_margin = bool(line) and not line[0].isspace()
        if at_margin and _is_numpy_header(lines, i):
            end = next((j for j in range(i + 2, len(lines)) if _is_numpy_header(lines, j)), len(lines))
            if header in _NUMPY_PARAM_SECTIONS:
                params.update(_numpy_params(lines[i + 2:end]))
        elif at_margin and _GOOGLE_HEADER.fullmatch(line) and header.rstrip(":").strip() in _GOOGLE_SECTIONS:
            end = _block_end(lines, i)
            if header.rstrip(":").strip() in _GOOGLE_PARAM_SECTIONS:
                params.update(_google_params(lines[i + 1:end]))
        elif at_margin and (field := _SPHINX_FIELD.fullmatch(line)):
            end = _block_end(lines, i)
            words = field.group(2).split()
            if field.group(1) in _SPHINX_PARAM_FIELDS and words:
                more = [field.group(3), *lines[i + 1:end]]
                params[words[-1].lstrip("*")] = _join(more)
        else:
            i += 1
            continue
        summary_end = min(summary_end, i)
        i = end
    return inspect.cleandoc("\n".join(lines[:summary_end])), params


def _is_numpy_header(lines: list[str], i: int) -> bool:
    return (i + 1 < len(lines) and lines[i].strip().lower() in _NUMPY_SECTIONS
            and bool(_UNDERLINE.fullmatch(lines[i + 1])))


def _block_end(lines: list[str], start: int) -> int:
    """The first line after ``start`` back at the left margin (the block is indented)."""
    return next((j for j in range(start + 1, len(lines)) if lines[j] and not lines[j][0].isspace()),
                len(lines))


def _google_params(block: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    indent: int | None = None
    current: list[str] | None = None
    for line in block:
        text = line.strip()
        if not text:
            continue
        depth = len(line) - len(line.lstrip())
        indent = depth if indent is None else indent
        entry = _GOOGLE_ENTRY.fullmatch(text) if depth <= indent else None
        if entry:
            current = entries[entry.group(1).lstrip("*")] = [entry.group(2)]
        elif current is not None:
            current.append(text)
    return {name: _join(parts) for name, parts in entries.items()}


def _numpy_params(block: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in block:
        if not line.strip():
            continue
        if not line[0].isspace():  # "name : type" or "x, y : int"
            current = []
            for name in line.split(":", 1)[0].split(","):
                name = name.strip().lstrip("*")
                if name.isidentifier():
                    entries[name] = current
        elif current is not None:
            current.append(line.strip())
    return {name: _join(parts) for name, parts in entries.items()}


def _join(parts: list[str]) -> str:
    return " ".join(part.strip() for part in parts if part.strip())
