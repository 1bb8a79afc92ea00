"""Fixtures of the real-browser tests: Debian's Chromium driven by Playwright, and a real
``tether serve`` (tests/browser/support.py).

Without Chromium (``apt-get install chromium fonts-symbola``; ``make test`` does it as root)
every test that needs the browser is skipped with one loud reason; in CI (``CI`` set) that
is a failure instead. Playwright's own browser download cannot work here, so it is pointed at
/usr/bin/chromium (or ``TETHER_CHROMIUM``)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.support import CAP_S, CHROMIUM, RecordingProvider, Served, block_the_network, descendants

expect.set_options(timeout=CAP_S * 1000)  # a loaded machine is slow; a test waits for what it expects

PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1400, "height": 900}}


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return (f"the browser tests need Chromium at {CHROMIUM}: apt-get install chromium fonts-symbola "
                "(make test installs them when it runs as root)")
    if importlib.util.find_spec("playwright") is None:
        return "the browser tests need Playwright: pip install -e '.[test]'"
    return None


# One browser per test file (each test has its own context: cookies, storage, pages), not per
# session: sync Playwright keeps an event loop running in the test's thread while it is open,
# and the asyncio tests a worker runs next need that thread. Pytest ends a file's fixtures
# before the first test of another file, so no other file's test runs while it is open.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"Chromium is required in CI: {why}", pytrace=False)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield chromium
        finally:
            chromium.close()
    left = [command for _, command in descendants() if "chrom" in command]
    assert not left, f"Chromium processes left behind: {left}"


@contextlib.contextmanager
def _context(browser: Any, **options: Any) -> Iterator[Any]:
    context = browser.new_context(**options)
    context.set_default_timeout(CAP_S * 1000)
    block_the_network(context)
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def phone(browser: Any) -> Iterator[Any]:
    """A phone-sized page (390×844, touch), offline but for loopback."""
    with _context(browser, **PHONE) as context:
        yield context.new_page()


@pytest.fixture
def desktop(browser: Any) -> Iterator[Any]:
    """A desktop-sized page (1400×900), offline but for loopback."""
    with _context(browser, **DESKTOP) as context:
        yield context.new_page()


@pytest.fixture
def new_phone(browser: Any) -> Iterator[Any]:
    """Another phone's page, for a second person (each its own cookies)."""
    with contextlib.ExitStack() as stack:
        yield lambda: stack.enter_context(_context(browser, **PHONE)).new_page()


@pytest.fixture
def provider() -> Iterator[RecordingProvider]:
    recording = RecordingProvider()
    try:
        yield recording
    finally:
        recording.close()


@pytest.fixture
def served(browser: Any, tmp_path: Path, provider: RecordingProvider) -> Iterator[Served]:
    """``tether serve`` for a browser test (the browser first: without it, nothing starts)."""
    server = Served(tmp_path, provider.url)
    try:
        yield server
    finally:
        server.stop()
