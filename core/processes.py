"""Helper processes on loopback (a provider, a llama.cpp server): a port, and a clean stop."""

from __future__ import annotations

import socket
import subprocess


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
