"""Asking a tool for its preview of a call, within bounds: the loop does it once, when the
call starts waiting for a decision.

What a preview is, and the bounds on its size, are the approvals' (:mod:`tether.vocab.preview`);
this is the tools' side: the call of :meth:`tether.agents.tools.base.Tool.preview` (a sync one in a
worker thread, so a slow disk does not freeze the console), cut short after :data:`TIMEOUT`
seconds, and anything it raises turned into a ``failed`` preview in words, so the decision goes
on without it. (A sync preview that never returns keeps its worker thread: Python cannot stop a
thread.)
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tether.agents.tools.base import Tool, ToolContext
from tether.agents.tool_errors import ToolError
from tether.vocab.preview import Preview, bounded, failed

if TYPE_CHECKING:
    from tether.agents.workspace import Workspace

TIMEOUT = 2.0
"""Seconds a preview may take before it is shown as failed."""
_WORDS_CHARS = 300  # an exception's message, as much as a failed preview repeats


async def preview_call(tool: Tool, args: Mapping[str, Any], where: Workspace | ToolContext | None, *,
                       timeout: float = TIMEOUT) -> Preview | None:
    """What calling ``tool`` with ``args`` would change, or None when the tool declares no
    preview (or its preview has nothing to say). ``where`` is the run's workspace (or a
    call's context, whose workspace is used; None: the agent has no folder).

    Never raises for the preview's sake and never waits more than ``timeout`` seconds: a
    preview that fails is a :class:`Preview` of kind ``failed`` with the words why. Only
    the caller's own cancellation (a Stop) goes through.
    """
    if type(tool).preview is Tool.preview:
        return None
    workspace = where.workspace if isinstance(where, ToolContext) else where
    title = tool.name
    try:
        async with asyncio.timeout(timeout):
            problem = tool.check_args(dict(args))
            if problem is not None:
                return failed(title, problem)
            result = await _run(tool, copy.deepcopy(dict(args)), workspace)
    except TimeoutError:
        return failed(title, f"no answer within {timeout:g} s")
    except ToolError as exc:  # the tool's own words: a refused path, a missing argument
        return failed(title, _words(exc, named=False))
    except Exception as exc:
        return failed(title, _words(exc, named=True))
    if result is None:
        return None
    if isinstance(result, Preview):
        return bounded(result)
    if isinstance(result, str):
        return bounded(Preview("diff" if _is_diff(result) else "summary", title, result))
    return failed(title, f"the preview returned {type(result).__name__}, not text or a Preview")


async def _run(tool: Tool, args: dict[str, Any], workspace: Workspace | None) -> object:
    """Call the preview: an async one on the event loop, a sync one in a worker thread (it
    may read files), and await what a sync wrapper of an async function returns."""
    method = tool.preview
    if inspect.iscoroutinefunction(method):
        result: object = await method(args, workspace)
    else:
        result = await asyncio.to_thread(method, args, workspace)
    if inspect.isawaitable(result):
        result = await result
    return result


def _words(exc: BaseException, *, named: bool) -> str:
    text = " ".join(str(exc).split())[:_WORDS_CHARS]
    if not named:
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_diff(text: str) -> bool:
    """A preview's text that reads as a unified diff (``--- a`` then ``+++ b``)."""
    return text.startswith("--- ") and "\n+++ " in text
