"""The built-in tools: behaviour, the ledger, cancellation, and hostile paths.

Every hostile path is its own test, run through the tool that would act on it, and
each checks afterwards that nothing outside the workspace was read or touched.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tether.vocab.cancel import CancelSignal, RunCancelled
from tether.vocab.ledger import Ledger, LedgerEntry
from tether.agents.tools.base import Tool, ToolContext
from tether.agents.tool_errors import InvalidArguments, NotFound, PathRefused, PermissionDenied, ToolError
from tether.agents.tools.builtin import (
    DeleteFile,
    ListFiles,
    ReadFile,
)
from tether.demo.agents import ScanArchive
from tether.agents.sample import ensure_sample
from tether.agents.workspace import Workspace

OUTSIDE_TEXT = "OUTSIDE SECRET\n"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """The sample workspace, plus an outside tree and symlinks that try to reach it."""
    workspace = ensure_sample(tmp_path / "ws")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(OUTSIDE_TEXT)
    (tmp_path / "ws2").mkdir()  # a sibling whose name starts with the root's name
    (tmp_path / "ws2" / "file.txt").write_text(OUTSIDE_TEXT)
    root = workspace.root
    (root / "link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    (root / "linkdir").symlink_to(tmp_path / "outside")
    (root / "to_ws2").symlink_to(tmp_path / "ws2")
    (root / "dangling").symlink_to(tmp_path / "outside" / "nothing-here.txt")
    return workspace


def make_ctx(
    ws: Workspace,
    call_id: str = "c1",
    signal: CancelSignal | None = None,
    progress: Callable[[str], None] | None = None,
) -> ToolContext:
    return ToolContext(
        run_id="r1",
        call_id=call_id,
        signal=signal or CancelSignal(),
        progress=progress or (lambda label: None),
        workspace=ws,
        ledger=Ledger(ws.root.parent / "runs" / "ledger.jsonl"),
    )


def snapshot(top: Path) -> dict[str, str | bytes]:
    """Every file's bytes and every symlink's target under ``top``, links not followed."""
    seen: dict[str, str | bytes] = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder) / name
            if path.is_symlink():
                seen[str(path)] = os.readlink(path)
            elif path.is_file():
                seen[str(path)] = path.read_bytes()
    return seen


# --- hostile paths -------------------------------------------------------------------

HOSTILE = [
    pytest.param("../etc/passwd", "climbs out", id="dotdot-etc-passwd"),
    pytest.param("../outside/secret.txt", "climbs out", id="dotdot-outside-file"),
    pytest.param("a/../../x", "climbs out", id="dotdot-nested"),
    pytest.param("a/../../outside/secret.txt", "climbs out", id="dotdot-nested-outside-file"),
    pytest.param("{tmp}/outside/secret.txt", "is absolute", id="absolute-outside-file"),
    pytest.param("../ws2/file.txt", "climbs out", id="sibling-prefix-dotdot"),
    pytest.param("to_ws2/file.txt", "symbolic link", id="sibling-prefix-symlinked-dir"),
    pytest.param("link.txt", "symbolic link", id="symlink-file-leaves-root"),
    pytest.param("linkdir/secret.txt", "symbolic link", id="symlinked-dir-existing-file"),
    pytest.param("linkdir/new.txt", "symbolic link", id="symlinked-dir-new-file"),
    pytest.param("linkdir/../outside/secret.txt", "symbolic link", id="symlinked-dir-then-dotdot"),
    pytest.param("linkdir/..", "symbolic link", id="symlinked-dir-dotdot"),
    pytest.param("dangling", "symbolic link", id="dangling-symlink-leaves-root"),
    pytest.param("notes.txt\x00../../outside/secret.txt", "NUL byte", id="nul-byte"),
    pytest.param("a/" * 2100 + "notes.txt", "limit is 4096", id="very-long-path"),
    pytest.param("x" * 300, "limit is 255", id="very-long-component"),
    pytest.param("", "empty", id="empty-path"),
    pytest.param(42, "expected a string, got int", id="non-string-int"),
    pytest.param(None, "expected a string, got NoneType", id="non-string-null"),
    pytest.param(["notes.txt"], "expected a string, got list", id="non-string-list"),
    pytest.param("\ud800.txt", "not valid text", id="unpaired-surrogate"),
]


def _hostile(path: Any, tmp_path: Path) -> Any:
    return path.replace("{tmp}", str(tmp_path)) if isinstance(path, str) else path


async def _refused(tool: Tool, path: Any, fragment: str, ws: Workspace, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    with pytest.raises(PathRefused) as refused:
        await tool.run({"path": path}, make_ctx(ws))
    message = str(refused.value)
    assert message.startswith("path refused: ")
    assert fragment in message
    assert OUTSIDE_TEXT.strip() not in message
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(("path", "fragment"), HOSTILE)
async def test_read_file_refuses(path: Any, fragment: str, ws: Workspace, tmp_path: Path) -> None:
    await _refused(ReadFile(), _hostile(path, tmp_path), fragment, ws, tmp_path)


async def test_read_file_refuses_absolute_etc_passwd(ws: Workspace, tmp_path: Path) -> None:
    await _refused(ReadFile(), "/etc/passwd", "is absolute", ws, tmp_path)


@pytest.mark.parametrize(("path", "fragment"), HOSTILE)
async def test_delete_file_refuses(
    path: Any, fragment: str, ws: Workspace, tmp_path: Path
) -> None:
    await _refused(DeleteFile(), _hostile(path, tmp_path), fragment, ws, tmp_path)


@pytest.mark.parametrize("tool", [ReadFile(), DeleteFile()], ids=["read_file", "delete_file"])
@pytest.mark.parametrize("path", [".", "sub"], ids=["dot", "subdirectory"])
async def test_directories_are_not_files(
    tool: Tool, path: str, ws: Workspace, tmp_path: Path
) -> None:
    (ws.root / "sub").mkdir()
    before = snapshot(tmp_path)
    with pytest.raises(ToolError) as refused:
        await tool.run({"path": path}, make_ctx(ws))
    assert not isinstance(refused.value, PathRefused)
    assert "is a directory" in str(refused.value)
    assert snapshot(tmp_path) == before


# --- list_files and read_file --------------------------------------------------------


async def test_list_files_names_and_sizes(ws: Workspace) -> None:
    text = await ListFiles().run({}, make_ctx(ws))
    lines = text.splitlines()
    sizes = {line.split()[0]: int(line.split()[1]) for line in lines[:-1]}
    assert sizes == {n: (ws.root / n).stat().st_size for n in sizes}
    assert set(sizes) == {"access.log", "errors.log", "notes.txt", "secrets.env"}
    assert max(sizes, key=sizes.__getitem__) == "errors.log"
    assert "access.log  404 bytes" in lines
    secrets_line = next(line for line in lines if line.startswith("secrets.env"))
    assert secrets_line.endswith("(not readable)")
    assert lines[-1] == "4 files"


async def test_read_file_returns_exact_text(ws: Workspace) -> None:
    assert await ReadFile().run({"path": "notes.txt"}, make_ctx(ws)) == (
        "Remember to rotate your logs.\n"
    )


async def test_read_file_missing_says_call_list_files(ws: Workspace) -> None:
    with pytest.raises(NotFound) as missing:
        await ReadFile().run({"path": "timeout.log"}, make_ctx(ws))
    assert str(missing.value) == "no such file: timeout.log. Call list_files to see what exists."


async def test_read_file_refuses_secrets_although_the_process_can_read_it(ws: Workspace) -> None:
    assert os.access(ws.root / "secrets.env", os.R_OK)
    with pytest.raises(PermissionDenied) as denied:
        await ReadFile().run({"path": "secrets.env"}, make_ctx(ws))
    assert str(denied.value) == "permission denied: secrets.env may not be read by this agent"
    assert denied.value.permanent


async def test_read_file_refuses_a_symlink_to_secrets(ws: Workspace) -> None:
    (ws.root / "alias.txt").symlink_to(ws.root / "secrets.env")
    with pytest.raises(PermissionDenied):
        await ReadFile().run({"path": "alias.txt"}, make_ctx(ws))


async def test_read_file_without_path_is_invalid(ws: Workspace) -> None:
    with pytest.raises(InvalidArguments, match="missing argument 'path'"):
        await ReadFile().run({}, make_ctx(ws))


async def test_read_file_replaces_invalid_utf8_and_truncates(ws: Workspace) -> None:
    class SmallRead(ReadFile):
        max_bytes = 4

    (ws.root / "bin.dat").write_bytes(b"ab\xffcdef")
    assert await ReadFile().run({"path": "bin.dat"}, make_ctx(ws)) == "ab\ufffdcdef"
    text = await SmallRead().run({"path": "bin.dat"}, make_ctx(ws))
    assert text.startswith("ab\ufffdc\n[truncated: only the first 4 bytes of bin.dat")


# --- delete_file and the ledger ------------------------------------------------------

ACCESS_LOG_INTENT = {"tool": "delete_file", "path": "access.log", "size": 404}


async def test_delete_file_deletes_once_and_the_key_replays_the_result(ws: Workspace) -> None:
    size = (ws.root / "access.log").stat().st_size
    first = await DeleteFile().run({"path": "access.log"}, make_ctx(ws))
    assert first == f"Deleted access.log ({size} bytes)."
    assert not (ws.root / "access.log").exists()
    (ws.root / "access.log").write_text("recreated by someone else")
    again = await DeleteFile().run({"path": "access.log"}, make_ctx(ws))
    assert again == first  # the model reads what it read the first time
    assert (ws.root / "access.log").read_text() == "recreated by someone else"


async def test_delete_file_other_call_id_is_another_write(ws: Workspace) -> None:
    await DeleteFile().run({"path": "access.log"}, make_ctx(ws, call_id="c1"))
    with pytest.raises(NotFound, match="Call list_files"):
        await DeleteFile().run({"path": "access.log"}, make_ctx(ws, call_id="c2"))


async def test_delete_file_settles_a_begun_entry_whose_file_is_gone(ws: Workspace) -> None:
    ctx = make_ctx(ws)
    ctx.ledger.begin(ctx.idempotency_key, ACCESS_LOG_INTENT)
    (ws.root / "access.log").unlink()  # the crash came after the unlink, before the record
    result = await DeleteFile().run({"path": "access.log"}, ctx)
    assert result.startswith("Deleted access.log (404 bytes).")
    entry = ctx.ledger.lookup(ctx.idempotency_key)
    assert entry is not None and entry.status == "done"
    assert entry.result == "Deleted access.log (404 bytes)."


async def test_delete_file_performs_a_begun_entry_whose_file_remains(ws: Workspace) -> None:
    ctx = make_ctx(ws)
    ctx.ledger.begin(ctx.idempotency_key, ACCESS_LOG_INTENT)
    assert await DeleteFile().run({"path": "access.log"}, ctx) == "Deleted access.log (404 bytes)."
    assert not (ws.root / "access.log").exists()


async def test_delete_file_key_cannot_be_reused_for_another_path(ws: Workspace) -> None:
    await DeleteFile().run({"path": "access.log"}, make_ctx(ws))
    with pytest.raises(ToolError, match="recorded as deleting access.log, not notes.txt"):
        await DeleteFile().run({"path": "notes.txt"}, make_ctx(ws))
    assert (ws.root / "notes.txt").exists()


async def test_delete_file_refuses_secrets(ws: Workspace) -> None:
    with pytest.raises(PermissionDenied, match="secrets.env may not be deleted by this agent"):
        await DeleteFile().run({"path": "secrets.env"}, make_ctx(ws))
    assert (ws.root / "secrets.env").exists()


def test_ledger_lookup_of_unknown_key_or_missing_file(tmp_path: Path) -> None:
    assert Ledger(tmp_path / "none.jsonl").lookup("r:c") is None


def test_ledger_tolerates_a_torn_last_line_and_appends_after_it(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.begin("r:c1", {"path": "a"})
    with open(ledger.path, "ab") as handle:
        handle.write(b'{"key": "r:c1", "status": "do')  # killed mid-append
    entry = ledger.lookup("r:c1")
    assert entry is not None and entry.status == "begun" and entry.intent == {"path": "a"}
    ledger.complete("r:c1", "Deleted a.")
    assert ledger.lookup("r:c1") == LedgerEntry("r:c1", "done", {"path": "a"}, "Deleted a.")
    assert ledger.lookup("r:c2") is None


# --- scan_archive ----------------------------------------------------------------------


class FastScan(ScanArchive):
    seconds = 0.0


class ShortScan(ScanArchive):
    seconds = 0.6


async def test_scan_archive_full_run_reports_every_200(ws: Workspace) -> None:
    labels: list[str] = []
    result = await FastScan().run({}, make_ctx(ws, progress=labels.append))
    assert result == "scanned 1200 of 1200 entries; 3 archives older than 30 days"
    assert labels == [f"scanned {n} of 1200 entries" for n in range(200, 1201, 200)]


class ChattyScan(ScanArchive):
    seconds = 0.0
    total_entries = 95
    report_every = 5
    batch = 20  # four report points per batch, and a last batch of 15


async def test_scan_archive_reports_every_point_passed_even_within_a_batch(ws: Workspace) -> None:
    labels: list[str] = []
    await ChattyScan().run({}, make_ctx(ws, progress=labels.append))
    assert labels == [f"scanned {n} of 95 entries" for n in range(5, 96, 5)]


async def test_scan_archive_stops_when_the_signal_fires(ws: Workspace) -> None:
    signal = CancelSignal()
    labels: list[str] = []
    two_reports = asyncio.Event()

    def progress(label: str) -> None:
        labels.append(label)
        if len(labels) == 2:
            two_reports.set()

    ctx = make_ctx(ws, signal=signal, progress=progress)
    scan = asyncio.create_task(ShortScan().run({}, ctx))
    await two_reports.wait()
    signal.cancel("operator pressed Stop")
    with pytest.raises(RunCancelled, match="operator pressed Stop"):
        await scan
    scanned = int(ctx.partial.split()[0])
    assert ctx.partial == f"{scanned} of 1200 entries scanned"
    assert 400 <= scanned < 1200
    assert labels[:2] == ["scanned 200 of 1200 entries", "scanned 400 of 1200 entries"]
    assert len(labels) < 6


# --- the set ---------------------------------------------------------------------------


def test_the_file_tools() -> None:
    catalog = {tool.name: tool for tool in (ListFiles(), ReadFile(), DeleteFile())}
    assert list(catalog) == ["list_files", "read_file", "delete_file"]
    delete = catalog["delete_file"]
    assert delete.needs_approval and not delete.read_only
    others = [tool for name, tool in catalog.items() if name != "delete_file"]
    assert all(tool.read_only and not tool.needs_approval for tool in others)
    assert catalog["read_file"].schema()["function"]["parameters"]["required"] == ["path"]
    assert catalog["list_files"].parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
