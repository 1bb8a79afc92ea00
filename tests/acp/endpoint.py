"""The scripted chat-completions endpoint the real ACP agents (OpenCode, Qwen Code) run against
in the tests: ``tether.demo.provider.coding``'s, which ``tether demo --acp`` uses too.

The script, read from the last user message:
- ``WRITE <path> CONTENT <text>``: call the agent's write tool once, then answer ``DONE_ANSWER``;
- ``HOLD``: stream a few words, then hold the stream until the client goes away;
- a rejection's words: an answer to them;
- anything else: answer ``PLAIN_ANSWER``.
A request without tools (a title or summary call) is answered with ``TITLE_ANSWER``.
"""

from __future__ import annotations

from tether.demo.provider.coding import (DONE_ANSWER, HOLD_WORDS, PLAIN_ANSWER, TITLE_ANSWER, USAGE, WRITE_TOOLS,
                                    ScriptedEndpoint)

__all__ = ["DONE_ANSWER", "HOLD_WORDS", "PLAIN_ANSWER", "TITLE_ANSWER", "USAGE", "WRITE_TOOLS", "ScriptedEndpoint"]
