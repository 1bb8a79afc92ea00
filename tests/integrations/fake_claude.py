"""A stand-in for Claude Code's process, for the hook tests that need no real CLI.

It reads hook payloads (JSON, one a line) on stdin and runs Tether's hook for each as a child
process of its own, as Claude Code does: each payload on a thread of its own, so hooks can
run at once (a ``PostToolUse`` while a ``PreToolUse`` waits for a decision). For each hook it
prints one line: ``{"event", "id", "code", "out"}`` (``id``: the payload's ``tool_use_id``
or its event). At the end of stdin it sleeps until it is killed, as a session left open.

Run: ``python -m tests.integrations.fake_claude [HOOK OPTIONS]``; the store comes from
``TETHER_STORE`` or the options.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

MODULE = "tether.integrations.claude_code"


def main() -> None:
    options = sys.argv[1:]
    printing = threading.Lock()

    def run(line: str) -> None:
        payload = json.loads(line)
        done = subprocess.run([sys.executable, "-m", MODULE, *options], input=line.encode(), capture_output=True,
                              check=False)
        said = {"event": payload.get("hook_event_name"), "id": payload.get("tool_use_id") or payload.get(
            "hook_event_name"), "code": done.returncode, "out": done.stdout.decode(), "err": done.stderr.decode()}
        with printing:
            print(json.dumps(said), flush=True)

    for line in sys.stdin:
        if line.strip():
            threading.Thread(target=run, args=(line,), daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
