"""Errors of an ACP session, each worded for an operator: the harness ends a run with ``str(exc)``
and the CLI prints it as the one line of a bad agent entry."""

from __future__ import annotations


class AcpError(Exception):
    """Anything that ends an ACP session abnormally, said in words."""


class AgentStartError(AcpError):
    """The agent could not be started or did not answer ``initialize`` like an ACP agent
    (a missing command, a program that is not an agent, a timeout)."""


class AgentDied(AcpError):
    """The agent process ended while Tether still needed it (mid-turn, or during setup)."""

    def __init__(self, message: str, returncode: int | None, stderr_tail: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class AgentProtocolError(AcpError):
    """The agent broke the protocol so badly the session cannot go on (a run of bad frames, an
    answer whose fields are not ACP's)."""


def exit_words(returncode: int | None) -> str:
    """``exited with status 3`` / ``was killed by signal 9`` / ``is gone``."""
    if returncode is None:
        return "is gone"
    if returncode < 0:
        return f"was killed by signal {-returncode}"
    if returncode > 128 and returncode - 128 < 65:  # through the launcher: 128 + N for signal N
        return f"was killed by signal {returncode - 128} (status {returncode})"
    return f"exited with status {returncode}"
