"""The console's two hand-made views: the runs list and the virtualised transcript.

Both replaced stock widgets for speed (see their modules); these tests hold them to what
the stock widgets gave the operator: keys and clicks move the selection, a narrow pane
never shows a number cut in half, a long transcript shows its newest messages with a
note of how many are left out, the footer is replaced not stacked, and every kept line
can be scrolled to, whether or not it was rendered before.
"""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import pytest
from rich.text import Text
from textual import events
from textual.geometry import Offset
from textual.selection import Selection

from tether.vocab.state import Limits, Status
from tests.support import SIZE, finish, make_app, settle, wait_for
from tether.tui.screens.new_run import NewRunRequest
from tether.tui.widgets.runs_list import COLUMNS, RunRow, RunsList, row_text
from tether.tui.widgets.transcript import TranscriptView


def _plans(app, *rids: str) -> None:
    for rid in rids:
        app.create_run(NewRunRequest("plan"), run_id=rid)


async def test_keys_and_clicks_move_the_selection(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        _plans(app, "plan-a", "plan-b", "plan-c")
        await settle(pilot, app)
        runs = app.console_screen.query_one("#runs", RunsList)
        runs.focus()
        app.select("plan-a")
        await pilot.pause()
        await pilot.press("down")
        await pilot.pause()
        assert app.selected == "plan-b" and runs.highlighted_run == "plan-b"
        await pilot.press("end")
        await pilot.pause()
        assert app.selected == "plan-c"
        await pilot.press("down")  # past the last row: stays
        await pilot.pause()
        assert app.selected == "plan-c"
        await pilot.press("home")
        await pilot.pause()
        assert app.selected == "plan-a"
        assert "plan-a" in app.console_screen.query_one("#run-header").render().plain  # type: ignore[attr-defined]
        # a click on the second row (below the header line) selects it
        await pilot.click(RunsList, offset=Offset(3, 1 + 1 + 1))  # border, header, first row
        await pilot.pause()
        assert app.selected == "plan-b"
        await finish(pilot, app)


async def test_the_list_follows_a_live_run_and_its_status(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.create_run(NewRunRequest("runaway", limits=Limits(max_turns=4)), run_id="runaway-1")
        await settle(pilot, app)
        runs = app.console_screen.query_one("#runs", RunsList)
        shown = "\n".join(runs.render_line(y).text for y in range(3))
        assert "Status" in shown and "Turns" in shown  # the header line
        assert "turn cap" in shown  # the badge of max_turns_exceeded
        assert "4/4" in shown
        await finish(pilot, app)


def test_a_narrow_list_leaves_columns_out_rather_than_cut_them() -> None:
    row = RunRow("plan-1", "completed", "plan", turns=3, max_turns=20, cost=0.0036)
    for width in range(20, 80):
        line = row_text(row.cells(), width).plain
        assert len(line) == width
        # the numbers are either whole or absent
        assert ("3/20" in line) or ("3/2" not in line and "/20" not in line)
        assert ("$0.0036" in line) or ("$0.00" not in line)
    assert "$0.0036" in row_text(row.cells(), 60).plain
    header = row_text({key: Text(label) for key, label in COLUMNS}, 60).plain
    assert header.split() [:2] == ["Status", "Run"]


async def test_a_long_transcript_keeps_the_newest_messages_and_says_how_many_are_left_out(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    keep = TranscriptView.MAX_MESSAGES
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("runaway", limits=Limits(max_turns=130)), run_id="runaway-long")
        app.select(rid)
        await settle(pilot, app)
        state = app.states[rid]
        assert state.status is Status.MAX_TURNS_EXCEEDED and len(state.messages) > keep + 50
        view = app.transcript_view
        lines = view.text.splitlines()
        hidden = len(state.messages) - keep
        assert lines[0] == f"… {hidden} earlier messages not shown (tether show {rid})"
        footers = [line for line in lines if line.startswith("── ")]
        assert footers == ["── max_turns_exceeded: turn cap reached: 130 of 130 turns ──"]
        # the view follows the tail: the footer is on the last line on screen
        bottom = [view.render_line(y).text.strip() for y in range(view.scrollable_content_region.height)]
        assert [b for b in bottom if b][-1].startswith("── max_turns_exceeded")
        # scroll to the top: the oldest kept lines render although they left the render cache
        assert view.document is not None and len(view.document.rendered) <= TranscriptView.RENDERED_KEPT
        view.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        assert view.render_line(0).text.startswith(f"… {hidden} earlier messages not shown")
        wrapped = view.screen_text.splitlines()
        assert len(wrapped) == view.line_count
        await finish(pilot, app)


async def test_a_live_transcript_grows_past_the_limit_and_the_note_counts_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TranscriptView, "MAX_MESSAGES", 40)  # the same trimming, on shorter runs
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("runaway", limits=Limits(max_turns=15)), run_id="runaway-live")
        app.select(rid)
        await settle(pilot, app)
        view = app.transcript_view
        assert not view.text.startswith("…")  # 32 messages: all shown
        assert len(app.states[rid].messages) < 40
        # resumed for more turns: the view trims its oldest messages as it grows
        app.start_run(rid, max_turns=35)
        await settle(pilot, app)
        assert app.transcript_view is view
        items = view.items
        state = app.states[rid]
        assert items[0] == f"… {len(state.messages) - 40} earlier messages not shown (tether show {rid})"
        assert len(items) == 1 + 40 + 1  # the note, the kept messages, the footer
        assert [item for item in items if item.startswith("── ")] == [
            "── max_turns_exceeded: turn cap reached: 35 of 35 turns ──"]
        last_call = state.messages[-1]["tool_call_id"]
        assert last_call in items[-2]  # the newest message is right above the footer
        await finish(pilot, app)


async def test_a_narrower_pane_wraps_the_transcript_again(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        _plans(app, "plan-wrap")
        await settle(pilot, app)
        app.select("plan-wrap")
        await pilot.pause()
        view = app.transcript_view
        wide = view.line_count
        await pilot.resize_terminal(90, 45)
        await pilot.pause()
        await pilot.pause()
        assert view.line_count > wide
        assert view.text.splitlines()[-1].startswith("── completed")
        await finish(pilot, app)


async def test_a_key_right_after_a_new_run_is_selected_moves_from_it(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        _plans(app, "plan-a")
        await settle(pilot, app)
        runs = app.console_screen.query_one("#runs", RunsList)
        runs.focus()
        app.create_run(NewRunRequest("plan"), run_id="plan-b", start=False)  # its refresh is still pending
        app.select("plan-b")
        assert runs.highlighted_run == "plan-b"
        await pilot.press("up")
        await pilot.pause()
        assert app.selected == "plan-a"
        await finish(pilot, app)


async def test_the_console_tunes_the_garbage_collector_only_while_it_is_up(tmp_path: Path) -> None:
    before = gc.get_threshold()
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert gc.get_freeze_count() > 0  # the start-up heap is out of the full passes
        assert gc.get_threshold()[0] > before[0]
        await finish(pilot, app)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


async def test_progress_that_changes_no_row_does_not_repaint_the_runs_list(tmp_path: Path) -> None:
    """Under a flood of tool progress the list must not redraw itself on every flush."""
    from tether.vocab.events import ToolProgress

    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        _plans(app, "plan-a", "plan-b")
        await settle(pilot, app)
        runs = app.console_screen.query_one("#runs", RunsList)
        rendered: list[int] = []
        render_line = runs.render_line
        runs.render_line = lambda y: rendered.append(y) or render_line(y)  # type: ignore[method-assign]
        for n in range(200):
            app._sink(ToolProgress(run_id="plan-a", seq=n, call_id="c1", name="scan_archive", label=f"{n}"))
            if n % 50 == 0:
                await wait_for(pilot, lambda: not app.pump.flush_pending, "a flush")  # a few flushes
        await settle(pilot, app)
        assert rendered == []
        app.select("plan-b")  # a change it must show still repaints
        await pilot.pause()
        await settle(pilot, app)
        assert rendered
        await finish(pilot, app)


async def test_a_key_paints_the_cursor_and_the_run_it_moved_to_in_the_same_frame(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The screen never shows the cursor on one run beside the detail of another (and the
    run's detail does not wait a frame behind the cursor)."""
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        _plans(app, "plan-a", "plan-b")
        await settle(pilot, app)
        runs = app.console_screen.query_one("#runs", RunsList)
        runs.focus()
        app.select("plan-a")
        await pilot.pause()
        compositor = app.console_screen._compositor
        frames: list[tuple[bool, bool, str | None, str | None]] = []
        update_widgets = compositor.update_widgets

        def painted(widgets: set) -> None:  # one call per frame, with the widgets it repaints
            frames.append((runs in widgets, app.transcript_view in widgets, runs.highlighted_run, app.selected))
            update_widgets(widgets)

        monkeypatch.setattr(compositor, "update_widgets", painted)
        for key in ("down", "up", "down", "up"):
            await pilot.press(key)
            await pilot.pause()
        cursor_frames = [f for f in frames if f[0]]
        assert len(cursor_frames) >= 4
        for _, transcript_too, cursor, selected in cursor_frames:
            assert cursor == selected and transcript_too
        assert app.selected == "plan-a"
        await finish(pilot, app)


async def test_coming_back_to_a_run_shows_it_where_the_operator_left_it(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.create_run(NewRunRequest("runaway", limits=Limits(max_turns=30)), run_id="runaway-a")
        _plans(app, "plan-b")
        await settle(pilot, app)
        app.select("runaway-a")
        await pilot.pause()
        transcript, trace = app.transcript_view, app.trace_view
        kept = transcript.document
        assert kept is not None and transcript.max_scroll_y > 0 and trace.max_scroll_y > 0
        transcript.scroll_to(y=5, animate=False, immediate=True)  # the operator reads back
        trace.scroll_to(y=3, animate=False, immediate=True)
        app.select("plan-b")
        await pilot.pause()
        assert transcript.items[-1].startswith("── completed")
        assert transcript.scroll_y == transcript.max_scroll_y  # a run not read back follows its tail
        assert trace.scroll_y == trace.max_scroll_y
        app.select("runaway-a")
        await pilot.pause()
        assert transcript.document is kept  # not rendered again
        assert transcript.scroll_y == 5 and trace.scroll_y == 3
        assert transcript.items[-1].startswith("── max_turns_exceeded")
        # the transcripts kept are bounded: the least recently shown are dropped
        _plans(app, *(f"plan-{n}" for n in range(TranscriptView.RUNS_KEPT + 1)))
        await settle(pilot, app)
        for n in range(TranscriptView.RUNS_KEPT + 1):
            app.select(f"plan-{n}")
            await pilot.pause()
        app.select("runaway-a")
        await pilot.pause()
        assert transcript.document is not kept and transcript.scroll_y == transcript.max_scroll_y
        await finish(pilot, app)


async def test_switching_runs_repaints_the_views_without_a_layout_pass_and_their_scroll_bars_follow(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.create_run(NewRunRequest("runaway", limits=Limits(max_turns=12)), run_id="runaway-short")
        app.create_run(NewRunRequest("runaway", limits=Limits(max_turns=40)), run_id="runaway-long")
        await settle(pilot, app)
        app.select("runaway-short")
        await pilot.pause()
        screen = app.console_screen
        layouts: list[int] = []
        refresh_layout = screen._refresh_layout
        monkeypatch.setattr(screen, "_refresh_layout", lambda *a, **kw: layouts.append(1) or refresh_layout(*a, **kw))
        transcript, trace = app.transcript_view, app.trace_view
        for rid in ("runaway-long", "runaway-short", "runaway-long"):
            app.select(rid)
            await pilot.pause()
            await pilot.pause()
            assert transcript.vertical_scrollbar.window_virtual_size == transcript.line_count
            assert trace.vertical_scrollbar.window_virtual_size == trace.line_count
            assert transcript.scroll_y == transcript.max_scroll_y > 0
        assert app.states["runaway-long"].turns == 40 and transcript.line_count > 0
        assert layouts == []
        await finish(pilot, app)


async def test_an_operator_reading_back_in_the_trace_keeps_their_lines_while_old_ones_are_dropped(
        tmp_path: Path) -> None:
    from tether.vocab.events import ToolProgress
    from tether.tui.widgets.trace_view import MAX_LINES

    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        _plans(app, "plan-a")
        await settle(pilot, app)
        app.select("plan-a")
        trace = app.trace_view

        async def progress(first: int, count: int) -> None:
            for n in range(first, first + count):
                app._sink(ToolProgress(run_id="plan-a", seq=10_000 + n, call_id="c1", name="scan_archive",
                                       label=f"entry {n}"))
                if n % 200 == 199:
                    await wait_for(pilot, lambda: not app.pump.flush_pending, "a flush")
            await settle(pilot, app)

        await progress(0, MAX_LINES)  # the buffer is full: every new line drops the oldest
        assert trace.line_count == MAX_LINES and trace.scroll_y == trace.max_scroll_y
        trace.scroll_to(y=trace.max_scroll_y - 300, animate=False, immediate=True)  # the operator reads back
        await pilot.pause()
        top = trace.render_line(0).text
        assert "scan_archive: entry" in top
        await progress(MAX_LINES, 100)
        assert trace.line_count == MAX_LINES
        assert trace.render_line(0).text == top  # the same line, not 100 lines further on
        selected = trace.get_selection(Selection(Offset(0, 0), Offset(0, 1)))
        assert selected is not None and selected[0] == trace.lines[0] + "\n"
        trace.scroll_end(animate=False, immediate=True)  # back at the end: it follows again
        await progress(MAX_LINES + 100, 10)
        assert trace.scroll_y == trace.max_scroll_y and "entry 1109" in trace.lines[-1]
        await finish(pilot, app)


async def test_the_sparkline_redraws_for_new_data_and_a_kept_drawing_matches_a_fresh_one() -> None:
    from textual.app import App, ComposeResult
    from textual.geometry import Region
    from textual.widgets import Sparkline

    from tether.tui.widgets.cost_meter import TurnsSparkline

    class Pair(App):
        CSS = "Sparkline { height: 3; width: 40; }"

        def compose(self) -> ComposeResult:
            yield TurnsSparkline([], summary_function=max, id="kept")
            yield Sparkline([], summary_function=max, id="stock")

    def drawn(widget: Sparkline) -> list[list[tuple[str, object]]]:
        region = Region(0, 0, widget.size.width, widget.size.height)
        return [[(seg.text, seg.style) for seg in strip] for strip in widget.render_lines(region)]

    growing, falling = [356, 416, 476, 536, 900], [900, 500, 100, 50, 20]
    app = Pair()
    async with app.run_test(size=(60, 8)) as pilot:
        kept, stock = app.query_one("#kept", TurnsSparkline), app.query_one("#stock", Sparkline)
        seen = []
        for data in (growing, falling, growing, growing + [1200]):
            kept.data, stock.data = list(data), list(data)
            await pilot.pause()
            assert drawn(kept) == drawn(stock)  # what Textual's own sparkline draws
            seen.append("".join(text for text, _ in drawn(kept)[-1]))
        assert seen[0] != seen[1] and seen[2] == seen[0] and seen[3] != seen[0]
        assert len(kept._drawings) == 4  # empty, then three data: coming back to the first drew nothing new


async def _painted(app, what: str, rid: str, cap: float = 10.0) -> bool:
    """Whether ``what`` for ``rid`` reached the screen within ``cap`` s, without Pilot's
    pauses (each of those paints the screen itself)."""
    deadline = time.monotonic() + cap
    while time.monotonic() < deadline:
        if (what, rid) in app.shown:
            return True
        await asyncio.sleep(0.01)
    return False


async def test_a_key_and_a_stop_are_painted_without_waiting_for_the_next_frame(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's changes are painted once they reach the screen: with Textual's
    frame timer an hour apart, a key's selection and a stopped run still show."""
    import textual.screen

    monkeypatch.setattr(textual.screen, "UPDATE_PERIOD", 3600.0)
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        _plans(app, "plan-a", "plan-b")
        await settle(pilot, app)
        runs = app.console_screen.query_one("#runs", RunsList)
        runs.focus()
        app.select("plan-a")
        await pilot.pause()
        app.shown.clear()
        key = events.Key("down", None)
        key.set_sender(app)
        app._driver.send_message(key)  # as a terminal delivers it
        assert await _painted(app, "selected", "plan-b")
        assert "plan-b" in app.console_screen.query_one("#run-header").render().plain  # type: ignore[attr-defined]

        rid = app.create_run(NewRunRequest("slow"), run_id="slow-1")
        app.select(rid)
        await wait_for(pilot, lambda: any("scanned 200 of 1200" in line for line in app.trace_lines(rid)),
                       "scan_archive to report progress")
        app.shown.clear()
        app.action_stop()
        assert await _painted(app, "stopped", rid)
        await finish(pilot, app)


async def test_a_new_count_in_the_header_repaints_the_title_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets._header import HeaderTitle

    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        _plans(app, "plan-a")
        await settle(pilot, app)
        screen = app.console_screen
        title = screen.query_one(HeaderTitle)
        repainted: list[set] = []
        layouts: list[bool] = []
        update_widgets = screen._compositor.update_widgets
        refresh_layout = screen._refresh_layout

        def painted(widgets: set) -> None:
            repainted.append(set(widgets))
            update_widgets(widgets)

        def laid_out(*args, **kwargs) -> None:
            layouts.append(True)
            refresh_layout(*args, **kwargs)

        monkeypatch.setattr(screen._compositor, "update_widgets", painted)
        monkeypatch.setattr(screen, "_refresh_layout", laid_out)
        _plans(app, "plan-b")
        await settle(pilot, app)
        assert app.sub_title.startswith("2 runs · 0 running · 0 waiting for approval · today $")
        assert "2 runs · 0 running" in title.render().plain  # type: ignore[attr-defined]
        assert any(title in widgets for widgets in repainted)
        assert not any(screen in widgets for widgets in repainted)  # not the whole screen
        assert not layouts
        await finish(pilot, app)
