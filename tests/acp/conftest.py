"""Fixtures for the ACP tests: a workspace, the fake agent's command, and a check that no
process of a session is left."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


@pytest.fixture
def acp_workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


@pytest.fixture
def fake_env() -> dict[str, str]:
    """What the fake agent needs besides the trimmed default environment (only a PYTHONPATH
    the test run itself was given)."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}


def fake_agent(mode: str) -> list[str]:
    return [sys.executable, str(FAKE_AGENT), mode]
