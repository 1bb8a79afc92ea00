"""The scripted provider over HTTP on loopback, recording every request it is sent."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tether.demo.provider.server import running_app

from tests.integrations.programs import Recording


@pytest.fixture
async def provider() -> AsyncIterator[Recording]:
    recording = Recording()
    async with running_app(recording) as url:
        recording.url = url
        yield recording
