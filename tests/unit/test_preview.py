"""Previews: what a call would change, shown before anyone approves it (issue 25, item 5).

Each preview is checked for what it says and, for the built-in writes, that making it
changed nothing on disk.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from acp import schema

import tether
from tether.acp.touches import Diff
from tether.vocab.preview import MAX_LINES, Preview, bounded, preview_of_acp, unified_diff
from tether.agents.tools.preview import preview_call
from tether.vocab.cancel import CancelSignal
from tether.vocab.ledger import Ledger
from tether.agents.tools import builtin
from tether.agents.tools.base import Tool, ToolContext
from tether.agents.tools.builtin import DeleteFile, ReadFile, WriteFile
from tether.agents.workspace import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "outside.txt").write_text("OUTSIDE\n")
    (root / "leave").symlink_to(tmp_path / "outside.txt")
    return Workspace(root)


def snapshot(top: Path) -> dict[str, bytes | str]:
    """Every file's bytes and symlink's target under ``top`` (links not followed), with mtimes."""
    seen: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder) / name
            if path.is_symlink():
                seen[str(path)] = os.readlink(path)
            elif path.is_file():
                seen[str(path)] = path.read_bytes() + str(path.stat().st_mtime_ns).encode()
    return seen


# ---- the built-in writes -------------------------------------------------------------

async def test_write_file_previews_the_diff_of_an_existing_file(ws: Workspace) -> None:
    before = snapshot(ws.root.parent)
    shown = await preview_call(WriteFile(), {"path": "notes.txt", "content": "one\nTWO\nthree\nfour\n"}, ws)
    assert shown is not None and shown.kind == "diff" and not shown.truncated
    assert shown.title == "write notes.txt (3 lines → 4 lines)"
    assert shown.text.splitlines()[:2] == ["--- a/notes.txt", "+++ b/notes.txt"]
    assert "-two\n+TWO\n" in shown.text and "+four\n" in shown.text
    assert snapshot(ws.root.parent) == before  # read, never written


async def test_write_file_previews_a_new_file_as_all_added(ws: Workspace) -> None:
    shown = await preview_call(WriteFile(), {"path": "fresh.md", "content": "# Title\nbody"}, ws)
    assert shown is not None and shown.kind == "diff"
    assert shown.title == "create fresh.md (new file, 2 lines)"
    assert shown.text.startswith("--- /dev/null\n+++ b/fresh.md\n")
    assert "+# Title\n+body\n\\ No newline at end of file\n" in shown.text
    assert not (ws.root / "fresh.md").exists()


async def test_write_file_says_no_change_and_binary_in_words(ws: Workspace) -> None:
    same = await preview_call(WriteFile(), {"path": "notes.txt", "content": "one\ntwo\nthree\n"}, ws)
    assert same == Preview("summary", "write notes.txt", "no change: notes.txt already holds this text (3 lines).")
    (ws.root / "blob.bin").write_bytes(b"\x89PNG\x00\x01" * 10)
    binary = await preview_call(WriteFile(), {"path": "blob.bin", "content": "text\n"}, ws)
    assert binary is not None and binary.kind == "summary"
    assert binary.text == "binary file, 60 bytes: the write replaces it with text, 1 line (5 bytes)."


async def test_write_file_summarises_a_file_too_long_to_diff(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtin, "PREVIEW_READ_BYTES", 8)
    shown = await preview_call(WriteFile(), {"path": "notes.txt", "content": "short\n"}, ws)
    assert shown == Preview("summary", "write notes.txt", "notes.txt holds 14 bytes, too many to diff here; "
                                                          "the write replaces them with 1 line (6 bytes).")


async def test_delete_file_previews_size_and_first_lines(ws: Workspace) -> None:
    (ws.root / "big.log").write_text("".join(f"line {i}\n" for i in range(50)))
    before = snapshot(ws.root.parent)
    shown = await preview_call(DeleteFile(), {"path": "big.log"}, ws)
    size = (ws.root / "big.log").stat().st_size
    assert shown is not None and shown.kind == "summary"
    assert shown.title == f"delete big.log ({size} bytes)"
    assert shown.text.splitlines() == [*(f"line {i}" for i in range(10)),
                                       f"… (the first 10 lines of {size} bytes)"]
    small = await preview_call(DeleteFile(), {"path": "notes.txt"}, ws)
    assert small == Preview("summary", "delete notes.txt (14 bytes)", "one\ntwo\nthree")
    assert snapshot(ws.root.parent) == before


async def test_delete_file_says_missing_and_binary_files_in_words(ws: Workspace) -> None:
    missing = await preview_call(DeleteFile(), {"path": "gone.txt"}, ws)
    assert missing == Preview("summary", "delete gone.txt", "no such file: gone.txt. The call would delete nothing.")
    (ws.root / "blob.bin").write_bytes(bytes(range(256)))
    binary = await preview_call(DeleteFile(), {"path": "blob.bin"}, ws)
    assert binary is not None and binary.text == "binary file, 256 bytes"


@pytest.mark.parametrize("path, words", [
    ("../outside.txt", "climbs out of the workspace with '..'"),
    ("leave", "leads outside the workspace through a symbolic link"),
    ("/etc/passwd", "is absolute"),
    ("secrets.env", "permission denied: secrets.env may not be"),
])
@pytest.mark.parametrize("tool", [WriteFile(), DeleteFile()], ids=["write_file", "delete_file"])
async def test_a_path_the_tool_refuses_fails_the_preview_with_the_tools_words(
        ws: Workspace, tool: Tool, path: str, words: str) -> None:
    before = snapshot(ws.root.parent)
    args: dict[str, Any] = {"path": path, "content": "x"} if tool.name == "write_file" else {"path": path}
    shown = await preview_call(tool, args, ws)
    assert shown is not None and shown.kind == "failed" and shown.title == tool.name
    assert shown.text.startswith("preview failed: ") and words in shown.text
    # The very words the call itself would answer with.
    ctx = ToolContext("r1", "c1", CancelSignal(), lambda _: None, ws, Ledger(ws.root.parent / "ledger.jsonl"))
    with pytest.raises(Exception) as refused:
        await tool.run(args, ctx)
    assert shown.text == f"preview failed: {refused.value}"
    assert snapshot(ws.root.parent) == before


async def test_no_workspace_and_bad_arguments_fail_in_words(ws: Workspace) -> None:
    alone = await preview_call(DeleteFile(), {"path": "notes.txt"}, None)
    assert alone is not None and alone.kind == "failed" and "has no workspace" in alone.text
    bad = await preview_call(WriteFile(), {"path": "notes.txt"}, ws)
    assert bad is not None and bad.kind == "failed" and "'content' is a required property" in bad.text


async def test_a_tool_without_a_preview_gives_none(ws: Workspace) -> None:
    assert await preview_call(ReadFile(), {"path": "notes.txt"}, ws) is None

    @tether.tool(needs_approval=True)
    def plain(x: int) -> str:
        return str(x)

    assert await preview_call(plain, {"x": 1}, ws) is None


async def test_a_call_context_gives_its_workspace(ws: Workspace) -> None:
    ctx = ToolContext("r1", "c1", CancelSignal(), lambda _: None, ws, Ledger(ws.root.parent / "ledger.jsonl"))
    shown = await preview_call(DeleteFile(), {"path": "notes.txt"}, ctx)
    assert shown is not None and shown.title == "delete notes.txt (14 bytes)"


async def test_write_file_writes_what_its_preview_showed(ws: Workspace) -> None:
    ctx = ToolContext("r1", "c1", CancelSignal(), lambda _: None, ws, Ledger(ws.root.parent / "ledger.jsonl"))
    args = {"path": "notes.txt", "content": "new text\n"}
    assert await WriteFile().run(args, ctx) == "Wrote notes.txt (9 bytes)."
    assert (ws.root / "notes.txt").read_text() == "new text\n"
    assert await WriteFile().run(args, ctx) == "Wrote notes.txt (9 bytes)."  # replayed from the ledger
    fresh = ToolContext("r1", "c2", CancelSignal(), lambda _: None, ws, Ledger(ws.root.parent / "ledger.jsonl"))
    assert await WriteFile().run({"path": "new.txt", "content": ""}, fresh) == "Created new.txt (0 bytes)."
    again = await preview_call(WriteFile(), args, ws)
    assert again is not None and again.text.startswith("no change")


# ---- library tools -------------------------------------------------------------------

def _refund_preview(order: int, amount: float) -> str:
    return f"refund {amount:.2f} USD on order {order}"


@tether.tool(needs_approval=True, preview=_refund_preview)
def refund(order: int, amount: float, ctx: ToolContext) -> str:
    """Refund an order."""
    return "refunded"


async def test_a_library_tool_declares_its_preview() -> None:
    shown = await preview_call(refund, {"order": "7", "amount": 2.5}, None)
    assert shown == Preview("summary", "refund", "refund 2.50 USD on order 7")

    async def as_diff(path: str) -> Preview:
        return Preview("diff", f"change {path}", unified_diff(path, "a\n", "b\n"))

    @tether.tool(needs_approval=True, preview=as_diff)
    async def change(path: str, force: bool = False) -> str:
        return "done"

    shown = await preview_call(change, {"path": "x.cfg"}, None)
    assert shown is not None and shown.kind == "diff" and shown.title == "change x.cfg"
    assert "-a\n+b\n" in shown.text
    # A diff returned as text is shown as a diff.
    text_diff = tether.tool(needs_approval=True, preview=lambda path: unified_diff(path, None, "x\n"))(_named_change)
    shown = await preview_call(text_diff, {"path": "y"}, None)
    assert shown == Preview("diff", "_named_change", "--- /dev/null\n+++ b/y\n@@ -0,0 +1 @@\n+x\n")


def _named_change(path: str) -> str:
    return path


def test_a_preview_that_cannot_take_the_tools_arguments_is_refused_at_decoration() -> None:
    with pytest.raises(TypeError, match="takes 'amout', which is not an argument of the tool"):
        tether.tool(preview=lambda amout: "")(_named_change)
    with pytest.raises(TypeError, match="must be a function"):
        tether.tool(preview="not a function")(_named_change)  # type: ignore[arg-type]


async def test_a_preview_that_raises_is_shown_failed() -> None:
    def broken(path: str) -> str:
        raise RuntimeError("the pricing service is down")

    tool = tether.tool(needs_approval=True, preview=broken)(_named_change)
    shown = await preview_call(tool, {"path": "a"}, None)
    assert shown == Preview("failed", "_named_change", "preview failed: RuntimeError: the pricing service is down")
    bad = await preview_call(tool, {"path": 3}, None)
    assert bad is not None and bad.kind == "failed" and "invalid arguments for _named_change" in bad.text

    odd = tether.tool(needs_approval=True, preview=lambda path: 42)(_named_change)
    shown = await preview_call(odd, {"path": "a"}, None)
    assert shown is not None and shown.kind == "failed" and "returned int" in shown.text


async def test_a_preview_that_hangs_is_shown_failed_after_the_timeout() -> None:
    async def hangs(path: str) -> str:
        await asyncio.Event().wait()
        return ""

    tool = tether.tool(needs_approval=True, preview=hangs)(_named_change)
    shown = await preview_call(tool, {"path": "a"}, None, timeout=0.05)
    assert shown == Preview("failed", "_named_change", "preview failed: no answer within 0.05 s")

    release = threading.Event()

    def blocks(path: str) -> str:  # a sync preview in its thread: the wait ends, the thread is let go
        release.wait(10)
        return ""

    tool = tether.tool(needs_approval=True, preview=blocks)(_named_change)
    try:
        shown = await preview_call(tool, {"path": "a"}, None, timeout=0.05)
    finally:
        release.set()
    assert shown is not None and shown.kind == "failed" and "no answer within" in shown.text


# ---- bounds --------------------------------------------------------------------------

async def test_a_long_diff_is_truncated_with_a_note(ws: Workspace) -> None:
    content = "".join(f"row {i}\n" for i in range(1000))
    shown = await preview_call(WriteFile(), {"path": "rows.txt", "content": content}, ws)
    assert shown is not None and shown.truncated
    lines = shown.text.splitlines()
    assert len(lines) == MAX_LINES + 1
    assert lines[-1] == f"… {1000 + 3 - MAX_LINES} more lines"  # two headers and a hunk line


def test_bytes_are_bounded_too() -> None:
    wide = bounded(Preview("summary", "t", "x" * 50), max_bytes=10)
    assert wide == Preview("summary", "t", "xxxxxxxxxx…\n… (cut at 10 bytes)", truncated=True)
    many = bounded(Preview("diff", "t", "aaaa\nbbbb\ncccc\n"), max_bytes=10)
    assert many.text == "aaaa\nbbbb\n… 1 more line" and many.truncated
    fits = Preview("diff", "t", "a\nb")
    assert bounded(fits) is fits


def test_a_preview_round_trips_through_its_dict() -> None:
    shown = Preview("diff", "write a.txt", "--- a/a.txt\n", truncated=True)
    assert shown.to_dict() == {"kind": "diff", "title": "write a.txt", "text": "--- a/a.txt\n", "truncated": True}
    assert Preview.from_dict(shown.to_dict()) == shown
    assert "truncated" not in Preview("summary", "t", "x").to_dict()
    assert Preview.from_dict({"kind": "future", "title": "t", "text": "x"}).kind == "summary"


# ---- ACP agents ----------------------------------------------------------------------

def test_an_acp_diff_gives_the_same_preview(tmp_path: Path) -> None:
    path = str(tmp_path / "out.txt")
    wire = [{"type": "content", "content": {"type": "text", "text": "ignored"}},
            {"type": "diff", "path": path, "oldText": None, "newText": "hello\n"}]
    shown = preview_of_acp(wire, tmp_path)
    assert shown == Preview("diff", "create out.txt (new file, 1 line)", unified_diff("out.txt", None, "hello\n"))
    # The same from the protocol's objects (as the fake agent sends) and from a permission request's diffs.
    content = [schema.FileEditToolCallContent(type="diff", path=path, old_text="hi\n", new_text="hello\n")]
    from_schema = preview_of_acp(content, tmp_path)
    assert from_schema == preview_of_acp([Diff(path, "hello\n", "hi\n")], tmp_path)
    assert from_schema is not None and from_schema.title == "edit out.txt (1 line → 1 line)"
    assert "-hi\n+hello\n" in from_schema.text
    two = preview_of_acp([Diff(path, "a\n"), Diff("/elsewhere/b.txt", "b\n", "c\n")], tmp_path)
    assert two is not None and two.title == "edit 2 files: out.txt, elsewhere/b.txt"
    assert preview_of_acp([{"type": "terminal", "terminalId": "t1"}]) is None
    assert preview_of_acp(None) is None
