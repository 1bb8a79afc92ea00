"""Helper processes on loopback (a provider, a llama.cpp server): a port, and a clean stop."""

from __future__ import annotations

import socket
import subprocess
import time

import httpx


def free_port() -> int:
    """A loopback port nobody is listening on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """Ask the process to stop; kill it if it has not within ``grace_s``; reap it either way."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_until_serving(proc: subprocess.Popen[bytes], base_url: str, timeout_s: float,
                       interval_s: float = 0.05) -> str | None:
    """Poll ``{base_url}/models`` until it answers 200. Returns None once it does, or why it
    never will: the process exited (stopping early) or the time ran out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                return None
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            return f"exited with code {proc.returncode}"
        if time.monotonic() > deadline:
            return f"did not answer within {timeout_s:g} s"
        time.sleep(interval_s)
