"""The runs list: every run in the runs dir, children indented under their parent."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import DataTable

from tui.text import badge, money, one_line

COLUMNS = (("status", "Status"), ("run", "Run (scenario-…)"), ("turns", "Turns"), ("cost", "Cost"))
WIDTHS = {"status": 11, "turns": 8, "cost": 8}  # fixed, so updating a cell never reflows the table


@dataclass(frozen=True)
class RunRow:
    run_id: str
    badge_key: str
    model: str
    turns: int
    max_turns: int | None
    cost: float
    depth: int = 0

    def cells(self) -> dict[str, Text]:
        cap = "" if self.max_turns is None else f"/{self.max_turns}"
        return {
            "status": badge(self.badge_key),
            "run": self.name(),
            "turns": Text(f"{self.turns}{cap}", justify="right"),
            "cost": Text(money(self.cost), justify="right"),
        }


    def name(self) -> Text:
        """The run id with its scenario (model) part in bold; a child shows its call id."""
        if self.depth:
            out = Text("  " * (self.depth - 1) + "└ subagent ", style="dim")
            out.append(one_line(self.run_id.rsplit(".", 1)[-1], 30), style="dim")
            return out
        rid, model = one_line(self.run_id, 48), one_line(self.model, 30)
        prefix = model.replace("/", "_")[:24]
        if rid.startswith(prefix):
            return Text.assemble((prefix, "bold"), (rid[len(prefix):], ""))
        return Text.assemble((rid, ""), (f" ({model})", "dim"))


class RunsList(DataTable[Text]):
    """A row per run, keyed by run id. The app owns the data; this widget only shows it."""

    BORDER_TITLE = "Runs"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._rows: dict[str, RunRow] = {}
        self._order: list[str] = []

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(Text(label), key=key, width=WIDTHS.get(key))

    @property
    def order(self) -> list[str]:
        return list(self._order)

    @property
    def highlighted_run(self) -> str | None:
        if not self._order or self.cursor_row < 0 or self.cursor_row >= len(self._order):
            return None
        return self._order[self.cursor_row]

    def set_rows(self, rows: list[RunRow], selected: str | None) -> None:
        """Rebuild when the set or order of runs changed; otherwise update changed cells."""
        order = [r.run_id for r in rows]
        if order != self._order:
            with self.prevent(DataTable.RowHighlighted):
                self.clear()
                for row in rows:
                    cells = row.cells()
                    self.add_row(*(cells[k] for k, _ in COLUMNS), key=row.run_id)
                self._order = order
                self._rows = {r.run_id: r for r in rows}
                if selected in self._rows:
                    self.move_cursor(row=order.index(selected), animate=False)
            return
        for row in rows:
            self.update_row(row)

    def update_row(self, row: RunRow) -> None:
        old = self._rows.get(row.run_id)
        if old == row or old is None:
            return
        self._rows[row.run_id] = row
        new, before = row.cells(), old.cells()
        for key, _ in COLUMNS:
            if new[key] != before[key]:
                self.update_cell(row.run_id, key, new[key], update_width=key not in WIDTHS)

    def select(self, run_id: str) -> None:
        if run_id in self._rows and self.highlighted_run != run_id:
            self.move_cursor(row=self._order.index(run_id), animate=False)
