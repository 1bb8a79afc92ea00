"""Follow-ups: the operator's next words to a run that is not running (``tether resume RUN
--message TEXT``). A conversation, not only a task: a completed run goes on from them."""

from __future__ import annotations

import pytest

from tether.harness import Harness
from tether.vocab.state import NeedsApproval, StateError, Status
from tether.demo.agents import DEMO


async def test_a_completed_run_goes_on_from_a_follow_up(tmp_path):
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as harness:
        first = (await harness.start(harness.agent_named("plan"), None)).state
        assert first.status is Status.COMPLETED
        turns = first.turns
        again = (await harness.run(first.run_id, message="Now say it in one line.")).state
    assert again.status is Status.COMPLETED
    assert again.turns == turns + 1, "the model was asked once more"
    users = [m["content"] for m in again.messages if m["role"] == "user"]
    assert users[-1] == "Now say it in one line."
    assert again.messages[-1]["role"] == "assistant"


async def test_a_follow_up_is_refused_in_words_where_it_cannot_go(tmp_path):
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as harness:
        waiting = (await harness.start(harness.agent_named("destructive"), None)).state
        assert isinstance(waiting.interruption, NeedsApproval)
        with pytest.raises(StateError, match="still waiting for its result \\(delete_file\\): approve, reject"):
            await harness.run(waiting.run_id, message="never mind")
        with pytest.raises(StateError, match="a follow-up needs words"):
            await harness.run(waiting.run_id, message="   ")
        after = harness.load(waiting.run_id)
    assert "never mind" not in str(after.messages), "a refused follow-up changes nothing"
    assert isinstance(after.interruption, NeedsApproval)


async def test_an_ended_run_says_how_to_follow_up(tmp_path):
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as harness:
        done = (await harness.start(harness.agent_named("plan"), None)).state
        with pytest.raises(StateError, match=f"tether resume {done.run_id} --message TEXT"):
            await harness.run(done.run_id)
