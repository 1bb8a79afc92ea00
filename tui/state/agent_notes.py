"""What an agent that drives its own turns (an ACP agent) reports beside its transcript.

An ACP run's messages are its transcript, as for any run. The agent also says who it is
(``agent_session``), what it thinks (``thought``), its plan (``plan``: each one replaces
the last), the files it wrote through Tether (``file_write``), what it did that the operator
must know (``warning``: a file it wrote itself after Tether refused the write), and, with each
permission request, its options and the diff it proposes (``approval_required``). Those are trace
records only: this module keeps them per run for the views, from the run's live events
and from its trace's history alike. Textual-free.

A note is shown among the messages, where it happened:

* an event of a run this console drives comes through the harness's sink while the
  run's state is the one it changes: its place is exact (the number of messages then);
* an event read back from another process's trace, or from history, is placed by what
  the trace says around it, the way :mod:`tether.acp.run` writes it: a thought goes
  before the call that followed it (and before the words said with that call) or before
  its turn's last words; a file write after the call that made it (the last
  ``tool_start`` before it); a warning after the result of the call it names; the agent's
  line after the prompt of its turn.

Either way the notes land where the live run put them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

NOTE_KINDS = frozenset({"agent_session", "agent_commands", "tool_output", "thought", "plan", "file_write",
                        "approval_required", "warning", "config_options"})
"""Kinds that make a run's notes (``approval_required`` only with an agent's options or diff)."""
TRACKED_KINDS = frozenset({"tool_start", "turn", "run_stopped"})
"""Kinds that only place later notes, followed for runs that already have notes."""
MAX_NOTES = 200  # per run: the transcript shows the last 200 items anyway
SHELL_LINES = 12  # the last lines of a shell call's output shown (the trace has them all)
MAX_ASKS = 32  # permission requests remembered per run


@dataclass(frozen=True)
class Option:
    """One of an agent's answers to a permission request."""

    id: str
    name: str
    kind: str  # allow_once, allow_always, reject_once, reject_always

    @property
    def allows(self) -> bool:
        return self.kind.startswith("allow")

    @property
    def kind_words(self) -> str:
        return self.kind.replace("_", " ")


@dataclass(frozen=True)
class Ask:
    """A permission request as the agent made it: its options and the diff it shows."""

    call_id: str
    options: tuple[Option, ...]
    diff: str = ""

    def default(self, approve: bool) -> Option | None:
        """What ``a`` (allow once) or ``r`` (reject once) answers with; else the first of its family."""
        family = [o for o in self.options if o.allows == approve]
        wanted = "allow_once" if approve else "reject_once"
        return next((o for o in family if o.kind == wanted), family[0] if family else None)

    def family(self, approve: bool) -> list[Option]:
        return [o for o in self.options if o.allows == approve]


@dataclass(frozen=True)
class Note:
    """A line of the transcript that is not a message: ``kind`` is session, thought,
    file_write or warning. Where it goes (see the module and :func:`place`): at ``index``;
    else by ``anchor``: ``after_call`` / ``before_call`` / ``after_result`` ``call_id``,
    ``turn_end`` of ``turn``, ``turn`` (after the prompt of ``turn``); ``""``: not known yet
    (at the end)."""

    key: int
    kind: str
    text: str
    detail: str = ""
    index: int | None = None
    turn: int | None = None
    call_id: str | None = None
    anchor: str = ""
    failed: bool = False


@dataclass
class _Reading:
    """Where a stream of records is (the live one, or a batch read back)."""

    last_call: str | None = None
    turns: int = 0
    pending: list[int] | None = None  # keys of thoughts waiting for what comes after them

    def __post_init__(self) -> None:
        if self.pending is None:
            self.pending = []


class AgentNotes:
    """One run's notes: its agent, its plan, its thoughts and file writes, its asks."""

    def __init__(self) -> None:
        self.session: dict[str, Any] | None = None
        self.plan: list[dict[str, str]] | None = None
        self._shells: dict[str, int] = {}  # a shell call's id: the key of its note (its output so far)
        self.commands: list[dict[str, str]] = []  # the agent's slash commands, as it last listed them
        self.config: list[dict[str, Any]] | None = None  # the agent's session config options, as last stated
        self.notes: deque[Note] = deque(maxlen=MAX_NOTES)
        self.asks: dict[str, Ask] = {}
        self._plan_seq = -1
        self._seqs: set[int] = set()
        self._live = _Reading()
        self._live_started = False
        self._next = 0

    @property
    def agent(self) -> str:
        """The agent's name and version, as it said them (empty before its session)."""
        s = self.session
        if not s:
            return ""
        return " ".join(str(p) for p in (s.get("agent_name"), s.get("agent_version")) if p)

    def take(self, record: dict[str, Any], index: int | None = None) -> bool:
        """A record of the run, as it happened (``index``: the number of messages then, when
        known exactly); True when the notes changed."""
        self._live_started = True
        return self._take(record, index, self._live)

    def take_history(self, records: Iterable[dict[str, Any]]) -> bool:
        """Records read back from the run's trace, oldest first (placed by what they say,
        with what this batch says of the calls and turns around them)."""
        reading = _Reading()
        changed = False
        for record in records:
            changed |= self._take(record, None, reading)
        if not self._live_started:  # nothing live yet: the live records go on from here
            self._live = reading
        return changed

    def _take(self, record: dict[str, Any], index: int | None, reading: _Reading) -> bool:
        kind = record.get("kind")
        if kind == "tool_start":
            call_id = str(record.get("call_id") or "")
            if call_id:
                reading.last_call = call_id
                return self._anchor(reading, "before_call", call_id=call_id)
            return False
        if kind in ("turn", "run_stopped"):
            turn = _int(record.get("turn")) if kind == "turn" else reading.turns + 1
            reading.turns = max(reading.turns, turn)
            return self._anchor(reading, "turn_end", turn=turn)
        seq = _int(record.get("seq"))
        if seq and seq in self._seqs:
            return False
        if seq:
            self._seqs.add(seq)
        if kind == "config_options":  # the run's header shows the last
            self.config = [o for o in record.get("options") or () if isinstance(o, dict)]
            return True
        if kind == "plan":
            if seq < self._plan_seq:
                return False
            self._plan_seq = seq
            self.plan = [e for e in record.get("entries") or () if isinstance(e, dict)]
            return True
        if kind == "tool_output":
            return self._shell(record, index, reading)
        if kind == "agent_commands":  # each list replaces the last; offered in the follow-up box
            self.commands = [c for c in record.get("commands") or () if isinstance(c, dict) and c.get("name")]
            return True
        if kind == "approval_required":
            ask = ask_from(record)
            if ask is None:
                return False
            self.asks[ask.call_id] = ask
            while len(self.asks) > MAX_ASKS:
                del self.asks[next(iter(self.asks))]
            return True
        if kind == "agent_session":
            self.session = dict(record)
            adopted = f" (its own earlier session, gone on in by {record['adopted']})" if record.get("adopted") else ""
            note = Note(self._key(seq), "session", self.agent or "an ACP agent",
                        f"session {record.get('session_id') or '?'}{adopted}", index=index, turn=reading.turns + 1,
                        anchor="turn")
        elif kind == "thought":
            text = str(record.get("text") or "")
            if not text.strip():
                return False
            note = Note(self._key(seq), "thought", text, index=index,
                        turn=_int(record.get("turn")) or reading.turns + 1)
            if index is None:
                reading.pending.append(note.key)  # type: ignore[union-attr]
        elif kind == "file_write":
            refused = record.get("refused")
            note = Note(self._key(seq), "file_write", str(record.get("path") or "?"),
                        str(refused) if refused else f"{_int(record.get('size')):,} bytes",
                        index=index, call_id=reading.last_call, anchor="after_call" if reading.last_call else "",
                        failed=bool(refused))
        elif kind == "warning":  # after the result of the call it names, live or read back
            call_id = record.get("call_id")
            note = Note(self._key(seq), "warning", str(record.get("text") or "?"), index=None if call_id else index,
                        call_id=str(call_id) if call_id else None, anchor="after_result" if call_id else "",
                        failed=True)
        else:
            return False
        self.notes.append(note)
        return True

    def _shell(self, record: dict[str, Any], index: int | None, reading: _Reading) -> bool:
        """A shell call's output as it comes, and its exit code: one note after the call,
        updated in place (its last ``SHELL_LINES`` lines), under a new key each time so that
        the transcript, which only appends what it has not drawn, draws it again."""
        call_id = str(record.get("call_id") or "")
        key = self._shells.get(call_id)
        at = next((i for i, n in enumerate(self.notes) if n.key == key), None) if key is not None else None
        if record.get("exited"):
            code, signal = record.get("exit_code"), record.get("signal")
            end = f"ended by signal {signal}" if signal else "exit code ?" if code is None else f"exit code {code}"
            if at is None:
                return False
            self.notes[at] = replace(self.notes[at], detail=end, failed=bool(signal) or code != 0, key=self._key(0))
            self._shells[call_id] = self.notes[at].key  # a new key: the transcript draws it again
            return True
        data = str(record.get("data") or "")
        if at is None:
            note = Note(self._key(_int(record.get("seq"))), "shell", data, "running", index=index, call_id=call_id,
                        anchor="after_call")
            self._shells[call_id] = note.key
            self.notes.append(note)
            return True
        text = "\n".join((self.notes[at].text + data).split("\n")[-SHELL_LINES - 1:])
        self.notes[at] = replace(self.notes[at], text=text, key=self._key(0))
        self._shells[call_id] = self.notes[at].key
        return True

    def _anchor(self, reading: _Reading, anchor: str, *, call_id: str | None = None, turn: int | None = None) -> bool:
        """The thoughts read before this record go before it: before the call it starts, or
        before the last words of the turn it ends."""
        pending = reading.pending
        if not pending:
            return False
        keys = set(pending)
        pending.clear()
        for i in range(len(self.notes) - 1, -1, -1):
            note = self.notes[i]
            if note.key in keys:
                self.notes[i] = replace(note, anchor=anchor, call_id=call_id,
                                        turn=turn if turn is not None else note.turn)
                keys.discard(note.key)
                if not keys:
                    break
        return True

    def _key(self, seq: int) -> int:
        self._next += 1
        return seq if seq else -self._next


def ask_from(record: dict[str, Any]) -> Ask | None:
    """The agent's options and diff on an ``approval_required`` record (None: Tether's own call)."""
    options = record.get("options")
    diff = record.get("diff")
    if not options and not diff:
        return None
    parsed = tuple(Option(str(o.get("id") or ""), str(o.get("name") or o.get("id") or "?"), str(o.get("kind") or ""))
                   for o in options or () if isinstance(o, dict))
    return Ask(str(record.get("call_id") or ""), parsed, str(diff or ""))


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


# ---- where notes go among the messages ------------------------------------------------------

Entry = tuple[str, int]
"""An item of a transcript: ``("m", i)``, message ``i``; ``("n", key)``, the note with that key."""


def place(messages: Sequence[dict[str, Any]], notes: Iterable[Note]) -> tuple[list[Entry], dict[int, Note]]:
    """The messages and the notes in the order a transcript shows them, and the notes by key.
    A note goes before the message at its place (after the messages before it); notes at
    one place keep the order they came in. A note whose place is not in the messages yet
    (another process's journal is read after its trace) goes at the end, for now."""
    n = len(messages)
    prompts: list[int] = []
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    notes = list(notes)
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "user":
            prompts.append(i)
        elif role == "assistant":
            for call in message.get("tool_calls") or ():
                calls[str(call.get("id", ""))] = i
        elif role == "tool":
            results[str(message.get("tool_call_id", ""))] = i

    def words(i: int) -> bool:  # an assistant message of words alone (what a flush appends)
        m = messages[i]
        return m.get("role") == "assistant" and not m.get("tool_calls") and bool(m.get("content"))

    placed: list[tuple[int, int, Note]] = []
    for order, note in enumerate(notes):
        at = n
        if note.index is not None:
            at = min(note.index, n)
        elif note.anchor == "after_call" and note.call_id in calls:
            at = calls[note.call_id] + 1  # type: ignore[index]
        elif note.anchor == "after_result" and note.call_id in results:
            at = results[note.call_id] + 1  # type: ignore[index]
        elif note.anchor == "before_call" and note.call_id in calls:
            at = calls[note.call_id]  # type: ignore[index]
            if at > 0 and words(at - 1):
                at -= 1
        elif note.anchor == "turn_end" and note.turn is not None and 0 < note.turn <= len(prompts):
            at = prompts[note.turn] if note.turn < len(prompts) else n
            if at - 1 > prompts[note.turn - 1] and words(at - 1):
                at -= 1
        elif note.anchor == "turn" and note.turn is not None and 0 < note.turn <= len(prompts):
            at = prompts[note.turn - 1] + 1
        placed.append((at, order, note))
    placed.sort(key=lambda p: (p[0], p[1]))
    out: list[Entry] = []
    j = 0
    for i in range(n + 1):
        while j < len(placed) and placed[j][0] <= i:
            out.append(("n", placed[j][2].key))
            j += 1
        if i < n:
            out.append(("m", i))
    return out, {note.key: note for note in notes}
