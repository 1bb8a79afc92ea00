"""What the fleet cost, as a screen (``$``; issue 41's pictures): spend per day over the last
30 days as vertical bars, spend by agent and by model as horizontal bars, each group's runs and
dearest run, the ten dearest runs (``Store.dearest``), and the fleet budgets' state. Enter on a
dearest run, or on an agent's or a model's row (its dearest run), closes the screen and selects
that run.

The screen asks its ``load`` for the figures (``Store.costs``: one aggregate query per group,
off the event loop for a store that blocks) when it mounts and on F5. The charts are
textual-plotext's ``PlotextPlot`` (plotext's bar charts; why this package: docs/costs.md), in
the console's theme: its background and text, the bars in its primary colour.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.color import Color
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Label, Static
from textual_plotext import PlotextPlot

from tether.observe.cost_figures import DAYS, CostFigures
from tether.store.costs import DEAREST, CostRow, ago
from tether.tui.widgets.key_bar import KeyBar
from tether.tui.state.text import one_line

NARROW = 120
"""Below this many columns the agents' and the models' charts stack instead of sitting side by side."""


def _usd(value: float) -> str:
    return f"${value:,.4f}" if value < 100 else f"${value:,.2f}"


def _tick(value: float) -> str:
    """An axis label: as few digits as tell the ticks apart."""
    return "$0" if value == 0 else f"${value:,.2f}" if value >= 0.1 else f"${value:.4f}"


class CostsScreen(Screen[None]):
    """Spend per day, by agent, by model; the fleet budgets."""

    DEFAULT_CSS = """
    CostsScreen #costs-days { height: 9; }
    CostsScreen #costs-groups { height: auto; }
    CostsScreen #costs-groups.-narrow { layout: vertical; }
    CostsScreen .costs-group { height: auto; width: 1fr; }
    CostsScreen .costs-bars { height: 4; }
    CostsScreen DataTable { height: auto; max-height: 14; margin-bottom: 1; }
    CostsScreen #costs-budgets { height: auto; margin-bottom: 1; }
    """

    BINDINGS = [
        Binding("escape,dollar_sign", "close", "Back", id="costs.close"),
        Binding("f5", "reload", "Reload", id="costs.reload"),
    ]

    class Chosen(Message):
        """Enter on a row: go to the group's dearest run (``control``: the screen it was chosen on)."""

        def __init__(self, screen: CostsScreen, run_id: str) -> None:
            super().__init__()
            self.screen = screen
            self.run_id = run_id

        @property
        def control(self) -> CostsScreen:
            return self.screen

    def __init__(self, load: Callable[[], Awaitable[CostFigures]]) -> None:
        super().__init__(id="costs-screen")
        self._load = load
        self.figures: CostFigures | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="costs-body"):
            yield Label(Text(f"Costs (last {DAYS} days, UTC)", style="bold"), classes="screen-title")
            yield Static("reading the store…", id="costs-days-title")
            yield PlotextPlot(id="costs-days")
            yield Static("", id="costs-budgets")
            with Horizontal(id="costs-groups"):
                for kind in ("agent", "model"):
                    with Vertical(classes="costs-group"):
                        yield Label(Text(f"By {kind}", style="bold"))
                        yield PlotextPlot(id=f"costs-{kind}s-bars", classes="costs-bars")
                        yield self._table(f"costs-{kind}s", kind)
            yield Label(Text(f"The dearest runs (at most {DEAREST})", style="bold"))
            dearest: DataTable[Text] = DataTable(id="costs-dearest", cursor_type="row", zebra_stripes=True)
            dearest.add_columns("run", "agent", "model", "cost", "tokens", "status", "age")
            yield dearest
        yield KeyBar(id="costs-keys")

    @staticmethod
    def _table(table_id: str, first: str) -> DataTable[Text]:
        table: DataTable[Text] = DataTable(id=table_id, cursor_type="row", zebra_stripes=True)
        table.add_columns(first, "spend", "runs", "dearest run")
        return table

    def on_resize(self, event: events.Resize) -> None:
        self.query_one("#costs-groups").set_class(event.size.width < NARROW, "-narrow")

    def on_mount(self) -> None:
        self.query_one("#costs-agents", DataTable).focus()
        # (the charts' frames follow a new theme by themselves; the bars' colour is ours to redraw)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._redraw())
        self.action_reload()

    def _redraw(self) -> None:
        if self.figures is not None:
            self.show(self.figures)

    def action_reload(self) -> None:
        self.run_worker(self._reload(), name="costs", group="costs", exclusive=True, exit_on_error=False)

    async def _reload(self) -> None:
        try:
            figures = await self._load()
        except Exception as exc:
            self.query_one("#costs-days-title", Static).update(Text(f"the costs could not be read: "
                                                                   f"{one_line(exc, 300)}", style="red"))
            return
        self.show(figures)

    def action_close(self) -> None:
        self.dismiss(None)

    def show(self, figures: CostFigures) -> None:
        self.figures = figures
        values = [usd for _, usd in figures.days]
        total = sum(values)
        top_day = max(figures.days, key=lambda d: d[1]) if any(values) else None
        title = Text(f"Spend per day: {_usd(total)} in {DAYS} days", style="bold")
        if top_day is not None:
            title.append(f"   dearest day {top_day[0]}: {_usd(top_day[1])}", style="dim")
        if figures.unknown_runs:
            title.append(f"   {figures.unknown_runs} run{'s' if figures.unknown_runs != 1 else ''} with no price "
                         "(tokens counted, not dollars)", style="yellow")
        self.query_one("#costs-days-title", Static).update(title)
        self._days(figures)
        self._fill("#costs-agents", figures.agents)
        self._fill("#costs-models", figures.models)
        self._fill_dearest(figures)
        lines = Text()
        for i, b in enumerate(figures.budgets):
            style = {"reached": "bold red", "warning": "yellow"}.get(b["state"], "green")
            lines.append("\n" if i else "")
            lines.append(f"budget {b['name']}: ", style="bold")
            lines.append(f"{_usd(b['spent'])} of {_usd(b['usd'])} this {b['per']} ({b['scope']}) ")
            lines.append(b["state"], style=style)
        self.query_one("#costs-budgets", Static).update(lines or Text("no fleet budgets ([budgets.NAME] in the "
                                                                      "agent file)", style="dim"))

    def _colour(self) -> tuple[int, int, int]:
        """The bars' colour: the console theme's primary (plotext takes RGB)."""
        return Color.parse(self.app.theme_variables.get("primary", "cyan")).rgb

    def _days(self, figures: CostFigures) -> None:
        """Spend per day as vertical bars, the oldest day on the left, today on the right."""
        plot = self.query_one("#costs-days", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        values = [usd for _, usd in figures.days]
        top = max(values)
        plt.bar(list(range(1, DAYS + 1)), values, width=0.3, marker="hd", color=self._colour())
        plt.xlim(0.5, DAYS + 0.5)
        plt.ylim(0, top or 1.0)
        plt.yticks([0, top / 2, top] if top else [0], [_tick(v) for v in ([0, top / 2, top] if top else [0])])
        at = [0, 7, 14, 21, DAYS - 1]  # a week apart, and today
        plt.xticks([i + 1 for i in at], [figures.days[i][0][5:] for i in at])
        plot.refresh()

    def _fill(self, selector: str, rows: Sequence[CostRow]) -> None:
        table = self.query_one(selector, DataTable)
        table.clear()
        for r in rows:
            spend = "unknown" if r.unknown_runs == r.runs else ("≥" if r.unknown_runs else "") + _usd(r.cost_usd)
            table.add_row(Text(one_line(r.group, 30)), Text(spend, justify="right"),
                          Text(str(r.runs), justify="right"), Text(one_line(r.dearest_run or "", 36), style="dim"),
                          key=r.dearest_run or r.group)
        plot = self.query_one(f"{selector}-bars", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        # plotext draws the first bar at the bottom: the dearest group, listed first, goes last.
        shown = list(reversed(rows))
        plot.styles.height = len(shown) + 3  # a row a bar, the frame and the axis's labels
        plot.display = bool(shown)  # (no runs: the empty table says so)
        top = max((r.cost_usd for r in rows), default=0.0)
        if shown:
            plt.bar([one_line(r.group, 18) for r in shown], [r.cost_usd for r in shown], orientation="horizontal",
                    width=0.3, marker="hd", color=self._colour())
            plt.xlim(0, top or 1.0)
            plt.xticks([0, top / 2, top] if top else [0], [_tick(v) for v in ([0, top / 2, top] if top else [0])])
        plot.refresh()

    def _fill_dearest(self, figures: CostFigures) -> None:
        table = self.query_one("#costs-dearest", DataTable)
        table.clear()
        for s in figures.dearest:
            own = (s.cost_usd or 0.0) - (s.child_cost_usd or 0.0)
            cost = "unknown" if s.price == "unknown" else _usd(own)
            table.add_row(Text(one_line(s.run_id, 36)), Text(one_line(s.agent or "", 20)),
                          Text(one_line(s.model or "", 24)), Text(cost, justify="right"),
                          Text(f"{s.prompt_tokens or 0:,} in / {s.completion_tokens or 0:,} out", justify="right"),
                          Text(s.status), Text(ago(figures.now - s.created_at), justify="right", style="dim"),
                          key=s.run_id)

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.post_message(self.Chosen(self, str(event.row_key.value)))
