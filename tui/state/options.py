"""What a console is asked to be: one typed, frozen options object for :class:`~tether.tui.app.TetherApp`.

The console used to take about nineteen keywords. They are of two kinds, and this object
says which is which: how to build the harness the console drives its runs with (the
store, the model endpoint, the scripted provider), read only when no harness is handed in,
and how the console behaves (who it records decisions as, what it starts, whether it
follows the store). A harness handed to :class:`~tether.tui.app.TetherApp` is a dependency,
not an option, so it is not here (as httpx takes a transport beside its config objects).

Frozen, so that what the console was asked for stays what it was asked for: the app keeps
it as ``app.options`` and derives what it computes (the operator's name, the agent file)
beside it. Sequences are kept as tuples for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING


GRACE_S = 0.4  # seconds a decision dialog ignores Enter after it opens: a stray Enter approves nothing

if TYPE_CHECKING:
    from tether.agents.config import Config
    from tether.agents.sets import AgentSet
    from tether.store.protocol import Store


@dataclass(frozen=True)
class ConsoleOptions:
    """The console's options, each with the default ``tether console`` uses."""

    # ---- the harness the console builds (not read when one is handed in) -------------------
    runs_dir: Path | str | None = None
    """The file store's directory (default: the harness's, ``./runs``). Ignored with ``store``."""

    store: Store | None = None
    """The run store to supervise (a :class:`tether.store.postgres.store.PgStore`, say; default:
    the file store at ``runs_dir``). The console closes it when it ends: it was opened for it."""

    workspace: Path | str | None = None
    """The directory the runs' file tools act on, and the one a model at ``base_url`` is given
    by the New run dialog (default: the current directory, as ``tether run --base-url`` does)."""

    base_url: str | None = None
    """A chat-completions endpoint: runs go there instead of to the scripted provider, and the
    New run dialog offers "a model at this endpoint" instead of the demo scenarios."""

    api_key: str | None = None
    """The key for ``base_url`` (``LLM_API_KEY``): the console's, for every run it makes there."""

    agent_sets: tuple[AgentSet, ...] = ()
    """The named agents the harness is given (:class:`tether.agents.sets.AgentSet`), which the
    New run dialog offers when there is no ``base_url``: the CLI gives the demo's scenarios,
    the console knows no set of its own."""

    provider_url: str | None = None
    """Where the endpoint the agent sets offer is served by a child process (the CLI serves
    the demo's scripted provider there, as ``tether`` does). Without it and without
    ``base_url`` the sets' endpoint runs in this process, and long runs slow the screen."""

    latency_ms: float = 0.0
    """The sets' in-process endpoint's delay per answer (the scripted provider's): the tour and
    the pictures use it to show a run visibly running."""

    stream: bool | str = "auto"
    """Ask the model for streamed replies (``"auto"``: when the endpoint offers them), so the
    transcript shows a reply growing; ``tether console --no-stream`` turns it off."""

    otlp: str | None = None
    """Export the console's own runs' spans there, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` does; the
    exporter is imported only when this or that variable asks for it."""

    config: Config | None = None
    """The agent file, whose agents the New run dialog offers (default: the harness's)."""

    # ---- the console itself ---------------------------------------------------------------
    model: str | None = None
    """The model name the New run dialog proposes at ``base_url`` (``--model``, ``LLM_MODEL``)."""

    agent: str | None = None
    """The agent the New run dialog preselects: an agent of the file, or of an agent set."""

    start: tuple[str, ...] = ()
    """Runs to start when the console opens: agents of the sets (demo scenarios), or, at
    ``base_url``, tasks for ``model``; the first one started is selected."""

    operator: str | None = None
    """Who the console's Stops and decisions are recorded as (``--as NAME``; default:
    :func:`tether.store.control.operator_name`, ``user@host``)."""

    timings: bool = True
    """Show durations and times of day. Off, nothing on screen depends on the clock, which is
    what the snapshot tests and the README's pictures need."""

    grace_s: float = GRACE_S
    """How long the decision dialogs ignore Enter after they open, so a key meant for the list
    does not approve a call the operator has not read (0 in the scenes)."""

    watch: bool = True
    """Follow the store: other processes' runs, live. Off, the console lists the runs once and
    sees only its own runs' events (the benchmarks that measure the console alone)."""

    notes: tuple[str, ...] = ()
    """Said on screen at start-up (why the provider runs inside the console, say)."""

    def __post_init__(self) -> None:
        # A list handed in (``start=["plan"]``) is kept as a tuple: frozen means frozen.
        object.__setattr__(self, "start", tuple(self.start))
        object.__setattr__(self, "agent_sets", tuple(self.agent_sets))
        object.__setattr__(self, "notes", tuple(self.notes))
