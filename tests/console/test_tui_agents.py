"""The console and agents: the agent file's agents in the New run dialog, ``--agent`` and
``--config``, and runs rebuilt by the harness whatever endpoint they use.

The agents here ask a real endpoint over loopback: the scripted provider served by a
child process (model ``plan``: list the files, read errors.log, answer), named by the
agent file's ``base_url``, so a run reaches it only through its agent. Waits are on
conditions (see tests/console/test_tui.py); nothing asserts on timing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.widgets import Input, Select, Static

from tether.tui.cli import main as cli_main
from tether.models.client import ModelClient
from tether.agents.config import load_config
from tether.harness import Harness
from tether.demo.provider.scenarios import PLAN_ANSWER
from tether.demo.provider.server import provider_process
from tether.vocab.state import Limits, Status
from tether.store.files.layout import JOURNAL_FILE
from tether.tui.cli import console
from tether.tui.app import TetherApp
from tether.tui.screens.new_run import NewRunDialog, NewRunRequest
from tether.tui.screens.resume import ResumeDialog
from tether.tui.widgets.runs_list import RunsList
from tether.demo.agents import DEMO
from tests.endpoints import call, completion, scripted_app
from tests.support import SIZE, finish, make_app, settle, still_console, wait_for

TASK = "Which file mentions a timeout?"
AGENTS = """\
[agents.helper]
model = "plan"
base_url = "{url}"
instructions = "You help with the files in the folder."
tools = [{tools}]
workspace = "./files"
max_turns = 6

[agents.triage]
model = "plan"
base_url = "{url}"
tools = ["tether:list_files", "tether:read_file"]
workspace = "./files"
prompt = "{task}"
"""
BOTH_TOOLS = '"tether:list_files", "tether:read_file"'


@pytest.fixture(scope="module")
def provider_url() -> Iterator[str]:
    """The scripted provider on a loopback port, for the whole module."""
    with provider_process() as url:
        yield url


def write_agents(tmp_path: Path, url: str, tools: str = BOTH_TOOLS) -> Path:
    folder = tmp_path / "agents"
    (folder / "files").mkdir(parents=True, exist_ok=True)
    (folder / "files" / "errors.log").write_text("12:00 timeout talking to the database\n", encoding="utf-8")
    path = folder / "tether.toml"
    path.write_text(AGENTS.format(url=url, tools=tools, task=TASK), encoding="utf-8")
    return path


async def open_new_run(pilot: Any, app: TetherApp) -> NewRunDialog:
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, NewRunDialog), "the new-run dialog")
    dialog = app.screen
    assert isinstance(dialog, NewRunDialog)
    return dialog


async def type_into(pilot: Any, field: Input, text: str) -> None:
    field.focus()
    await pilot.pause()
    if text:
        await pilot.press(*text)


# ---- the New run dialog ----------------------------------------------------------------

async def test_the_dialog_lists_the_agents_and_starts_one_on_the_task_typed(tmp_path: Path,
                                                                         provider_url: str) -> None:
    app = make_app(tmp_path, config=load_config(write_agents(tmp_path, provider_url)))
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_new_run(pilot, app)
        keys = list(dialog.choices)
        assert keys[:2] == [("agent", "helper"), ("agent", "triage")]  # the agent file's first
        assert ("demo", "plan") in keys and ("demo", "destructive") in keys  # then the demo scenarios
        assert dialog.choice.key == ("agent", "helper")
        assert app.focused is dialog.query_one("#agent", Select)
        # the agent's own limits fill the fields
        assert dialog.query_one("#max-turns", Input).value == "6"
        await pilot.press("tab")  # to Task
        assert app.focused is dialog.query_one("#prompt", Input)
        await pilot.press(*TASK)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to start the run")
        await settle(pilot, app, "the helper's run to finish")
        [rid] = list(app.states)
        st = app.states[rid]
        assert st.agent is not None and (st.agent.name, st.agent.source) == ("helper", "config")
        assert st.agent.config == str(tmp_path / "agents" / "tether.toml")
        assert st.base_url == provider_url  # the agent's endpoint, not the console's
        assert st.task == TASK and st.messages[0]["content"] == "You help with the files in the folder."
        assert st.limits.max_turns == 6
        assert st.status is Status.COMPLETED and st.answer == PLAN_ANSWER
        assert app.selected == rid and rid.startswith("helper")
        runs = app.console_screen.query_one("#runs", RunsList)
        assert runs.order == [rid]
        assert "helper (plan)" in app.console_screen.query_one("#run-header", Static).render().plain
        await finish(pilot, app)


async def test_an_agent_without_a_task_needs_one_and_the_dialog_stays_open(tmp_path: Path,
                                                                          provider_url: str) -> None:
    app = make_app(tmp_path, config=load_config(write_agents(tmp_path, provider_url)))
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_new_run(pilot, app)
        prompt = dialog.query_one("#prompt", Input)
        assert "no task of its own" in prompt.placeholder
        await type_into(pilot, prompt, "")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog and not app.states
        error = dialog.query_one("#error", Static).render().plain
        assert "helper has no task of its own" in error
        # choose the next agent from the keyboard (Space opens the list; Enter there picks): it
        # has a task of its own
        dialog.query_one("#agent", Select).focus()
        await pilot.pause()
        await pilot.press("space", "down", "enter")
        await wait_for(pilot, lambda: dialog.choice.key == ("agent", "triage"), "triage to be chosen")
        assert TASK in prompt.placeholder
        assert dialog.query_one("#max-turns", Input).value == str(Limits().max_turns)  # triage's own cap
        await type_into(pilot, prompt, "")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to start the run")
        await settle(pilot, app, "the triage run to finish")
        [st] = app.states.values()
        assert st.agent is not None and st.agent.name == "triage"
        assert st.task == TASK  # its default task
        assert st.status is Status.COMPLETED
        await finish(pilot, app)


async def test_a_field_the_operator_changed_stays_when_another_agent_is_chosen(tmp_path: Path,
                                                                              provider_url: str) -> None:
    app = make_app(tmp_path, config=load_config(write_agents(tmp_path, provider_url)))
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_new_run(pilot, app)
        dialog.query_one("#budget", Input).value = "0.5"
        dialog.query_one("#agent", Select).value = ("demo", "recover")
        await wait_for(pilot, lambda: dialog.query_one("#max-turns", Input).value == str(Limits().max_turns),
                       "the scenario's own turn cap")
        assert dialog.query_one("#budget", Input).value == "0.5"
        await type_into(pilot, dialog.query_one("#prompt", Input), "")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to start the run")
        await settle(pilot, app)
        [st] = app.states.values()
        assert st.model == "recover" and st.agent is not None and st.agent.source == "demo"
        assert st.task == "What does timeout.log say?"  # the scenario's task, as before
        assert st.limits.budget_usd == 0.5
        await finish(pilot, app)


async def test_an_agent_that_cannot_be_built_says_why_in_the_dialog(tmp_path: Path, provider_url: str) -> None:
    app = make_app(tmp_path, config=load_config(write_agents(tmp_path, provider_url,
                                                             tools='"tether:list_files", "nosuchmodule:tool"')))
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_new_run(pilot, app)
        assert dialog.choice.key == ("agent", "helper") and dialog.choice.problem
        await type_into(pilot, dialog.query_one("#prompt", Input), "anything")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog and not app.states
        assert "no module named 'nosuchmodule'" in dialog.query_one("#error", Static).render().plain
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to close")
        await finish(pilot, app)


# ---- tether console --agent / --config ---------------------------------------------------

@pytest.fixture
def no_agent_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[TetherApp]:
    """The apps ``tether console`` builds, not run (and no provider child started)."""
    apps: list[TetherApp] = []

    def keep(app: TetherApp) -> int:
        apps.append(app)
        return 0

    monkeypatch.setattr(console, "_exit_code", keep)
    monkeypatch.setattr(console, "provider_process", lambda: contextlib.nullcontext(None))
    return apps


async def test_console_agent_preselects_it(tmp_path: Path, provider_url: str, built: list[TetherApp]) -> None:
    path = write_agents(tmp_path, provider_url)
    assert cli_main(["console", "--config", str(path), "--agent", "triage",
                     "--runs-dir", str(tmp_path / "runs"), "--workspace", str(tmp_path / "workspace")]) == 0
    [app] = built
    assert app.config is not None and app.config.path == path and app.harness.config is app.config
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_new_run(pilot, app)
        assert dialog.choice.key == ("agent", "triage")
        assert app.focused is dialog.query_one("#prompt", Input)  # straight to its task
        await pilot.press("enter")  # its own task
        await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to start the run")
        await settle(pilot, app)
        [st] = app.states.values()
        assert st.agent is not None and st.agent.name == "triage" and st.task == TASK
        assert st.status is Status.COMPLETED
        await finish(pilot, app)


def test_console_agent_may_name_a_demo_scenario(tmp_path: Path, no_agent_file: None,
                                                built: list[TetherApp]) -> None:
    assert cli_main(["console", "--agent", "destructive", "--runs-dir", str(tmp_path / "runs")]) == 0
    [app] = built
    assert app.config is None and app.options.agent == "destructive"


def test_console_unknown_agent_is_a_usage_error(tmp_path: Path, provider_url: str, built: list[TetherApp],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = write_agents(tmp_path, provider_url)
    assert cli_main(["console", "--config", str(path), "--agent", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tether: error: unknown agent 'nope'")
    assert "helper, triage" in err and "plan" in err  # the agent file's agents, then the demo's
    assert not built  # the console never opened


def test_console_unknown_agent_without_an_agent_file(tmp_path: Path, no_agent_file: None, built: list[TetherApp],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["console", "--agent", "helper"]) == 2
    err = capsys.readouterr().err
    assert "unknown agent 'helper'" in err and "no agent file" in err and "destructive" in err
    assert not built


def test_console_config_errors_are_one_line(tmp_path: Path, built: list[TetherApp],
                                            capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "tether.toml"
    bad.write_text('[agents.helper]\nmodel = "plan"\nmax_turn = 3\n', encoding="utf-8")
    assert cli_main(["console", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "did you mean 'max_turns'?" in err
    # the same file found as $TETHER_CONFIG, and as ./tether.toml
    monkeypatch.setenv("TETHER_CONFIG", str(bad))
    assert cli_main(["console"]) == 2
    assert "did you mean 'max_turns'?" in capsys.readouterr().err
    monkeypatch.delenv("TETHER_CONFIG")
    monkeypatch.chdir(tmp_path)
    assert cli_main(["console", "--agent", "helper"]) == 2
    assert "did you mean 'max_turns'?" in capsys.readouterr().err
    missing = tmp_path / "missing.toml"
    assert cli_main(["console", "--config", str(missing)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not built


def test_console_agent_that_cannot_be_built_is_refused(tmp_path: Path, provider_url: str,
                                                       built: list[TetherApp],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = write_agents(tmp_path, provider_url, tools='"tether:list_files", "nosuchmodule:tool"')
    assert cli_main(["console", "--config", str(path), "--agent", "helper"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "agents.helper" in err and "nosuchmodule" in err
    assert not built


# ---- runs go on through the harness, whatever endpoint they use ------------------------------

async def capped_helper_run(tmp_path: Path, path: Path) -> str:
    """A run of helper stopped by a one-turn cap, made by a console that then quits."""
    first = make_app(tmp_path, config=load_config(path))
    async with first.run_test(size=SIZE) as pilot:
        rid = first.create_run(NewRunRequest("plan", TASK, limits=Limits(max_turns=1), agent="helper"),
                               run_id="helper-capped")
        await settle(pilot, first)
        assert first.states[rid].status is Status.MAX_TURNS_EXCEEDED
        await pilot.press("q")
    return rid


async def resume_from_the_dialog(pilot: Any, app: TetherApp, rid: str, turns: str) -> None:
    app.select(rid)
    await pilot.pause()
    assert app.check_action("resume", ()) is True
    await pilot.press("R")
    await wait_for(pilot, lambda: isinstance(app.screen, ResumeDialog), "the resume dialog")
    app.screen.query_one("#max-turns", Input).value = turns
    await pilot.press("enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, ResumeDialog), "the resume dialog to close")
    await settle(pilot, app, "the resumed run to stop")


async def test_a_console_without_the_agent_file_resumes_an_agent_run(tmp_path: Path, provider_url: str) -> None:
    """No endpoint check: the harness rebuilds the run's agent (from the file the run names)."""
    rid = await capped_helper_run(tmp_path, write_agents(tmp_path, provider_url))
    second = make_app(tmp_path)  # no agent file, no --base-url: the embedded provider
    async with second.run_test(size=SIZE) as pilot:
        await resume_from_the_dialog(pilot, second, rid, "5")
        st = second.states[rid]
        assert st.status is Status.COMPLETED and st.answer == PLAN_ANSWER
        assert st.base_url == provider_url and st.agent is not None and st.agent.name == "helper"
        await finish(pilot, second)


async def test_a_run_whose_agent_changed_is_refused_in_words_and_left_alone(tmp_path: Path,
                                                                           provider_url: str) -> None:
    path = write_agents(tmp_path, provider_url)
    rid = await capped_helper_run(tmp_path, path)
    write_agents(tmp_path, provider_url, tools='"tether:list_files"')  # read_file is gone
    before = (tmp_path / "runs" / rid / JOURNAL_FILE).read_bytes()
    app = make_app(tmp_path, config=load_config(path))
    seen: list[tuple[str, str | None]] = []
    notify = app.notify

    def recording(message: str, **kw: Any) -> None:
        seen.append((message, kw.get("severity")))
        notify(message, **kw)

    app.notify = recording  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await resume_from_the_dialog(pilot, app, rid, "5")
        [(message, severity)] = [s for s in seen if "read_file" in s[0]]
        assert severity == "error"
        assert "tool read_file is gone" in message and "Nothing was changed" in message
        st = app.states[rid]
        assert st.status is Status.MAX_TURNS_EXCEEDED and st.turns == 1
        assert app.badge_key(rid) == "max_turns_exceeded"  # shown as it was, not as a failure
        assert app.check_action("resume", ()) is True
        await finish(pilot, app)
    assert (tmp_path / "runs" / rid / JOURNAL_FILE).read_bytes() == before


# ---- --base-url / --model: a model at an endpoint, with the file tools ------------------------

async def test_base_url_mode_runs_the_model_typed_with_the_file_tools(tmp_path: Path) -> None:
    def script(t: int, request: Any, body: dict) -> dict:
        if t == 0:
            return completion(tool_calls=[call("list_files", {}, "c0")])
        return completion(f"{body['model']} saw: " + body["messages"][-1]["content"].replace("\n", " "))

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello\n", encoding="utf-8")
    client = ModelClient("http://endpoint/v1", transport=httpx.ASGITransport(app=scripted_app(script)))
    harness = Harness(tmp_path / "runs", tmp_path / "demo", base_url="http://endpoint/v1", client=client, agent_sets=(DEMO,))
    app = still_console(harness=harness, workspace=folder, model="my-model", start=["What is here?"])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app, "the --start run to finish")
        [first] = app.states.values()
        assert first.model == "my-model" and first.task == "What is here?" and first.run_id.startswith("my-model")
        assert first.status is Status.COMPLETED and "notes.txt" in (first.answer or "")
        assert first.workspace == str(folder)  # the agent's folder: --workspace, not the demo's
        dialog = await open_new_run(pilot, app)
        assert list(dialog.choices) == [("model", "default")]
        assert app.focused is dialog.query_one("#prompt", Input)  # the model is filled in: straight to the task
        await pilot.press(*"List it")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to start the run")
        await settle(pilot, app)
        [second] = [s for s in app.states.values() if s.run_id != first.run_id]
        assert second.model == "my-model" and second.task == "List it" and second.status is Status.COMPLETED
        await finish(pilot, app)
    await harness.aclose()
