"""The command line's edges, as a user meets them: numbers that are not numbers, and a
reader that closes the pipe before the command is done writing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.tui.cli import main

from tests.support import cli_here


def tether(*args: str, home: Path, closed_stdout: bool = False) -> subprocess.CompletedProcess:
    """``tether ARGS`` with its own ``TETHER_HOME``: by the CLI's main in this process
    (tests/support.py, cli_here), or, with ``closed_stdout``, in a child process whose
    standard output is a pipe whose reading end is already closed, as ``| head -0`` leaves
    it: every write the command makes meets a closed pipe."""
    env = {**os.environ, "TETHER_HOME": str(home)}
    env.pop("TETHER_STORE", None)
    cmd = [sys.executable, "-m", "tether.tui.cli", *args]
    if not closed_stdout:
        return cli_here(*args, env=env)
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(cmd, env=env, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)


@pytest.mark.parametrize(("args", "words"), [
    (["run", "plan", "--budget", "nan"], "argument --budget: must be a finite number, got 'nan'"),
    (["run", "plan", "--budget", "inf"], "argument --budget: must be a finite number, got 'inf'"),
    (["run", "plan", "--budget", "1e309"], "argument --budget: must be a finite number, got '1e309'"),
    (["run", "plan", "--budget", "-0.5"], "argument --budget: must be more than zero"),
    (["run", "plan", "--budget", "lots"], "argument --budget: not a number: 'lots'"),
    (["run", "plan", "--cancel-after", "nan"], "argument --cancel-after: must be a finite number"),
    (["run", "plan", "--latency-ms=-inf"], "argument --latency-ms: must be a finite number"),
    (["run", "plan", "--max-turns", "2.5"], "argument --max-turns: must be a whole number, got '2.5'"),
    (["run", "plan", "--max-turns", "0"], "argument --max-turns: must be from 1 to"),
    (["run", "plan", "--max-tokens", "9" * 12], "argument --max-tokens: must be from 1 to"),
    (["resume", "x", "--budget", "NaN"], "argument --budget: must be a finite number"),
    (["run", "plan", "--wait-for-decision", "--decision-timeout", "inf"],
     "argument --decision-timeout: must be a finite number"),
    (["watch", "--lines", "-1"], "argument --lines: must be from 0 to"),
    (["export-otel", "x", "--timeout", "nan"], "argument --timeout: must be a finite number"),
    (["provider", "--port", "70000"], "argument --port: must be a port from 0 to 65535"),
    (["eval", "--task-timeout", "inf"], "argument --task-timeout: must be a finite number"),
])
def test_every_numeric_option_is_finite_and_in_range_or_one_line_and_exit_2(tmp_path: Path, monkeypatch, capsys,
                                                                             args, words):
    # In this process: argparse refuses before any command runs (one test below runs the CLI).
    monkeypatch.setenv("TETHER_HOME", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(args)
    out, err = capsys.readouterr()
    command = args[0]
    assert exited.value.code == 2
    [line] = err.strip().splitlines()
    assert line.startswith(f"tether {command}: error: {words}"), line
    assert line.endswith(f"; see tether {command} --help")
    assert "usage:" not in err and out == ""
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir()), "nothing was created"


def test_a_nan_budget_never_reaches_the_journal_or_the_json(tmp_path: Path):
    """What the audit saw: ``--budget nan`` completed a run with no budget and wrote NaN,
    which is not JSON. A real budget is written as a number JSON can read back."""
    assert tether("run", "plan", "--budget", "nan", "--json", home=tmp_path).returncode == 2
    done = tether("run", "plan", "--budget", "$0.5", "--json", "--run-id", "b1", home=tmp_path)
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the output"))
    journal = (tmp_path / "runs" / "b1" / "journal.jsonl").read_text()
    for line in journal.splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the journal"))
    assert '"budget_usd":0.5' in journal


def test_a_closed_pipe_ends_the_output_quietly_and_the_status_stands(tmp_path: Path):
    """``tether show ID | head -1`` and ``tether resume ID | head -2``: no traceback, and the
    exit status is the command's own (a resumed run that completed exits 0)."""
    assert tether("run", "runaway", "--max-turns", "30", "--run-id", "r1", home=tmp_path).returncode == 3
    for args in (["show", "r1"], ["show", "r1", "--json"], ["trace", "r1"], ["runs"], ["runs", "--json"]):
        done = tether(*args, home=tmp_path, closed_stdout=True)
        assert (done.returncode, done.stderr) == (0, ""), (args, done.stderr)

    assert tether("run", "plan", "--max-turns", "1", "--run-id", "p1", home=tmp_path).returncode == 3
    done = tether("resume", "p1", "--max-turns", "10", home=tmp_path, closed_stdout=True)
    assert (done.returncode, done.stderr) == (0, "")
    shown = tether("show", "p1", "--json", home=tmp_path)
    assert json.loads(shown.stdout)["status"] == "completed", "the run went on to its end all the same"

    # A run whose summary nobody reads still ends as it would have, with its own status.
    done = tether("run", "runaway", "--max-turns", "2", "--run-id", "r2", home=tmp_path, closed_stdout=True)
    assert (done.returncode, done.stderr) == (3, "")
