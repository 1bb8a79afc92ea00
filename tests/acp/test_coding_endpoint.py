"""``tether provider --coding``: the offline endpoint ``tether demo --acp`` runs the real coding
agents against, served by hand until signalled, its stdin closed or not."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tether.demo.acp import EDIT_PROMPT, GREET_AFTER
from tether.demo.provider.coding import Task, endpoint_process
from tether.models.processes import free_port, stop_process, wait_until_serving
from tests.support import cli_here

CAP_S = 60.0
OPENCODE_WRITE = {"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}}


def write_call(url: str, prompt: str) -> dict:
    """The arguments of the write the endpoint's model calls for ``prompt`` (OpenCode's tool)."""
    body = {"model": "scripted", "stream": True, "tools": [OPENCODE_WRITE],
            "messages": [{"role": "user", "content": prompt}]}
    with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=CAP_S) as reply:
        assert reply.status_code == 200
        chunks = [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: {")]
    calls = [call for chunk in chunks for choice in chunk["choices"]
             for call in choice["delta"].get("tool_calls") or []]
    assert len(calls) == 1, chunks
    assert calls[0]["function"]["name"] == "write"
    return json.loads(calls[0]["function"]["arguments"])


def test_tether_provider_coding_serves_the_demo_with_its_stdin_closed_until_signalled(tmp_path: Path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    project = tmp_path / "project"
    errors = tmp_path / "stderr"
    with errors.open("wb") as stderr:  # stdin: /dev/null, as `… < /dev/null &` gives it
        proc = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "provider", "--coding", "--port", str(port),
                                 "--workspace", str(project)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        assert wait_until_serving(proc, url, CAP_S) is None, errors.read_text()
        # The demo's first task, in the folder given: the agent's write tool, with an absolute path.
        assert write_call(url, EDIT_PROMPT) == {"filePath": str(project / "greet.py"), "content": GREET_AFTER}
        assert write_call(url, "WRITE notes.txt CONTENT hello") == {"filePath": str(project / "notes.txt"),
                                                                     "content": "hello"}
        assert proc.poll() is None, "it stopped serving when its stdin closed"
        proc.send_signal(signal.SIGTERM)
        proc.wait(CAP_S)
    finally:
        if proc.poll() is None:
            stop_process(proc)
    assert proc.returncode in (0, -signal.SIGTERM), errors.read_text()
    assert "Traceback" not in errors.read_text()


def test_the_demo_endpoint_process_takes_its_tasks_and_is_gone_after_the_block(tmp_path: Path):
    task = Task("Add a licence", path="LICENSE", content="MIT\n", done="Done: LICENSE.")
    with endpoint_process(tasks=[task], workspace=tmp_path) as url:
        assert write_call(url, "please add a licence") == {"filePath": str(tmp_path / "LICENSE"), "content": "MIT\n"}
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/models", timeout=2.0)


@pytest.mark.parametrize(("args", "words"), [
    (["--coding", "--fail", "429@1"], "--fail is the scripted provider's: the coding endpoint (--coding) has none"),
    (["--coding", "--latency-ms", "5"], "--latency-ms is the scripted provider's"),
    (["--tasks", "{tasks}"], "--tasks goes with --coding (the coding agents' endpoint)"),
    (["--workspace", "."], "--workspace goes with --coding"),
    (["--coding", "--tasks", "{tasks}"], "--tasks {tasks}: task 1: unknown key 'ask'; the keys are answer, asks, "
                                         "content, done, path, word_s"),
    (["--coding", "--tasks", "{untyped}"], "--tasks {untyped}: task 0: word_s: input should be a valid number"),
    (["--coding", "--tasks", "{unasked}"], "--tasks {unasked}: task 0: asks is missing"),
    (["--coding", "--tasks", "{missing}"], "--tasks {missing}: cannot read it: No such file or directory"),
    (["--coding", "--tasks", "{garbled}"], "--tasks {garbled}: not valid JSON: EOF while parsing"),
    (["--coding", "--tasks", "{one}"], "--tasks {one}: expected a list of tasks"),
])
def test_tether_provider_refuses_options_that_do_not_go_together_in_words(tmp_path: Path, args, words):
    files = {name: tmp_path / f"{name}.json" for name in ("tasks", "untyped", "unasked", "missing", "garbled", "one")}
    files["tasks"].write_text(json.dumps([{"asks": "x"}, {"asks": "x", "ask": "y"}]))
    files["untyped"].write_text(json.dumps([{"asks": "x", "word_s": "fast"}]))
    files["unasked"].write_text(json.dumps([{"path": "a.txt"}]))
    files["garbled"].write_text("[{")
    files["one"].write_text(json.dumps({"asks": "x"}))
    shown = cli_here("provider", "--port", "0", *[a.format(**files) for a in args])
    assert shown.returncode == 2
    assert shown.stderr.startswith(f"tether: error: {words.format(**files)}"), shown.stderr
    assert len(shown.stderr.strip().splitlines()) == 1
