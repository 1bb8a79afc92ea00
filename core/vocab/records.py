"""Dataclasses as plain dicts, for the journal and the trace.

``dataclasses.fields`` rebuilds its tuple on every call; a save and every event
would pay that for each record, so the names are read once per class.
"""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any


@functools.cache
def field_names(cls: type) -> tuple[str, ...]:
    """The field names of the dataclass ``cls``, in declaration order."""
    return tuple(f.name for f in fields(cls))


def plain(obj: Any) -> dict[str, Any]:
    """A dataclass instance's fields as a dict (one level: values are not converted)."""
    return {name: getattr(obj, name) for name in field_names(type(obj))}
