"""The tours of ``tether demo`` (:mod:`tether.tui.cli.demo` runs them): autopilots of the
console on the scripted provider.

The tour drives the real console the way an operator would: the same keys, the same
dialogs, the same runs on the embedded scripted provider. A caption line names each step.
So a recording of it (``make recording``) shows the product, not a mock-up of it, and a
test can play the same tour headlessly and check that it reaches every step.

:class:`AcpTour` (``tether demo --acp``) is the same for four real coding agents, OpenCode,
Qwen Code, Claude and Codex (``make agents`` installs them), side by side under the console on
a scripted endpoint (:mod:`tether.demo.provider.coding`): writes approved with their diff,
others rejected in words the agents answer, and a long answer stopped mid-stream.
:mod:`tether.tui.cli.demo_merge` builds the tour of contained runs on it.

Between steps the tour waits on what the console knows (a run's status, a dialog ready
for Enter), never on the clock; ``pace`` only adds the pauses that let a viewer read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.pilot import Pilot
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Select, Static

from tether.demo.acp import EDIT_PROMPT, EXPLAIN_PROMPT, PACKAGE_PROMPT, TEST_PROMPT, WRITE_PROMPT
from tether.vocab.state import MaxBudget, NeedsApproval, Status
from tether.tui.screens.decision import ApproveDialog, RejectDialog
from tether.tui.screens.new_run import NewRunDialog

__all__ = ["ACP_STEPS", "STEPS", "AcpTour", "Caption", "Step", "Tour", "TourError"]


@dataclass(frozen=True)
class Step:
    """One step of the tour: its name (what tests and ``Tour.reached`` use) and the caption
    the viewer reads while it plays."""

    name: str
    caption: str


STEPS: tuple[Step, ...] = (
    Step("plan", "1/4 · n starts a run: plan reads the workspace and answers"),
    Step("approval", "2/4 · destructive wants to delete a file, and waits for a decision"),
    Step("reject", "2/4 · r rejects the call with a reason: the agent reads it in words"),
    Step("progress", "3/4 · slow runs a long tool, which reports its progress"),
    Step("stop", "3/4 · s stops it inside the tool; the run stays resumable"),
    Step("budget", "4/4 · runaway never answers, until its $0.05 budget stops it: see the sparkline"),
    Step("end", "Every run ended in a known way, for a known reason, at a known cost"),
)

REJECTION = "access.log is still needed by the log shipper"
BUDGET_USD = "0.05"
MAX_TURNS = "100"

ACP_STEPS: tuple[Step, ...] = (
    Step("opencode", "1/4 · n starts OpenCode on a project: it wants to edit greet.py, and asks first"),
    Step("qwen", "1/4 · Qwen Code beside it, on a CHANGELOG.md: it asks before it writes"),
    Step("claude", "1/4 · Claude (Zed's claude-agent-acp) on a test for greet(): it asks too"),
    Step("codex", "1/4 · and Codex on a pyproject.toml: four coding agents, each waiting on a decision"),
    Step("approve", "2/4 · a shows OpenCode's edit as a diff; Enter allows it, and greet.py is written"),
    Step("approve-claude", "2/4 · Claude's new test file, allowed the same way: Claude writes it itself"),
    Step("reject", "3/4 · r rejects Qwen Code's write in words: they go to it as its next prompt"),
    Step("answer", "3/4 · Qwen Code answers the operator's words, and CHANGELOG.md stays unwritten"),
    Step("reject-codex", "3/4 · Codex cancels its whole turn on a rejection: Tether sends it the words all the same"),
    Step("codex-answer", "3/4 · Codex answers them, and pyproject.toml stays unwritten"),
    Step("stream", "4/4 · OpenCode walks through the project: its answer streams in"),
    Step("stop", "4/4 · s stops it mid-stream: the agent cancels its turn, the run ends interrupted, no process left"),
    Step("end", "Four coding agents under one console: every write decided, every run ended for a known reason"),
)
ACP_REJECTION = "not yet: the changelog is written on release day"
CODEX_REJECTION = "no packaging yet: greet stays a single file"
ACP_AGENTS = ("opencode", "qwen", "claude", "codex")
"""The agents of the tour's agent file (:func:`tether.demo.acp.write_agent_file`)."""


class TourError(RuntimeError):
    """The console did not reach a step of the tour: what it was waiting for, in words."""


class _Quit(Exception):
    """The operator quit the console while the tour played."""


class Caption(Static):
    """The tour's caption line: on the console, under the header; on a dialog, a copy in the
    very same row, over the console's (which the dialog's backdrop dims), with the dialog laid
    out below it. So a viewer reads one caption, in one place, whatever is on top: two copies
    in different rows, or side by side, read as the caption drawn twice. At the top, the
    console's notifications (bottom right) never cover it."""

    DEFAULT_CSS = """
    Caption {
        height: 1;
        width: 1fr;
        padding: 0 1;
        background: $accent;
        color: $text;
        text-style: bold;
    }
    Caption.-on-dialog {
        dock: top;
        margin-top: 1;  /* the console's header row: its caption is the row below */
    }
    """


class Tour:
    """The tour, as ``App.run(auto_pilot=...)`` takes it: ``await Tour(pace)(pilot)``.

    ``pace``: seconds each caption is read before the tour acts (0 in tests). ``stay``:
    leave the console open after the last step, for the viewer; otherwise the tour quits it
    (what a recording wants). ``cap_s``: how long any one wait may take before the tour gives up with
    a :class:`TourError`, which says what it was waiting for.
    """

    steps: tuple[Step, ...] = STEPS

    def __init__(self, pace: float = 1.6, *, stay: bool = False, cap_s: float = 60.0) -> None:
        self.pace = pace
        self.stay = stay
        self.cap_s = cap_s
        self.reached: list[str] = []
        """The steps reached so far, by name, in order."""
        self.runs: dict[str, str] = {}
        """Scenario -> the id of the run the tour started for it."""
        self.error: str | None = None
        """Why the tour stopped short (a :class:`TourError`'s words), if it did."""
        self._caption = ""

    async def __call__(self, pilot: Pilot[Any]) -> None:
        app: Any = pilot.app
        try:
            await self._until(pilot, lambda: app.console_up, "the console to open")
            await self.play(pilot)
            await self.step(pilot, "end")
            await self.read(pilot, 2)
        except _Quit:  # the viewer quit the console: the tour ends with it
            return
        except TourError as exc:
            self.error = str(exc)
            await app.stop_all()
            app.exit(return_code=1, message=f"tether demo: {exc}")
            return
        if not self.stay:
            await app.action_quit()

    async def play(self, pilot: Pilot[Any]) -> None:
        """Every step but the last."""
        await self.plan(pilot)
        await self.destructive(pilot)
        await self.slow(pilot)
        await self.runaway(pilot)

    # ---- the steps ---------------------------------------------------------------------
    async def plan(self, pilot: Pilot[Any]) -> None:
        await self.step(pilot, "plan")
        rid = await self.new_run(pilot, "plan")
        await self._until_run(pilot, rid, lambda: self._status(pilot, rid) is Status.COMPLETED, "plan to answer")
        await self.read(pilot)

    async def destructive(self, pilot: Pilot[Any]) -> None:
        app: Any = pilot.app
        await self.step(pilot, "approval")
        rid = await self.new_run(pilot, "destructive")
        await self._until_run(pilot, rid, lambda: app.can_decide(rid)
                          and isinstance(app.states[rid].interruption, NeedsApproval),
                          "destructive to ask for approval")
        await self.read(pilot)
        await pilot.press("a")
        await self._until(pilot, lambda: isinstance(app.screen, ApproveDialog) and app.screen.armed,
                          "the approval dialog")
        self._show_caption(app.screen)
        await self.read(pilot, 2)
        await pilot.press("escape")
        await self._until(pilot, lambda: not isinstance(app.screen, ModalScreen), "the dialog to close")
        await self.step(pilot, "reject")
        await pilot.press("r")
        await self._until(pilot, lambda: isinstance(app.screen, RejectDialog) and app.screen.armed,
                          "the reject dialog")
        self._show_caption(app.screen)
        await self.type(pilot, REJECTION)
        await self.read(pilot)
        await pilot.press("enter")
        await self._until_run(pilot, rid, lambda: self._status(pilot, rid) is Status.COMPLETED,
                          "destructive to finish after the rejection")
        await self.read(pilot, 2)

    async def slow(self, pilot: Pilot[Any]) -> None:
        app: Any = pilot.app
        await self.step(pilot, "progress")
        rid = await self.new_run(pilot, "slow")
        await self._until_run(pilot, rid, lambda: any("scanned 400 of" in line for line in app.trace_lines(rid)),
                          "scan_archive's progress")
        await self.step(pilot, "stop")
        await pilot.press("s")
        await self._until_run(pilot, rid, lambda: self._status(pilot, rid) is Status.INTERRUPTED and rid not in app.active,
                          "slow to stop")
        await self.read(pilot, 1.5)

    async def runaway(self, pilot: Pilot[Any]) -> None:
        app: Any = pilot.app
        await self.step(pilot, "budget")
        rid = await self.new_run(pilot, "runaway", budget=BUDGET_USD, max_turns=MAX_TURNS)
        await self._until_run(pilot, rid, lambda: self._status(pilot, rid) is Status.BUDGET_EXCEEDED
                          and isinstance(app.states[rid].interruption, MaxBudget) and rid not in app.active,
                          "runaway's budget to stop it")
        await self.read(pilot, 2)

    # ---- what the steps are made of -------------------------------------------------------
    async def step(self, pilot: Pilot[Any], name: str) -> None:
        """Caption ``name``'s step, on whatever screen is up, and count it reached."""
        self._caption = next(step.caption for step in self.steps if step.name == name)
        self._check(pilot)
        self.reached.append(name)
        self._show_caption(pilot.app.screen)
        await pilot.pause()

    def _show_caption(self, screen: Screen[Any]) -> None:
        """The caption on ``screen`` (a dialog gets its own copy, in the console's caption's row)."""
        text = Text(self._caption)
        found = list(screen.query(Caption))
        if found:
            found[0].update(text)
            return
        caption = Caption(text)
        body = list(screen.query("#body"))
        if body:  # the console: a line of its own under the header
            screen.mount(caption, before=body[0])
        else:  # a dialog: over the console's caption, the dialog below it
            caption.add_class("-on-dialog")
            screen.mount(caption, before=0)

    async def new_run(self, pilot: Pilot[Any], scenario: str, *, budget: str | None = None,
                      max_turns: str | None = None, agent: str | None = None, prompt: str | None = None) -> str:
        """Start ``scenario`` from the New run dialog, as an operator would; its run id. With
        ``agent``, that agent of the agent file, on ``prompt`` (typed), is the run ``scenario``
        names here."""
        app: Any = pilot.app
        before = set(app.states)
        await pilot.press("n")
        await self._until(pilot, lambda: isinstance(app.screen, NewRunDialog), "the New run dialog")
        dialog = app.screen
        self._show_caption(dialog)
        await pilot.pause()
        dialog.query_one("#agent", Select).value = ("demo", scenario) if agent is None else ("agent", agent)
        await self.read(pilot, 0.6)
        for selector, value in (("#max-turns", max_turns), ("#budget", budget), ("#prompt", prompt)):
            if value is not None:
                field = dialog.query_one(selector, Input)
                field.value = ""
                await self._focus(pilot, field)
                await self.type(pilot, value)
        await self._focus(pilot, dialog.query_one("#prompt", Input))  # Enter there starts the run
        await self.read(pilot, 0.6)
        await pilot.press("enter")
        await self._until(pilot, lambda: set(app.states) - before and app.selected not in before,
                          f"{scenario}'s run to start")
        rid: str = app.selected
        self.runs[scenario] = rid
        return rid

    async def _focus(self, pilot: Pilot[Any], field: Input) -> None:
        field.focus()  # takes effect when the app next handles its messages: wait for it
        await self._until(pilot, lambda: pilot.app.focused is field, f"the field {field.id} to take the keys")

    async def type(self, pilot: Pilot[Any], text: str) -> None:
        """Type ``text`` into the focused field, a key at a time when a viewer is watching."""
        if self.pace <= 0:
            await pilot.press(*text)
            return
        for key in text:
            await pilot.press(key)
            await asyncio.sleep(0.04)

    async def read(self, pilot: Pilot[Any], paces: float = 1.0) -> None:
        """Give the viewer time to read the screen (nothing, in tests)."""
        self._check(pilot)
        await pilot.pause(self.pace * paces if self.pace > 0 else None)

    @staticmethod
    def _check(pilot: Pilot[Any]) -> None:
        if pilot.app.quitting:  # type: ignore[attr-defined]
            raise _Quit

    @staticmethod
    def _status(pilot: Pilot[Any], rid: str) -> Status | None:
        state = pilot.app.states.get(rid)  # type: ignore[attr-defined]
        return None if state is None else state.status

    async def _until_run(self, pilot: Pilot[Any], rid: str, ready: Callable[[], object], what: str) -> None:
        """:meth:`_until`, for a step of run ``rid``: if the run ends some other way first
        (the endpoint failed, say), the tour stops at once and says how it ended."""
        app: Any = pilot.app

        def ready_or_ended() -> object:
            if ready():
                return True
            state = app.states.get(rid)
            if state is not None and state.status is not Status.RUNNING and rid not in app.active:
                raise TourError(f"the tour waited for {what}, but run {rid} ended {state.status.value}: "
                                f"{app.reason(rid)}")
            return False

        await self._until(pilot, ready_or_ended, what)

    async def _until(self, pilot: Pilot[Any], ready: Callable[[], object], what: str) -> None:
        deadline = time.monotonic() + self.cap_s
        while not ready():
            self._check(pilot)
            if time.monotonic() > deadline:
                raise TourError(f"the tour waited {self.cap_s:g} s for {what}; the console did not get there")
            await pilot.pause(0.02)


class AcpTour(Tour):
    """``tether demo --acp``: four real coding agents under the console, on the agent file
    :func:`tether.demo.acp.write_agent_file` writes (``opencode``, ``qwen``, ``claude`` and
    ``codex``) and the scripted endpoint's :data:`tether.demo.acp.TASKS`. OpenCode's edit and
    Claude's new file are approved from the dialog that shows their diff; Qwen Code's write and
    Codex's are rejected in words, which each answers; a long answer of OpenCode's is stopped
    mid-stream. ``runs``: ``edit``, ``write``, ``test``, ``package``, ``explain``."""

    steps = ACP_STEPS

    def __init__(self, pace: float = 1.6, *, stay: bool = False, cap_s: float = 120.0) -> None:
        super().__init__(pace, stay=stay, cap_s=cap_s)  # a cold agent takes seconds to start

    async def play(self, pilot: Pilot[Any]) -> None:
        app: Any = pilot.app
        asked = {"edit": "OpenCode to ask to edit greet.py", "write": "Qwen Code to ask to write CHANGELOG.md",
                 "test": "Claude to ask to write test_greet.py", "package": "Codex to ask to write pyproject.toml"}
        started: dict[str, str] = {}
        for step, run, agent, prompt in (("opencode", "edit", "opencode", EDIT_PROMPT),
                                         ("qwen", "write", "qwen", WRITE_PROMPT),
                                         ("claude", "test", "claude", TEST_PROMPT),
                                         ("codex", "package", "codex", PACKAGE_PROMPT)):
            await self.step(pilot, step)
            rid = started[run] = await self.new_run(pilot, run, agent=agent, prompt=prompt)
            await self._until_run(pilot, rid, lambda rid=rid: self._asks(pilot, rid), asked[run])
            await self.read(pilot, 1.5 if step == "codex" else 1.0)

        await self.step(pilot, "approve")
        await self.approve(pilot, started["edit"], "OpenCode to write greet.py and finish")
        await self.step(pilot, "approve-claude")
        await self.approve(pilot, started["test"], "Claude to write test_greet.py and finish")

        await self.step(pilot, "reject")
        await self.reject(pilot, started["write"], ACP_REJECTION, "Qwen Code to answer the operator's words")
        await self.step(pilot, "answer")
        await self.read(pilot, 2)
        await self.step(pilot, "reject-codex")
        await self.reject(pilot, started["package"], CODEX_REJECTION, "Codex to answer the operator's words")
        await self.step(pilot, "codex-answer")
        await self.read(pilot, 2)

        await self.step(pilot, "stream")
        explain = await self.new_run(pilot, "explain", agent="opencode", prompt=EXPLAIN_PROMPT)
        await self._until_run(pilot, explain, lambda: len(app.model.streaming.get(explain) or "") > 40,
                              "OpenCode's answer to stream in")
        await self.read(pilot, 1.5)
        await self.step(pilot, "stop")
        await pilot.press("s")
        await self._until(pilot, lambda: self._ended(pilot, explain, Status.INTERRUPTED), "OpenCode to stop")
        await self.read(pilot, 1.5)

    async def approve(self, pilot: Pilot[Any], rid: str, what: str, *, reading: float = 2.5) -> None:
        """``a`` on run ``rid``: the dialog with the agent's diff, read (``reading`` paces), then
        Enter allows it once; then the run's end (``what`` names it)."""
        app: Any = pilot.app
        app.select(rid)
        await self.read(pilot, 0.6)
        # The other agents' "waits for approval" toasts, read by now, would take rows of the
        # dialog's own (a dialog lays itself out above them), and its diff is what the viewer reads.
        app.clear_notifications()
        await pilot.press("a")
        await self._until(pilot, lambda: isinstance(app.screen, ApproveDialog) and app.screen.armed,
                          "the approval dialog")
        self._show_caption(app.screen)
        await self.read(pilot, reading)
        await pilot.press("enter")
        await self._until_run(pilot, rid, lambda: self._ended(pilot, rid, Status.COMPLETED), what)
        await self.read(pilot, 1.5)

    async def reject(self, pilot: Pilot[Any], rid: str, words: str, what: str) -> None:
        """``r`` on run ``rid``, ``words`` typed as the reason; then the run's end, once the agent
        has answered them (``what`` names it)."""
        app: Any = pilot.app
        app.select(rid)
        await self.read(pilot, 0.6)
        await pilot.press("r")
        await self._until(pilot, lambda: isinstance(app.screen, RejectDialog) and app.screen.armed,
                          "the reject dialog")
        self._show_caption(app.screen)
        await self.type(pilot, words)
        await self.read(pilot)
        await pilot.press("enter")
        await self._until_run(pilot, rid, lambda: self._ended(pilot, rid, Status.COMPLETED), what)

    @staticmethod
    def _asks(pilot: Pilot[Any], rid: str) -> bool:
        """The run waits on its agent's permission request, and this console can answer it."""
        app: Any = pilot.app
        state = app.states.get(rid)
        return state is not None and isinstance(state.interruption, NeedsApproval) and app.can_decide(rid)

    @staticmethod
    def _ended(pilot: Pilot[Any], rid: str, status: Status) -> bool:
        app: Any = pilot.app
        state = app.states.get(rid)
        return state is not None and state.status is status and rid not in app.active
