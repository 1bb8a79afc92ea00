"""What the console's lists show, one row each: a run of the runs list (:class:`RunRow`) and a
call waiting for approval (:class:`Pending`). Made by the model
(:meth:`~tether.tui.state.model.ConsoleModel.row`, :meth:`~tether.tui.state.model.ConsoleModel.pending_approvals`),
handed down to the widgets, frozen: a widget compares a row with the one it painted."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from tether.tui.state.text import badge, money, one_line


@dataclass(frozen=True)
class RunRow:
    """A row of the runs list."""

    run_id: str
    badge_key: str
    model: str
    turns: int
    max_turns: int | None
    cost: float | None  # None: not known (an ACP agent that reported no usage)
    depth: int = 0
    owner: str = ""  # who runs it, when another process or a worker does
    changed: str = ""  # ``+12 −3 in 4 files``: what it changed in its own workspace
    lineage: str = ""  # ``fork of RUN@3``: the run and checkpoint ``tether fork`` made it from

    def cells(self) -> dict[str, Text]:
        cap = "" if self.max_turns is None else f"/{self.max_turns}"
        name = self.name()
        if self.changed:
            name.append(f" {self.changed}", style="cyan")
        if self.lineage:
            name.append(f" {one_line(self.lineage, 60)}", style="magenta")
        if self.owner:
            name.append(f" ⇢ {one_line(self.owner, 40)}", style="dim")
        return {
            "status": badge(self.badge_key),
            "run": name,
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


@dataclass(frozen=True)
class Pending:
    """A call waiting for the operator's approval."""

    run_id: str
    call_id: str
    tool: str
    args: str
    why: str
    tally: str = ""
    """``1 of 2 approved (alice)`` for a call that needs more than one person."""

    def prompt(self) -> Text:
        out = Text()
        out.append(one_line(self.tool, 30), style="bold yellow")
        if self.tally:
            out.append(f" [{one_line(self.tally, 60)}]", style="bold")
        out.append(" ")
        out.append(one_line(self.args, 200))
        out.append("\n  run ", style="dim")
        out.append(one_line(self.run_id, 80))
        out.append(f"  call {one_line(self.call_id, 30)}", style="dim")
        out.append("\n  why ", style="dim")
        out.append(one_line(self.why, 300), style="dim")
        return out
