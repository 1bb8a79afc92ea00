"""``tether eval``: the plumbing against the scripted provider, and the rubrics by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.tui.cli import main
from tether.tui.cli.parser import EVAL_TASKS
from tether.demo.evaluate import TASKS, EvalConfig, markdown, run_eval
from tether.demo.grading import RUBRICS, Grade, asserted
from tether.demo.provider.scenarios import (
    DESTRUCTIVE_DECLINED, PLAN_ANSWER, RECOVER_ANSWER, RECOVER_GIVE_UP, REPEAT_ANSWER)

# Per task: answers graded right; wrong answers with (part of) why; half-right answers (the
# right fact plus a false claim, or a fact short) with the claim that sinks them.
RIGHT = {
    "timeout": ["errors.log mentions a timeout.", "The timeout is in ERRORS.LOG (worker 7).", "`errors.log`",
                "Worker 7 timed out, according to errors.log.", "I read errors.log. It says worker 7 timed out.",
                "The error log shows a timeout.", "errors.log: worker 7 timed out with no response.",
                "errors.log mentions a timeout, but access.log does not.",
                "errors.log mentions a timeout. No other file does.",
                "errors.log mentions a timeout; no other file mentions a timeout.",
                "The timeout is in errors.log, not access.log or notes.txt.", PLAN_ANSWER, RECOVER_ANSWER,
                # docs/lab.md's recorded answer of the research agent
                "Research result: errors.log mentions a timeout: worker 7 timed out after 30000 ms.",
                "errors.log.", "errors.log does.", "It's errors.log.", "Only errors.log mentions a timeout.",
                "The file that mentions a timeout is errors.log.", "Which file mentions a timeout? errors.log.",
                "Actually, errors.log mentions a timeout.",  # "actually" opening the answer takes nothing back
                "errors.log mentions a timeout. Does any other file? No.",  # the "No" answers its question
                "errors.log mentions a timeout — wait time exceeded for worker 7.",
                "access.log mentions a timeout. Scratch that: errors.log does."],  # graded by what it asserts last
    "count": ["There are 4 files.", "Four files: access.log, errors.log, notes.txt, secrets.env.", "FOUR.",
              "The directory contains four files.", "There are 4 files; I could read 3 files.",
              "There are four files, one of which (secrets.env) I cannot read.",
              "There are 4 files, but one file (secrets.env) is not readable.",
              "The directory has 4 files: 2 log files, 1 text file and 1 env file.", "4 files, 3 of them readable.",
              "4 files.", "4", "There are four files in the directory.", "Four files are in the directory.",
              "I count 4 files.", "How many files? 4.",
              "There are 4 files (one of them, secrets.env, is not readable).",
              "There are 3 files. Correction: 4."],
    "notes": ["It says: Remember to rotate your logs.", "notes.txt reminds you to rotate logs.", REPEAT_ANSWER,
              'notes.txt says: "Remember to rotate your logs."', "The note is a reminder about log rotation.",
              "notes.txt says to rotate your logs; errors.log shows a timeout.", "It says to rotate your logs.",
              "Remember to rotate your logs.", "notes.txt reminds you to rotate your logs.",
              "It's a reminder to rotate your logs."],
    "list_and_read": ["access.log has GET /api/orders requests; errors.log says worker 7 timed out; notes.txt says to "
                      "rotate your logs; secrets.env could not be read.",
                      "Files: access.log, errors.log, notes.txt, secrets.env (not readable).\n"
                      "errors.log: timeout errors.\naccess.log: HTTP/1.1 requests.\nnotes.txt: rotate logs.",
                      "access.log: GET and POST requests to /api. errors.log: worker 7 timed out, 502s from the "
                      "payments gateway. notes.txt: Remember to rotate your logs. secrets.env: not readable."],
    "largest": ["errors.log is the largest.", "The largest file is errors.log (987 bytes).", "**errors.log**",
                "errors.log (987 bytes) is the largest!", "errors.log is the largest, access.log is smaller.",
                "access.log is smaller than errors.log, which is the largest.",
                "errors.log is larger than all the other files.",
                "access.log is the second largest; errors.log is the largest.",
                "errors.log is the largest file at 987 bytes, followed by access.log (404 bytes) and notes.txt.",
                "The largest file is errors.log.", "errors.log is the biggest file.", "It's errors.log.",
                "errors.log (987 bytes).", "errors.log is the largest, not access.log.",
                "errors.log is actually the largest.",
                "Which file is the largest? errors.log, at 987 bytes.",
                "errors.log is the largest; I don't know the size of secrets.env."],
    "rotating": ["Yes: notes.txt says to rotate your logs.", "notes.txt", "Yes, notes.txt.", REPEAT_ANSWER,
                 "Yes, there is a file about rotating logs: notes.txt.",
                 "Yes: notes.txt says to rotate your logs, and errors.log shows the rotate-logs job failed.",
                 "notes.txt is about rotating logs.", "Yes. notes.txt.", "Is there one? Yes: notes.txt.",
                 "Yes — notes.txt reminds you to rotate your logs."],
}
WRONG = {
    "timeout": {"access.log mentions a timeout.": "false: access.log mentions a timeout",
                "No file mentions a timeout.": "false: no file mentions a timeout",
                "errors.log does not mention a timeout.": "false: errors.log mentions no timeout",
                "The timeout isn't in errors.log.": "false: errors.log mentions no timeout",
                "errors": "missing: errors.log mentions a timeout",  # a word, not the file
                "I do not know.": "missing: errors.log mentions a timeout"},
    "count": {"There are 3 files.": "false: there are 3 files", "There are five files.": "false: there are 5 files",
              "There are 2 files.": "false: there are 2 files", "Several files.": "missing: there are 4 files",
              PLAN_ANSWER: "missing: there are 4 files",  # worker 7 is no count of files
              "3 readable files (and secrets.env, which I may not read).": "missing: there are 4 files",
              "There are 3 files: access.log, errors.log and notes.txt.": "false: there are 3 files"},
    "notes": {"It says nothing.": "false: notes.txt is empty or unreadable", "Rotate.": "missing: notes.txt says",
              "It is about logs.": "missing: notes.txt says to rotate your logs",
              "notes.txt says not to rotate your logs.": "false: notes.txt says not to rotate logs",
              RECOVER_GIVE_UP: "false: notes.txt is empty or unreadable",
              PLAN_ANSWER: "missing: notes.txt says to rotate your logs"},
    "list_and_read": {"The files are access.log, errors.log, notes.txt and secrets.env.": "missing: errors.log holds",
                      "access.log says worker 7 timed out; errors.log has GET /api requests; notes.txt says to rotate "
                      "logs; secrets.env is unreadable.": "false: access.log holds what errors.log says"},
    "largest": {"access.log is the largest.": "false: access.log is the largest",
                "errors.log is not the largest.": "false: errors.log is not the largest",
                "errors.log is the second largest.": "missing: errors.log is the largest",
                "errors.log, then access.log.": "missing: errors.log is the largest",
                PLAN_ANSWER: "missing: errors.log is the largest", "I cannot tell.": "missing"},
    "rotating": {"No.": "false: no, there is none", "Yes.": "missing: notes.txt is about rotating logs",
                 "There is no file about rotating logs.": "false: no file is about rotating logs",
                 "notes.txt is not about rotating logs.": "false: notes.txt is not about rotating logs",
                 "errors.log mentions rotate-logs.": "missing: notes.txt is about rotating logs",
                 PLAN_ANSWER: "missing: notes.txt is about rotating logs"},
}
HALF_RIGHT = {
    "timeout": {"errors.log and access.log mention a timeout.": "false: access.log mentions a timeout",
                "Both errors.log and notes.txt mention timeouts.": "false: notes.txt mentions a timeout"},
    "count": {"There are 4 files, 2 readable files.": "false: there are 2 readable files",
              "There are 4 files; 3 files are log files.": "false: there are 3 files",
              "There are 4 files. That makes five files.": "false: there are 5 files"},
    "notes": {"It says to rotate your logs and that worker 7 timed out.": "false: notes.txt says what errors.log says",
              "notes.txt says to rotate your logs. It also holds an API key.":
                  "false: notes.txt says what secrets.env says"},
    "list_and_read": {"access.log has GET requests; errors.log says worker 7 timed out; notes.txt says to rotate your "
                      "logs.": "missing: secrets.env is listed",
                      "errors.log says worker 7 timed out; notes.txt says rotate logs; secrets.env is not readable.":
                          "missing: access.log holds",
                      "access.log has GET requests; errors.log shows a 502 but no timeouts; notes.txt says to rotate "
                      "your logs; secrets.env unreadable.": "false: errors.log lacks its errors",
                      "access.log has GET /api requests; errors.log says worker 7 timed out and notes.txt is empty; "
                      "notes.txt says rotate your logs; secrets.env unreadable.": "false: notes.txt is empty"},
    "largest": {"errors.log and access.log are the largest.": "false: access.log is the largest",
                "The largest files are errors.log and access.log.": "false: access.log is the largest"},
    "rotating": {"No. notes.txt says to rotate your logs.": "false: no, there is none",
                 "Yes, notes.txt and access.log.": "false: access.log is about rotating logs",
                 "Yes: notes.txt and secrets.env are about rotating logs.":
                     "false: secrets.env is about rotating logs"},
}

# Per task: answers that hold the right words but do not assert the right fact (issue 31, item 8):
# it is negated, taken back, asked rather than said, or named along with a wrong candidate.
# Most graded right before; all are wrong. The first of timeout, count, largest and rotating
# (and notes) is the issue's own example.
LIST_RIGHT = ("access.log has GET /api/orders requests; errors.log says worker 7 timed out; notes.txt says to "
              "rotate your logs; secrets.env could not be read.")
ADVERSARIAL = {
    "timeout": [
        "It is incorrect that errors.log mentions a timeout.",
        "It is false that errors.log mentions a timeout.",
        "errors.log never mentions a timeout.",
        "Nothing mentions a timeout.",
        "errors.log mentions a timeout. Just kidding.",
        "errors.log mentions a timeout. I lied.",
        "errors.log mentions a timeout — scratch that, no file does.",
        "errors.log mentions a timeout, which is wrong.",
        "errors.log mentions a timeout. That's not true.",
        "errors.log mentions a timeout... NOT!",
        "errors.log mentions a timeout: false.",
        "errors.log mentions a timeout. Or does it?",
        "errors.log mentions a timeout. Actually, access.log does.",
        "errors.log mentions a timeout. Correction: access.log.",
        "errors.log mentions a timeout. No, wait: no file does mention a timeout.",
        "errors.log mentions a timeout, or maybe access.log.",
        "errors.log mentions a timeout. Also notes.txt.",
        "errors.log mentions a timeout, and so does access.log.",
        "errors.log mentions a timeout, as does notes.txt.",
        "Does errors.log mention a timeout?",
        "errors.log? No.",
        "Maybe errors.log?",
        "I don't know.",
        "",
    ],
    "count": [
        "There are 4 files. Just kidding: five.",
        "It is incorrect that there are 4 files.",
        "There are not 4 files.",
        "There aren't four files.",
        "There are 4 files. Actually, there are 3.",
        "There are 4 files. I lied.",
        "There are four files. Scratch that: six.",
        "There are 4 files — correction, 5.",
        "There are 4 files. That's not true.",
        "There are 4 files. Or are there?",
        "Four. Wrong, three.",
        "4 files. Not.",
        "There are 4 files, or maybe 5.",
        "4 or 5 files.",
        "There are 4 files. Or five.",
        "There are 3 readable files, or perhaps 4.",
        "At least 4 files.",
        "How many files are in the directory? 4?",
        "Four files? No, three.",
        "I don't know how many files there are.",
        "",
    ],
    "notes": [
        "Yes, notes.txt. Actually I lied; nothing mentions it.",
        "It is incorrect that notes.txt says to rotate your logs.",
        "It is false that notes.txt says to rotate your logs.",
        "It does not say to rotate your logs.",
        "notes.txt doesn't say to rotate your logs.",
        "notes.txt never says to rotate your logs.",
        "Nothing in notes.txt says to rotate your logs.",
        "notes.txt says to rotate your logs. Just kidding.",
        "notes.txt says to rotate your logs. Actually I lied; it is empty.",
        "It says to rotate your logs. Scratch that: it says to delete them.",
        "It says to rotate your logs — wrong, it says nothing.",
        "notes.txt says to rotate your logs. That's not true.",
        "notes.txt says to rotate your logs, which is false.",
        "notes.txt says to rotate your logs. Not really.",
        "notes.txt says to rotate your logs. Nope.",
        "notes.txt says to rotate your logs — or not.",
        "It says to rotate your logs. Or does it?",
        "It says to rotate your logs. I made that up.",
        "It says to rotate your logs. Correction: it says to delete them.",
        "It says: Remember to rotate your logs. Never mind, I could not read it.",
        "It says to rotate your logs, or maybe that worker 7 timed out.",
        "notes.txt says to rotate your logs? No.",
        "Does it say to rotate your logs?",
        "I don't know what notes.txt says.",
        "",
    ],
    "list_and_read": [
        LIST_RIGHT + " Just kidding.",
        LIST_RIGHT + " Actually I lied; I read nothing.",
        LIST_RIGHT + " Scratch that.",
        LIST_RIGHT + " Correction: access.log is empty.",
        LIST_RIGHT + " None of that is true.",
        LIST_RIGHT + " Wrong.",
        LIST_RIGHT + " I take that back.",
        LIST_RIGHT + " Or is it?",
        LIST_RIGHT + " Not really.",
        LIST_RIGHT + " J/K",
        "access.log has GET requests, errors.log says worker 7 timed out, notes.txt says to rotate your logs — "
        "I lied, I read no file; secrets.env exists.",
        "It is incorrect that access.log has GET /api/orders requests; errors.log says worker 7 timed out; "
        "notes.txt says to rotate your logs; secrets.env could not be read.",
        "It is false that access.log has GET /api/orders requests; errors.log says worker 7 timed out; "
        "notes.txt says to rotate your logs; secrets.env could not be read.",
        "access.log does not have GET requests; errors.log says worker 7 timed out; notes.txt says to rotate "
        "your logs; secrets.env is unreadable.",
        "access.log has GET requests; errors.log never says worker 7 timed out; notes.txt says to rotate your logs; "
        "secrets.env is unreadable.",
        "access.log has GET requests; errors.log says worker 7 timed out; notes.txt says to rotate your logs, "
        "or maybe that worker 7 timed out; secrets.env is unreadable.",
        "Does access.log have GET /api/orders requests? errors.log says worker 7 timed out; notes.txt says to "
        "rotate your logs; secrets.env could not be read.",
        "List the files and read each one?",
        "I don't know.",
        "",
    ],
    "largest": [
        "Is errors.log the largest? Wrong. Access.log is bigger.",
        "It is incorrect that errors.log is the largest.",
        "errors.log isn't the largest.",
        "errors.log is not the largest; access.log is.",
        "Neither errors.log nor access.log is the largest.",
        "errors.log is the largest. Just kidding: access.log is.",
        "errors.log is the largest. I lied.",
        "errors.log is the largest. Scratch that, I don't know.",
        "errors.log is the largest — correction, access.log is the largest.",
        "errors.log is the largest. That's false.",
        "errors.log is the largest. Or is it?",
        "errors.log is the largest. No, wait: notes.txt is the largest.",
        "The largest is errors.log. No, wait: access.log.",
        "errors.log is the largest. Actually, I have no idea.",
        "errors.log or access.log is the largest.",
        "errors.log is the largest, or maybe access.log.",
        "errors.log is the largest. Also notes.txt.",
        "errors.log is the largest, and so is access.log.",
        "errors.log is the largest, as well as access.log.",
        "Which file is the largest?",
        "errors.log is the largest? Not really.",
        "I don't know.",
        "",
    ],
    "rotating": [
        "Yes, notes.txt. Actually I lied; nothing mentions it.",
        "It is incorrect that notes.txt is about rotating logs.",
        "notes.txt isn't about rotating logs.",
        "Not notes.txt.",
        "Nothing is about rotating logs, not even notes.txt.",
        "Yes, notes.txt. Just kidding.",
        "Yes, notes.txt. That's not true.",
        "Yes, notes.txt. I was wrong: no file is.",
        "notes.txt is about rotating logs. Scratch that: no file is.",
        "Yes, notes.txt — wrong, there is none.",
        "Yes, notes.txt. Correction: access.log.",
        "Yes, notes.txt or access.log.",
        "Yes: notes.txt. Also secrets.env.",
        "Yes, notes.txt, and access.log too.",
        "notes.txt? No.",
        "Is notes.txt about rotating logs?",
        "I don't know.",
        "",
    ],
}


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_right_answers_are_graded_right_with_the_facts_they_state(task) -> None:
    for answer in RIGHT[task.name]:
        grade = task.grade(answer)
        assert grade.right and grade.why.startswith("says "), (answer, grade)


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_wrong_answers_are_graded_wrong_saying_why(task) -> None:
    for answer, why in WRONG[task.name].items():
        grade = task.grade(answer)
        assert not grade.right and why in grade.why, (answer, grade)


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_half_right_answers_are_wrong(task) -> None:
    for answer, why in HALF_RIGHT[task.name].items():
        grade = task.grade(answer)
        assert not grade.right and why in grade.why, (answer, grade)
        assert grade.why.count("missing:") + grade.why.count("false:") == 1, (answer, grade)  # that alone sinks it


@pytest.mark.parametrize(("task", "answer"), [(t, a) for t in TASKS for a in ADVERSARIAL[t.name]],
                         ids=[f"{t.name}-{i}" for t in TASKS for i in range(len(ADVERSARIAL[t.name]))])
def test_negated_retracted_unasserted_or_hedged_answers_are_wrong(task, answer: str) -> None:
    grade = task.grade(answer)
    assert not grade.right and grade.why.startswith(("missing:", "false:")), (answer, grade)


def test_every_rubric_faces_adversarial_answers() -> None:
    assert set(ADVERSARIAL) == set(RUBRICS) == {t.name for t in TASKS}
    assert all(len(answers) >= 14 for answers in ADVERSARIAL.values())


@pytest.mark.parametrize(("text", "sentences", "taken_back"), [
    ("there are 4 files. just kidding: five.", ["five."], "just kidding"),
    ("is errors.log the largest? wrong. access.log is bigger.", ["wrong.", "access.log is bigger."], None),
    ("yes, notes.txt. actually i lied; nothing mentions it.", ["nothing mentions it."], "i lied"),
    ("no. notes.txt says to rotate your logs.", ["no.", "notes.txt says to rotate your logs."], None),
    ("errors.log mentions a timeout. any other file? no.", ["errors.log mentions a timeout.", "no."], None),
    ("errors.log mentions a timeout, which is wrong.", [], "which is wrong"),
    ("errors.log is actually the largest.", ["errors.log is actually the largest."], None),
    ("which file? i do not know?", [], None),
], ids=["retraction", "question", "retraction-mid-sentence", "opening-no-stays", "no-answers-a-question",
        "trailing-verdict", "actually-mid-clause", "only-questions"])
def test_what_an_answer_asserts(text: str, sentences: list[str], taken_back: str | None) -> None:
    assert asserted(text) == (sentences, taken_back)


def test_a_retraction_is_named_in_why() -> None:
    grade = RUBRICS["count"].grade("There are 4 files. Just kidding: five.")
    assert grade.why == ("missing: there are 4 files; false: there are 5 files; "
                         'took back what it said before "just kidding"')


def test_no_answer_is_wrong() -> None:
    assert all(task.grade(None) == Grade(False, "no answer") for task in TASKS)


@pytest.mark.parametrize(("answer", "right"), [
    (PLAN_ANSWER, {"timeout"}), (RECOVER_ANSWER, {"timeout"}), (REPEAT_ANSWER, {"notes", "rotating"}),
    (RECOVER_GIVE_UP, set()), (DESTRUCTIVE_DECLINED, set()),
], ids=["plan", "recover", "repeat", "recover_give_up", "destructive"])
def test_every_scripted_answer_is_graded_as_it_deserves(answer: str, right: set[str]) -> None:
    assert {t.name for t in TASKS if t.grade(answer).right} == right


async def test_eval_against_the_scripted_provider(tmp_path: Path) -> None:
    result = await run_eval(EvalConfig(), keep_dir=tmp_path)
    rows = {r["task"]: r for r in result["tasks"]}
    assert list(rows) == [t.name for t in TASKS]
    assert all(r["status"] == "completed" and r["answer"] == PLAN_ANSWER for r in rows.values())
    # The scripted model says the same thing to every task: right only where that fits.
    assert {name for name, r in rows.items() if r["right"]} == {"timeout"}
    assert rows["timeout"]["why"] == "says errors.log mentions a timeout"
    assert rows["largest"]["why"] == "missing: errors.log is the largest"
    assert "| right | why | answer |" in markdown(result) and "missing: errors.log is the largest" in markdown(result)
    totals = result["totals"]
    assert (totals["turns"], totals["tool_runs"], totals["right"], totals["tasks"]) == (18, 12, 1, 6)
    assert totals["mean_turn_ms"] == pytest.approx(totals["wall_ms"] / 18, abs=0.1)
    assert all((Path(r["runs_dir"]) / r["run_id"] / "trace.jsonl").exists() for r in rows.values())
    # A fresh workspace per task: no task sees another's files.
    assert len({r["runs_dir"] for r in rows.values()}) == 6


async def test_eval_grades_another_scripted_model_through_the_same_path(tmp_path: Path) -> None:
    result = await run_eval(EvalConfig(model="repeat"), keep_dir=tmp_path)
    assert {r["task"] for r in result["tasks"] if r["right"]} == {"notes", "rotating"}
    assert result["totals"]["right"] == 2


async def test_task_timeout_stops_through_the_signal() -> None:
    result = await run_eval(EvalConfig(model="slow", task_timeout_s=0.2))
    for row in result["tasks"]:
        assert row["status"] == "interrupted"
        assert "task timeout" in row["answer"]
        assert row["cost_usd"] > 0 and row["right"] is False and row["why"] == "no answer"


def test_cli_eval_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    monkeypatch.delenv("LLM_MODEL", raising=False)
    assert main(["eval", "--json", "--max-turns", "5"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["totals"]["tasks"] == 6 and result["base_url"] == "embedded scripted provider"


def test_cli_eval_runs_the_tasks_it_is_given_and_refuses_an_unknown_one(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    monkeypatch.delenv("LLM_MODEL", raising=False)
    assert main(["eval", "--json", "--task", "largest", "--task", "count"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["task"] for r in result["tasks"]] == ["count", "largest"] and result["totals"]["tasks"] == 2
    assert main(["eval", "--task", "count", "--task", "nosuch"]) == 2
    out = capsys.readouterr()
    assert "no eval task 'nosuch': the tasks are timeout, count, notes, list_and_read, largest, rotating" in out.err
    assert out.out == ""  # refused before any task ran
    assert EVAL_TASKS == tuple(t.name for t in TASKS)  # what --help names, without importing the eval


async def test_unattended_eval_declines_approvals_in_words(tmp_path: Path) -> None:
    result = await run_eval(EvalConfig(model="destructive"), keep_dir=tmp_path)
    for row in result["tasks"]:
        assert (row["status"], row["declined"], row["answer"]) == ("completed", 1, DESTRUCTIVE_DECLINED)
        assert (Path(row["runs_dir"]).parent / "workspace" / "access.log").exists()
    assert result["totals"]["declined"] == 6
