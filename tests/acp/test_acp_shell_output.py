"""A shell call's output, live (issue 40): Tether advertises ``_meta.terminal_output``, and the
output and exit code an agent reports in its updates' ``_meta`` (as Codex's adapter does) are
in the trace as they come (``tool_output``) and are the call's result in the transcript."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tether.acp.events import ShellOutput
from tether.acp.translate import shell_output
from tether.harness import Harness
from tether.demo.agents import DEMO
from tether.store.trace import read_trace
from tether.vocab.state import Status
from tether.vocab.wording import describe
from tests.acp.test_acp_runs import agent


def test_terminal_output_and_exit_in_an_updates_meta_are_the_calls_output() -> None:
    assert shell_output("c1", {"terminal_info": {"terminal_id": "c1"}}) == []
    assert shell_output("c1", {"terminal_output": {"terminal_id": "c1", "data": "ok\n"}}) == [ShellOutput("c1", "ok\n")]
    assert shell_output("c1", {"terminal_exit": {"terminal_id": "c1", "exit_code": 2, "signal": None}}) == [
        ShellOutput("c1", exited=True, exit_code=2)]
    assert shell_output("c1", {"terminal_exit": {"exit_code": None, "signal": "SIGKILL"}}) == [
        ShellOutput("c1", exited=True, signal="SIGKILL")]
    assert shell_output("c1", None) == [] and shell_output("c1", {"terminal_output": "junk"}) == []


async def test_a_shell_calls_output_and_exit_code_are_in_the_trace_and_transcript(tmp_path: Path,
                                                                                   acp_workspace: Path) -> None:
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace, "shell"), "run the tests")
        outcome = await asyncio.wait_for(harness.run(state.run_id, wait_for_decision=0), 60)
    final = outcome.state
    assert final.status is Status.COMPLETED, final.error
    result = next(m for m in final.messages if m.get("role") == "tool" and m.get("tool_call_id") == "sh_1")
    assert result["content"] == "ok 1 parse\nok 2 render\n[exit code 0]"
    trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    kinds = [r["kind"] for r in trace]
    outputs = [r for r in trace if r["kind"] == "tool_output"]
    assert [(r["data"], r["exited"], r["exit_code"]) for r in outputs] == [
        ("ok 1 parse\n", False, None), ("ok 2 render\n", False, None), ("", True, 0)]
    assert kinds.index("tool_start") < kinds.index("tool_output") < kinds.index("tool_result"), "live, as it ran"
    said = [describe(r, timings=False) for r in outputs]  # as tether watch and the console's trace word them
    assert said == ["make test: ok 1 parse", "make test: ok 2 render", "make test: exit code 0"], said
