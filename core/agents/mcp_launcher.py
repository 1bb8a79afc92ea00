"""Run an MCP server so that nothing it started outlives it.

    python -m tether.agents.mcp_launcher [--grace S] [--kill-after S] [--parent PID]
                                         [--sandbox BACKEND --write PATH...] -- COMMAND [ARGS...]

Tether starts every stdio MCP server through this launcher. The MCP SDK already puts a
server in its own process group and, on exit, closes its stdin, waits, then SIGTERMs and
SIGKILLs the group. Two leaks remain (measured with mcp 2.3):

* a grandchild of a server that exits cleanly is orphaned (the SDK sees its server gone
  and never signals the group);
* if the harness is SIGKILLed, a server that ignores EOF on stdin runs forever.

The launcher closes both (Linux; stdlib only):

1. It marks itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``), so every orphaned
   descendant of the server is reparented to it rather than to init, and it asks for
   SIGTERM when its own parent dies (``PR_SET_PDEATHSIG``): a SIGKILLed harness takes
   it down, through the same clean-up as any other end. ``--parent PID`` names the process
   that started it, so a parent that died before the flag was set is noticed too.
2. It starts the real server with ``PR_SET_PDEATHSIG=SIGKILL`` (set in the child before
   exec), sharing the launcher's stdin, stdout and stderr, then lets go of its own copies
   of stdin and stdout so the server's end of the pipes is the only one (EOF and a crash are
   seen at once).
3. SIGTERM, SIGINT and SIGHUP are forwarded to the server; a server still running
   ``--kill-after`` seconds later is SIGKILLed (before the SDK's own 2 s escalation).
4. When the server has ended, every remaining descendant (found in /proc) gets SIGTERM,
   ``--grace`` seconds, then SIGKILL, and is reaped. The launcher exits with the server's
   exit code (128 + N for a server killed by signal N).

5. ``--sandbox bubblewrap|landlock`` with ``--write PATH`` (repeated) runs the server in the
   OS sandbox ``tether.agents.sandbox`` decides: under bubblewrap, or restricted by Landlock in
   the child before exec (the ``landlock`` package, imported only then). The launcher itself
   stays outside, so it can still reap everything.

Messages of its own go to stderr (the server's log), prefixed ``tether.agents.mcp_launcher:``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from types import FrameType
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

_ME = "tether.agents.mcp_launcher"
_USAGE = (f"usage: python -m {_ME} [--grace S] [--kill-after S] [--parent PID] "
          "[--sandbox bubblewrap|landlock --write PATH...] -- COMMAND [ARGS...]")
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_libc: ctypes.CDLL | None = None


def _prctl(option: int, value: int) -> bool:
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        return _libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: the launcher still forwards and cleans up
        return False


def _say(text: str) -> None:
    try:
        os.write(2, f"{_ME}: {text}\n".encode(errors="replace"))
    except OSError:
        pass


def _children_map() -> dict[int, list[int]]:
    """ppid -> pids, from /proc (processes that vanish while being read are skipped)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return children
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) < 2:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (zombies included), parents before children."""
    children = _children_map()
    found: list[int] = []
    todo = list(children.get(pid, ()))
    while todo:
        child = todo.pop(0)
        found.append(child)
        todo.extend(children.get(child, ()))
    return found


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _reap_nohang() -> bool:
    """Reap every child that has ended; False once the launcher has no child left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _live(pids: list[int]) -> list[int]:
    """Those of ``pids`` that still exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
        if state not in (b"Z", b"X"):
            alive.append(pid)
    return alive


def clean_up(grace: float) -> None:
    """SIGTERM every descendant, wait up to ``grace`` seconds, SIGKILL what is left, and
    reap them all (a zombie left behind would be reparented to init, which may never reap
    it in a container). Bounded: a process that cannot die (stuck in the kernel) is left
    after 5 s more."""
    me = os.getpid()
    pids = _live(descendants(me))
    if pids:
        _signal_all(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while pids and time.monotonic() < deadline:
            time.sleep(0.01)
            _reap_nohang()
            pids = _live(descendants(me))
    deadline = time.monotonic() + 5.0
    while pids and time.monotonic() < deadline:
        _signal_all(pids, signal.SIGKILL)  # again each round: it also reaches late forks
        time.sleep(0.005)
        _reap_nohang()
        pids = _live(descendants(me))
    if pids:
        _say(f"processes {pids} did not die; leaving them")
        return
    deadline = time.monotonic() + 1.0
    while _reap_nohang() and time.monotonic() < deadline:
        time.sleep(0.002)


def bubblewrap_argv(writable: list[str], command: list[str], cwd: str) -> list[str]:
    """``command`` under bubblewrap: ``/`` read-only, a fresh ``/dev`` and ``/proc``, the
    writable folders bound over them. No network namespace: the agent must reach its model
    endpoint on the host's loopback. ``--die-with-parent`` ties it to the launcher."""
    argv = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in writable:
        argv += ["--bind", path, path]
    return [*argv, "--die-with-parent", "--chdir", cwd, "--", *command]


_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm")
"""What a process sandboxed by Landlock may still write besides its folders (bubblewrap gives
it a fresh ``/dev`` of its own instead)."""


def landlock_ruleset(writable: list[str]) -> Any:
    """A Landlock ruleset that handles every kind of write and allows them beneath ``writable``
    (and on the usual devices): applied in the server's process before it executes, with
    ``.apply()``. Reading and executing stay unrestricted."""
    # lazy: optional dependency: the OS sandbox's second backend, where bubblewrap cannot run
    from landlock import FSAccess, Ruleset

    reads = FSAccess.EXECUTE | FSAccess.READ_FILE | FSAccess.READ_DIR
    writes = FSAccess.all() & ~reads
    if hasattr(FSAccess, "IOCTL_DEV"):
        writes &= ~FSAccess.IOCTL_DEV  # a terminal's ioctls are not writes to the file system
    file_writes = writes & FSAccess.all_file()
    ruleset = Ruleset(restrict_rules=writes)
    for path in writable:
        ruleset.allow(path, rules=writes)
    for device in _DEVICES:
        if os.path.exists(device):
            ruleset.allow(device, rules=writes if os.path.isdir(device) else file_writes)
    return ruleset


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parent = os.getppid()
    grace, kill_after = 0.5, 1.0
    sandbox: str | None = None
    writable: list[str] = []
    while argv and argv[0] != "--":
        option = argv.pop(0)
        try:
            if option == "--grace":
                grace = float(argv.pop(0))
            elif option == "--kill-after":
                kill_after = float(argv.pop(0))
            elif option == "--parent":
                parent = int(argv.pop(0))
            elif option == "--sandbox":
                sandbox = argv.pop(0)
                if sandbox not in ("bubblewrap", "landlock"):
                    raise ValueError(sandbox)
            elif option == "--write":
                writable.append(argv.pop(0))
            else:
                raise ValueError(option)
        except (IndexError, ValueError):
            _say(f"{_USAGE} (bad option {option!r})")
            return 2
    command = argv[1:]
    if not command:
        _say(_USAGE)
        return 2

    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the flag was set (--parent: who started us)
        _say("the process that started the launcher has already ended")
        return 1

    ruleset = None
    if sandbox == "bubblewrap":
        command = bubblewrap_argv(writable, command, os.getcwd())
    elif sandbox == "landlock":
        try:
            ruleset = landlock_ruleset(writable)  # made here; applied in the child, before exec
        except Exception as exc:  # the landlock package's errors, and OSError for a missing folder
            _say(f"cannot sandbox {command[0]!r} with Landlock: {exc}")
            return 126

    server: subprocess.Popen[bytes] | None = None
    stopping = False
    early: int | None = None  # a signal that came before the server was started

    def kill_server(signum: int, frame: FrameType | None) -> None:
        if server is not None and server.returncode is None:
            try:
                os.kill(server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping, early
        if server is None:
            early = signum
            return
        try:
            os.kill(server.pid, signum)
        except ProcessLookupError:
            pass
        if not stopping:
            stopping = True
            signal.setitimer(signal.ITIMER_REAL, max(kill_after, 0.001))

    signal.signal(signal.SIGALRM, kill_server)
    for signum in _FORWARDED:
        signal.signal(signum, forward)

    def in_child() -> None:
        # Runs in the forked child before exec: die with the launcher, default signal handling.
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        for signum in (*_FORWARDED, signal.SIGALRM):
            signal.signal(signum, signal.SIG_DFL)
        if os.getppid() != launcher:
            os._exit(1)
        if ruleset is not None:
            ruleset.apply()  # type: ignore[attr-defined]  # an error here fails the Popen below

    launcher = os.getpid()
    try:
        server = subprocess.Popen(command, preexec_fn=in_child)
    except OSError as exc:
        _say(f"cannot start {command[0]!r}: {exc.strerror or exc}")
        return 127
    except subprocess.SubprocessError as exc:  # the Landlock restriction failed in the child
        _say(f"cannot sandbox {command[0]!r}: {exc}")
        return 126
    if early is not None:
        forward(early, None)

    # Let go of our copies of the pipes: the server's end is then the only one.
    try:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass

    code: int | None = None
    while code is None:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            code = server.returncode if server.returncode is not None else 1
            break
        if pid == server.pid:
            code = os.waitstatus_to_exitcode(status)
            server.returncode = code
    signal.setitimer(signal.ITIMER_REAL, 0)
    for signum in _FORWARDED:
        signal.signal(signum, signal.SIG_IGN)  # cleaning up now; a second Stop changes nothing
    if code < 0:
        if not stopping:  # a signal we forwarded (or our SIGKILL after it) needs no words
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            _say(f"the server ({os.path.basename(command[0])}) was killed by signal {name}")
        code = 128 - code
    elif code != 0 and not stopping:
        _say(f"the server ({os.path.basename(command[0])}) exited with code {code}")
    clean_up(grace)
    return code


if __name__ == "__main__":
    sys.exit(main())
