"""The coverage-guided targets of ``make fuzz`` (:mod:`tests.fuzz.targets`) stay runnable: each
is set up and given its seed inputs (which must pass) and a few more, as atheris would."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from tests.fuzz.targets import TARGETS

# The web forms' target keeps a server running for the life of its process (atheris never
# returns): tests/fuzz/test_web_forms.py covers the same handlers here.
IN_PROCESS = sorted(name for name in TARGETS if name != "web_forms")


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> dict:
    made = {}
    for name in IN_PROCESS:
        scratch = tmp_path_factory.mktemp(name)
        made[name] = TARGETS[name].setup(scratch)
    return made


@pytest.mark.parametrize("name", IN_PROCESS)
def test_a_target_passes_its_seeds(targets: dict, name: str) -> None:
    one, seeds = targets[name]
    assert seeds
    for seed in seeds:
        one(seed)


@given(st.sampled_from(IN_PROCESS), st.binary(max_size=300))
def test_a_target_takes_any_bytes(targets: dict, name: str, data: bytes) -> None:
    one, seeds = targets[name]
    one(data)
    one(seeds[0][: len(data)] + data)


def test_a_target_leaves_the_process_as_it_found_it(targets: dict) -> None:
    """The agent file's target refuses imports while it reads an input; the tests that share
    its process still import their own modules by reference afterwards."""
    from tether.agents.agent import resolve_ref

    one, seeds = targets["agent_file"]
    one(seeds[0])
    assert resolve_ref("tests.fuzz.targets:TARGETS") is TARGETS
