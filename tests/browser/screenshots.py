"""``python -m tests.browser.screenshots``: the approvals page on a phone (390×844) and the console
in a desktop browser, drawn by Debian's Chromium from a real ``tether serve`` with real runs
waiting, into screenshots/ (``make screenshots`` runs it).

Two calls wait: the demo's ``delete_file`` (what the file holds, first lines), and an agent's
``write_file`` on a file that exists (the diff). The write comes from a one-call endpoint
below: none of the scripted provider's scenarios writes a file."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.browser.support import (
    CHROMIUM, XTERM_HOOK, RecordingProvider, Served, _thread_server, block_the_network, log_in, until,
)

OUT = Path(__file__).resolve().parents[2] / "screenshots"
RUNBOOK = ("# Deploying\n\n1. Build the image.\n2. Push it to the registry.\n3. Restart the service.\n")
NEW_RUNBOOK = ("# Deploying\n\n1. Build the image.\n2. Run the migrations (make migrate).\n"
               "3. Push it to the registry.\n4. Restart the service, one node at a time.\n")


async def _writer(request: Request) -> JSONResponse:
    """One write_file call, then an answer once the tool's result (or a rejection) is back."""
    body = await request.json()
    done = any(m.get("role") == "tool" for m in body.get("messages", []))
    if done:
        message: dict[str, Any] = {"role": "assistant", "content": "Updated docs/deploy.md."}
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_w1", "type": "function", "function": {
                "name": "write_file", "arguments": json.dumps({"path": "docs/deploy.md", "content": NEW_RUNBOOK})}}]}
    return JSONResponse({"id": "w", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
                         "choices": [{"index": 0, "message": message,
                                      "finish_reason": "stop" if done else "tool_calls"}],
                         "usage": {"prompt_tokens": 420, "completion_tokens": 60, "total_tokens": 480}})


def main() -> int:
    if not CHROMIUM.exists():
        print(f"screenshots of tether serve: no Chromium at {CHROMIUM} (apt-get install chromium fonts-symbola)",
              file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    OUT.mkdir(exist_ok=True)
    writer, writer_thread, writer_url = _thread_server(Starlette(routes=[Route("/v1/chat/completions", _writer,
                                                                                methods=["POST"])]))
    provider = RecordingProvider()
    with tempfile.TemporaryDirectory(prefix="tether-") as tmp:
        served = Served(Path(tmp), provider.url)
        try:
            assert served.run("plan", "nightly-report").wait(60) == 0  # it makes the demo's workspace
            assert served.run("destructive", "cleanup-logs").wait(60) == 5  # saved waiting for approval
            (served.ws / "docs").mkdir(exist_ok=True)
            (served.ws / "docs" / "deploy.md").write_text(RUNBOOK)
            agents = Path(tmp) / "tether.toml"
            agents.write_text(f'[agents.docs-writer]\nmodel = "gpt-4.1-mini"\nbase_url = "{writer_url}/v1"\n'
                              f'tools = ["tether:read_file", "tether:write_file"]\nworkspace = "{served.ws}"\n')
            code, _, err = served.tether("run", "--agent", "docs-writer", "--config", str(agents),
                                         "--prompt", "Add the migrations step to the deploy runbook",
                                         "--run-id", "runbook-edit", "--store", str(served.runs))
            assert code == 5, (code, err, _)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
                try:
                    phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2,
                                                is_mobile=True, has_touch=True)
                    block_the_network(phone)
                    page = phone.new_page()
                    log_in(page, served.url, "ana")
                    page.get_by_test_id("approval").nth(1).wait_for()
                    page.screenshot(path=str(OUT / "approvals-phone.png"), full_page=True)  # both cards
                    desktop = browser.new_context(viewport={"width": 1400, "height": 860})
                    block_the_network(desktop)
                    desktop.add_init_script(XTERM_HOOK)
                    page = desktop.new_page()
                    log_in(page, served.url, "ana")
                    page.goto(f"{served.url}/console/")
                    until(lambda: "runbook-edit" in page.evaluate("window.__screen ? window.__screen() : ''"),
                          "the runs in the console")
                    page.wait_for_timeout(1500)  # a still picture: the panes finish painting
                    page.screenshot(path=str(OUT / "console-browser.png"))
                finally:
                    browser.close()
        finally:
            served.stop()
            provider.close()
            writer.should_exit = True
            writer_thread.join(60)
    print(f"wrote {OUT / 'approvals-phone.png'} and {OUT / 'console-browser.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
