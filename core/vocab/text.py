"""Untrusted text made safe to show on a terminal.

Model output, tool output, file contents and error messages can hold escape sequences
(clear the screen, write the clipboard with OSC 52), bidi overrides and other controls.
Printed raw, they act on the operator's terminal; :func:`clean` replaces them with
visible stand-ins. The CLI and the console both show run data through it.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls except \n and \t, DEL, and C1 controls; plus the bidi overrides and isolates
# that can make displayed text read differently from what it is.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code < 0x20:
        return chr(0x2400 + code)  # ␛ ␍ ␇ …
    if code == 0x7F:
        return "\u2421"  # ␡
    return "\ufffd"


def clean(value: Any, *, keep_newlines: bool = True) -> str:
    """``value`` as display-safe text: control characters made visible, tabs expanded."""
    text = value if isinstance(value, str) else str(value)
    text = text.replace("\r\n", "\n").expandtabs(4)
    text = _CONTROL.sub(_picture, text)
    if not keep_newlines:
        text = text.replace("\n", "⏎ ")
    return text


def json_words(exc: BaseException) -> str:
    """Why ``json.loads`` refused a text, in words: where it broke, or what it could not take
    (an integer of more than 4,300 digits, arrays or objects nested deeper than Python's stack)."""
    if isinstance(exc, RecursionError):
        return "arrays or objects nested too deep"
    msg, line, column = getattr(exc, "msg", None), getattr(exc, "lineno", None), getattr(exc, "colno", None)
    # Line and column, not the character's position: what an editor shows, and what a person
    # counts in a text of several lines.
    return f"{msg} at line {line}, column {column}" if None not in (msg, line, column) else str(exc)
