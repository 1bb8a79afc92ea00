"""Small MCP servers for tests/processes/test_mcp.py, written with the SDK's server class.

    python tests/mcp_servers.py KIND [ARGS]      (or python -m tests.mcp_servers KIND)

Kinds:
  echo         tools: echo, fail, crash, slow, picture, numbers, meta_key, spawn_child
  hang         prints to stderr, reads stdin, never answers initialize (exits on EOF)
  fail         prints an error to stderr and exits with code 2 before speaking MCP
  grandchild   echo, after starting a grandchild that sleeps (its pid in $MCP_TEST_DIR/grandchild.pid)
  stubborn     echo, but the process ignores SIGTERM and stays alive after stdin EOF
  http PORT    echo over streamable HTTP on 127.0.0.1:PORT (path /mcp)
  writer       tools: write (a file, with the server's own file I/O; says "wrote" or "refused")

Every server writes its pid to $MCP_TEST_DIR/<kind>-<pid>.pid when MCP_TEST_DIR is set.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations

TEST_DIR = Path(os.environ["MCP_TEST_DIR"]) if os.environ.get("MCP_TEST_DIR") else None


def note(name: str, text: str) -> None:
    if TEST_DIR is not None:
        (TEST_DIR / name).write_text(text)


def echo_server(name: str = "echo") -> MCPServer:
    server = MCPServer(name, subscriptions=False)

    @server.tool(description="Say the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Fail with the given words.", annotations=ToolAnnotations(read_only_hint=True))
    def fail(message: str) -> str:
        raise ToolError(message)

    @server.tool(description="Crash the server in the middle of the call.",
                 annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
    def crash() -> str:
        print("crash tool: about to die", file=sys.stderr, flush=True)
        os._exit(3)

    @server.tool(description="Sleep, writing a marker file if cancelled.")
    async def slow(seconds: float, marker: str) -> str:
        Path(marker + ".started").write_text("started")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            Path(marker).write_text("cancelled")
            raise
        return f"slept {seconds}"

    @server.tool(description="A caption and a tiny image.")
    def picture() -> list:
        return ["a caption", Image(data=b"\x89PNG" + bytes(16), format="png")]

    @server.tool(description="Numbers as structured content only.", structured_output=True)
    def numbers() -> dict[str, int]:
        return {"one": 1, "two": 2}

    @server.tool(description="The request's _meta value of tether/idempotency_key.")
    def meta_key(ctx: Context) -> str:
        meta = ctx.request_context.meta or {}
        return str(dict(meta).get("tether/idempotency_key"))

    @server.tool(description="Start a grandchild that sleeps; returns its pid.")
    def spawn_child() -> str:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        note("spawned.pid", str(child.pid))
        return str(child.pid)

    return server


def writer_server() -> MCPServer:
    server = MCPServer("writer")

    @server.tool(description="Write text to a file, with the server's own file I/O.")
    def write(path: str, text: str) -> str:
        try:
            Path(path).write_text(text)
        except OSError as exc:
            return f"refused {path}: {exc.strerror}"
        return f"wrote {path}"

    return server


def main(argv: list[str]) -> None:
    kind = argv[0] if argv else "echo"
    note(f"{kind}-{os.getpid()}.pid", str(os.getpid()))
    if kind == "echo":
        echo_server().run()
    elif kind == "writer":
        writer_server().run()
    elif kind == "hang":
        print("hang server: listening but never answering", file=sys.stderr, flush=True)
        for _ in sys.stdin:  # read requests, answer none; end on EOF
            pass
    elif kind == "fail":
        print("fail server: loading configuration", file=sys.stderr)
        print("fatal: the database /nowhere/db.sqlite cannot be opened", file=sys.stderr, flush=True)
        sys.exit(2)
    elif kind == "grandchild":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        note("grandchild.pid", str(child.pid))
        echo_server("grandchild").run()
    elif kind == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # A non-daemon thread: after stdin EOF ends the server, the interpreter waits for it forever.
        threading.Thread(target=lambda: time.sleep(3600), daemon=False).start()
        echo_server("stubborn").run()
    elif kind == "http":
        port = int(argv[1])
        echo_server("http").run("streamable-http", host="127.0.0.1", port=port)
    else:
        sys.exit(f"unknown kind {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
