"""The cost meter: turns against the cap, tokens, dollars against the budget, and the
per-turn prompt tokens as a sparkline, so a runaway's quadratic growth is visible."""

from __future__ import annotations

import time
from typing import Any

from rich.progress_bar import ProgressBar as Bar
from rich.text import Text
from textual.app import ComposeResult
from textual.cache import LRUCache
from textual.containers import Horizontal, Vertical
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widgets import Sparkline, Static

from tether.vocab.state import RunState
from tether.tui.state.text import money
from tether.vocab.wording import overshoot


def numbers(state: RunState, speed: tuple[float | None, float | None] | None = None) -> Text:
    """Two lines: turns, tokens and dollars; then the tree cost or the budget overshoot, what
    the dollars rest on (an assumed price, tokens Tether counted itself), and the last
    streamed turn's time to first token and output rate (``speed``)."""
    limits = state.limits
    cap = "no cap" if limits.max_turns is None else f"{limits.max_turns}"
    unreported = unreported_turns(state)
    nothing = unreported is not None and unreported >= state.turns > 0  # an ACP agent that reported no usage
    out = Text()
    out.append("turns ", style="dim")
    out.append(f"{state.turns}", style="bold")
    out.append(f" / {cap}", style="dim")
    if nothing:
        out.append("   tokens ", style="dim")
        out.append("–", style="bold")
        out.append("   cost ", style="dim")
        out.append("usage not reported", style="bold yellow")
    else:
        out.append("   in ", style="dim")
        out.append(f"{state.prompt_tokens:,}", style="bold")
        out.append("  out ", style="dim")
        out.append(f"{state.completion_tokens:,}", style="bold")
        out.append(" tokens", style="dim")
        out.append("   cost ", style="dim")
        out.append(money(state.cost_usd), style="bold")
    if limits.budget_usd is not None:
        out.append(f" of {money(limits.budget_usd)} ({limits.budget_mode})", style="dim")
    else:
        out.append("  no budget", style="dim")
    out.append("\n")
    if state.child_cost_usd or state.children:
        out.append("tree ", style="dim")
        out.append(money(state.cost_usd), style="bold")
        out.append(f" = own {money(state.own_cost_usd)} + subagents {money(state.child_cost_usd)}  ", style="dim")
    if limits.budget_usd is not None and state.cost_usd > limits.budget_usd:
        out.append(f"{overshoot(state.cost_usd, limits.budget_usd)}: a soft budget is checked before each "
                   "turn, so spend can pass it by at most one turn's cost  ", style="yellow")
    if state.pricing.assumed and not nothing and (unreported is None or state.prompt_tokens or state.completion_tokens):
        out.append(f"assumed price (${state.pricing.input_per_million:g} / ${state.pricing.output_per_million:g} "
                   "per M)  ", style="yellow")
    if nothing:
        n = state.turns
        out.append(f"the agent reported no tokens or cost for {n} turn{'s' if n > 1 else ''}: "
                   + ("its budget cannot be checked  " if limits.budget_usd is not None
                      else "what it spent is unknown  "), style="yellow")
    elif unreported:
        out.append(f"usage not reported for {unreported} of {state.turns} turns: they count nothing here  ",
                   style="yellow")
    elif unreported is None and state.estimated_turns:
        n = len(state.estimated_turns)
        out.append(f"usage not reported for {n} turn{'s' if n > 1 else ''}: counted by Tether  ", style="yellow")
    ttft, rate = speed or (None, None)
    if ttft is not None:
        out.append("first token ", style="dim")
        out.append(f"{ttft:,.0f} ms", style="bold")
        if rate is not None:
            out.append("  ", style="dim")
            out.append(f"{rate:,.0f} tok/s", style="bold")
    return out


def unreported_turns(state: RunState) -> int | None:
    """For a run of an ACP agent, how many of its turns had no usage reported by the agent
    (Tether counts nothing for those: the agent made its own model calls); None for a run
    of Tether's own loop, whose unreported turns Tether counted itself."""
    ref = state.agent
    if ref is None or not (ref.spec or {}).get("acp"):
        return None
    return len(state.estimated_turns)


def spark_caption(per_turn: list[int], unreported: int | None = None) -> Text:
    """``unreported``: for an ACP run, its turns without usage (its agent keeps its own
    context, so nothing is said of resending the transcript)."""
    out = Text("prompt tokens per turn", style="dim")
    if unreported is not None and per_turn and unreported >= len(per_turn) and not any(per_turn):
        out.append(": not reported by the agent", style="dim")
        return out
    if per_turn:
        out.append(f"  {per_turn[0]:,} → {per_turn[-1]:,}", style="bold")
        out.append(f"  (max {max(per_turn):,}" + ("; each turn resends the transcript)" if unreported is None else ")"),
                   style="dim")
    return out


class TurnsSparkline(Sparkline):
    """Textual's sparkline, keeping the drawings it made for the last few runs shown.

    Drawing it is the costliest part of showing another run under a flood of events (a Rich
    style per bar, blended colours), and a finished run's
    drawing never changes. A drawing is kept by everything it is made from: the data, the
    size, the colours and the style.
    """

    DRAWINGS_KEPT = 8

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._drawings: LRUCache[tuple[Any, ...], list[Strip]] = LRUCache(self.DRAWINGS_KEPT)
        self._drawing: list[Strip] = []

    def render_lines(self, crop: Region) -> list[Strip]:
        renderable = self.render()
        width, height = self.size
        key = (tuple(self.data or ()), width, height, renderable.min_color, renderable.max_color,
               self.visual_style)
        drawing = self._drawings.get(key)
        if drawing is None:
            visual = visualize(self, renderable, markup=False)
            drawing = self._drawings[key] = Visual.to_strips(self, visual, width, height, self.visual_style)
        self._drawing = drawing
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        if y < len(self._drawing):
            return self._drawing[y]
        return Strip.blank(self.size.width, self.visual_style.rich_style)


class CostMeter(Vertical):
    BORDER_TITLE = "Cost"

    def compose(self) -> ComposeResult:
        yield Static(id="cost-numbers")
        with Horizontal(id="budget-row"):
            yield Static(Text("budget ", style="dim"), id="budget-label")
            yield Static(id="budget-bar")
            yield Static(id="budget-pct")
        yield Static(id="spark-caption")
        yield TurnsSparkline([], summary_function=max, id="spark")

    SPARK_INTERVAL_S = 0.25  # a live run's sparkline is redrawn at most this often

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._shown: dict[str, Any] = {}
        self._spark_key: tuple[Any, ...] = ()
        self._spark_at = 0.0

    def _put(self, widget_id: str, content: Any) -> None:
        """Update a part only when its content changed (every update repaints it)."""
        if self._shown.get(widget_id) != content:
            self._shown[widget_id] = content
            self.query_one(f"#{widget_id}", Static).update(content, layout=False)  # fixed sizes

    def show(self, state: RunState | None, *, run_id: str | None = None,
             speed: tuple[float | None, float | None] | None = None) -> None:
        spark = self.query_one("#spark", TurnsSparkline)
        if state is None:
            self._put("cost-numbers", Text("no run selected", style="dim"))
            self._shown.pop("budget-bar-key", None)
            self._put("budget-bar", "")
            self._put("budget-pct", "")
            self._put("spark-caption", "")
            spark.data = []
            self._spark_key = ()
            return
        self._put("cost-numbers", numbers(state, speed))
        budget = state.limits.budget_usd
        if not budget:
            self._shown.pop("budget-bar-key", None)  # the bar is gone: redraw it when it comes back
            self._put("budget-bar", Text("no budget: only the turn cap bounds this run", style="dim"))
            self._put("budget-pct", "")
        else:
            spent = state.cost_usd / budget
            key = ("bar", round(min(spent, 1.0), 3))
            if self._shown.get("budget-bar-key") != key:
                self._shown["budget-bar-key"] = key
                self.query_one("#budget-bar", Static).update(
                    Bar(total=1.0, completed=min(spent, 1.0), style="grey23",
                        complete_style="green" if spent < 0.8 else "yellow", finished_style="red"),
                    layout=False)
                self._shown.pop("budget-bar", None)
            self._put("budget-pct", Text(f" {spent:.0%}", style="bold"))
        per_turn = state.per_turn_prompt_tokens
        self._put("spark-caption", spark_caption(per_turn, unreported_turns(state)))
        # Redrawing the sparkline is the meter's costliest part: for a live run do it a few
        # times a second, at once when another run is shown or the run stopped.
        key = (run_id or state.run_id, len(per_turn), state.status)
        now = time.monotonic()
        other_run = not self._spark_key or key[0] != self._spark_key[0]
        other_status = key[2:] != self._spark_key[2:]
        due = now - self._spark_at >= self.SPARK_INTERVAL_S
        if key != self._spark_key and (other_run or other_status or due):
            self._spark_key, self._spark_at = key, now
            spark.data = list(per_turn) if len(per_turn) >= 2 else []  # one bar says nothing about growth
