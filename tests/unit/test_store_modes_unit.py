"""The file store keeps transcripts to their user: folders 0700, files 0600, whatever the
umask; a loose Tether home is warned about once, never changed; a name in the runs dir that
is not a run is refused in words (docs/run-store.md)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.approvals import Rule
from tether.store.files import layout as layout_module
from tether.store.control import ControlRequest
from tether.store.private import private_dirs
from tether.store.files.layout import (
    CONTROL_FILE, INDEX_FILE, JOURNAL_FILE, LEDGER_FILE, OWNER_FILE, RULES_FILE, TRACE_FILE, check_home,
)
from tether.vocab.events import RunStarted
from tether.store.files.index import RunIndex
from tether.vocab.state import RunState, StateError
from tether.store.files.store import RunStore


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def modes_under(root: Path) -> dict[str, int]:
    """Every folder and file under ``root`` (itself included), by relative path."""
    out = {".": mode(root)}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            out[str(path.relative_to(root))] = mode(path)
    return out


def loose(found: dict[str, int], root: Path) -> dict[str, str]:
    """The entries whose mode is not 0700 (a folder) or 0600 (a file)."""
    out = {}
    for name, m in found.items():
        want = 0o700 if (root / name).is_dir() else 0o600
        if m != want:
            out[name] = f"{m:04o}"
    return out


@pytest.fixture(params=[0o000, 0o022, 0o077], ids=lambda m: f"umask{m:03o}")
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``$TETHER_HOME`` not made yet, and a process that has warned about nothing."""
    path = tmp_path / "home"
    monkeypatch.setenv("TETHER_HOME", str(path))
    monkeypatch.setattr(layout_module, "_WARNED", set())
    return path


def new_state(run_id: str) -> RunState:
    return RunState(run_id=run_id, model="m", messages=[{"role": "user", "content": "a secret task"}])


def test_private_dirs_makes_every_missing_folder_0700_whatever_the_umask(tmp_path: Path, umask: int):
    os.chmod(tmp_path, 0o755)
    private_dirs(tmp_path / "a" / "b" / "c")
    assert [mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3
    assert mode(tmp_path) == 0o755  # a folder that was there is not ours to change
    private_dirs(tmp_path / "a" / "b" / "c")  # already there: nothing to do
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        private_dirs(tmp_path / "file")


def everything_a_store_makes(runs: Path) -> None:
    """A run made, held, saved, traced, compacted, stopped and indexed, and a rule kept."""
    store = RunStore(runs)
    store.create(new_state("r"))
    state, handle = store.open("r")
    try:
        assert (runs / "r" / OWNER_FILE).exists()
        handle.heartbeat()  # owner.json again, through its temporary file
        trace = handle.trace()
        trace.write(RunStarted(run_id="r", model="m", resumed=False))
        trace.close()
        handle.ledger().begin("r:c1", {"tool": "write_file"})
        state.messages.append({"role": "assistant", "content": "done"})
        handle.save(state)
        handle.compact(state)  # the journal replaced through a temporary file
        store.control_append("r", ControlRequest("stop", "enough"))
        store.append_event("r", RunStarted(run_id="r", model="m", resumed=False))
        store.rule_add(Rule("deny", "deploy", "not from agents", "erin"))
        # The index is open: its -wal and -shm are there, with the database's mode.
        assert {p.name for p in runs.iterdir()} >= {INDEX_FILE, INDEX_FILE + "-wal", INDEX_FILE + "-shm"}
        made = {p.name for p in (runs / "r").iterdir()}
        assert {JOURNAL_FILE, TRACE_FILE, LEDGER_FILE, OWNER_FILE, CONTROL_FILE} <= made
    finally:
        handle.release()
        store.index.close()


def test_every_file_and_folder_the_store_makes_is_private(tmp_path: Path, umask: int):
    everything_a_store_makes(tmp_path / "place" / "runs")
    assert loose(modes_under(tmp_path / "place"), tmp_path / "place") == {}


def test_a_store_shared_with_a_group_makes_everything_the_group_s_too(tmp_path: Path, umask: int):
    """A runs dir given to a group with the setgid bit (docs/approvals.md: two people on one
    host): every folder the store makes in it is 2770, every file 0660, whatever the umask."""
    runs = tmp_path / "runs"
    runs.mkdir()
    os.chmod(runs, 0o2770)
    everything_a_store_makes(runs)
    found = modes_under(runs)
    assert {name: f"{m:04o}" for name, m in found.items()
            if m != (0o2770 if (runs / name).is_dir() else 0o660)} == {}
    assert {RULES_FILE, ".rules.lock", INDEX_FILE, "r", "r/" + JOURNAL_FILE, "r/" + CONTROL_FILE} <= found.keys()


def test_a_rebuilt_index_is_private_too(tmp_path: Path, umask: int):
    private_dirs(tmp_path / "runs")
    (tmp_path / "runs" / INDEX_FILE).write_bytes(b"not a database at all, " * 100)
    os.chmod(tmp_path / "runs" / INDEX_FILE, 0o644)
    index = RunIndex(tmp_path / "runs")
    try:
        assert index.all() == {}  # thrown away and made again
        assert {p.name: mode(p) for p in (tmp_path / "runs").iterdir()} == {
            INDEX_FILE: 0o600, INDEX_FILE + "-wal": 0o600, INDEX_FILE + "-shm": 0o600}
    finally:
        index.close()


def test_opening_the_default_store_makes_the_home_private_and_nothing_else(home: Path, umask: int,
                                                                          capsys: pytest.CaptureFixture[str]):
    store = RunStore(home / "runs")
    assert mode(home) == 0o700
    assert list(home.iterdir()) == []  # listing runs creates no runs dir
    assert store.summaries() == []
    store.create(new_state("r"))
    assert mode(home / "runs") == 0o700 and mode(home / "runs" / "r") == 0o700
    RunStore(home / "runs")
    assert check_home(home / "runs") is None  # a home Tether made is never warned about
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("loose_mode", "words"), [(0o755, "readable by other users"),
                                                   (0o750, "readable by other users"),
                                                   (0o711, "open to other users")])
def test_a_loose_home_is_warned_about_once_and_left_alone(home: Path, loose_mode: int, words: str,
                                                          capsys: pytest.CaptureFixture[str]):
    home.mkdir()
    os.chmod(home, loose_mode)
    store = RunStore(home / "runs")
    store.create(new_state("r"))
    RunStore(home / "runs").load("r")  # a second store of the same process: no second warning
    RunStore(home / "elsewhere")
    err = capsys.readouterr().err
    assert err == (f"tether: warning: {home} is {words} (mode {loose_mode:04o}); "
                   f"run: chmod 700 {home}\n")
    assert mode(home) == loose_mode  # not changed behind the user's back
    assert mode(home / "runs") == 0o700 and mode(home / "runs" / "r" / JOURNAL_FILE) == 0o600


def test_a_runs_dir_outside_the_home_is_not_judged(home: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]):
    mine = tmp_path / "shared"
    mine.mkdir()
    os.chmod(mine, 0o755)
    RunStore(mine).create(new_state("r"))
    assert capsys.readouterr().err == ""
    assert mode(mine) == 0o755 and mode(mine / "r") == 0o700
    assert not home.exists()  # a store elsewhere makes no Tether home


@pytest.mark.parametrize("name", [INDEX_FILE, INDEX_FILE + "-wal", INDEX_FILE + "-shm", INDEX_FILE + "-journal"])
def test_the_index_is_never_a_run_id(tmp_path: Path, name: str):
    store = RunStore(tmp_path / "runs")
    store.create(new_state("r"))
    with pytest.raises(StateError, match="the run store's index, not a run"):
        store.load(name)
    with pytest.raises(StateError, match="the run store's index, not a run"):
        store.create(new_state(name))


def test_a_name_in_the_runs_dir_that_is_not_a_run_is_no_run(tmp_path: Path):
    runs = tmp_path / "runs"
    store = RunStore(runs)
    store.create(new_state("r"))
    (runs / "stray").write_text("not a run")
    (runs / "empty").mkdir()
    (runs / "odd").mkdir()
    (runs / "odd" / JOURNAL_FILE).mkdir()  # a journal that is a folder
    for name in ("stray", "empty", "odd", "gone"):
        assert not store.exists(name)
        for read in (store.load, store.summary, store.open):
            with pytest.raises(StateError, match=f"^no run {name} in "):
                read(name)
        assert store.owner(name) is None
    with pytest.raises(StateError, match="in the way"):
        store.create(new_state("stray"))
    assert (runs / "stray").read_text() == "not a run"
    assert [s.run_id for s in store.summaries()] == ["r"]


def test_a_runs_dir_that_is_a_file_is_said_in_words(tmp_path: Path):
    (tmp_path / "runs").write_text("a file")
    store = RunStore(tmp_path / "runs")
    with pytest.raises(StateError, match=f"cannot create run r: {tmp_path / 'runs'} is in the way"):
        store.create(new_state("r"))
