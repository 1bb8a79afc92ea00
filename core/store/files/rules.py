"""The file store's standing rules: ``<runs_dir>/rules.json``, one set for every process.

Rules (:mod:`tether.vocab.rules`) are few and seldom change, so the file is rewritten
whole and atomically (written and synced, then renamed over the old one) under an ``flock``
of ``<runs_dir>/.rules.lock``, with the next id kept in it so that an id is never given
twice. A reader keeps what it parsed until the file's identity changes, so reading the
rules before each call that needs approval is a ``stat``.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from tether.vocab.rules import Rule, RuleError
from tether.vocab.state import StateError
from tether.store.private import open_private, private_dirs, write_private
from tether.store.files.layout import RULES_FILE, RULES_LOCK
from tether.store.summary import JournalKey

T = TypeVar("T")


class RulesFile:
    """``<runs_dir>/rules.json``: ``{"next": N, "rules": [...]}`` (see the module)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / RULES_FILE
        self._key: JournalKey | None = None
        self._rules: list[Rule] = []

    def read(self) -> list[Rule]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        if key != self._key:  # replaced since it was parsed (every write is a new file)
            rules = self._parse(self._load())
            self._key, self._rules = key, rules
        return list(self._rules)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {"next": 1, "rules": []}
        except (OSError, ValueError) as exc:
            raise StateError(f"the store's rules in {self.path} cannot be read ({exc}); fix the file "
                             "or move it away") from None
        if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
            raise StateError(f"the store's rules in {self.path} are not a rules file; fix it or move it away")
        return data

    def _parse(self, data: dict[str, Any]) -> list[Rule]:
        try:
            return [Rule.from_dict(r) for r in data["rules"]]
        except (TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"a rule in {self.path} cannot be read ({exc}); fix the file or move it away") from None

    def change(self, edit: Callable[[dict[str, Any]], T]) -> T:
        """``edit(data)`` on the rules as they are now, under the lock, then the file replaced
        (written and synced first: a crash leaves the old rules or the new ones); its result."""
        private_dirs(self.root)
        lock = open_private(self.root / RULES_LOCK, os.O_RDWR)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._load()
            self._parse(data)  # a file this process cannot read is not written over
            result = edit(data)
            tmp = self.root / f".{RULES_FILE}.{os.getpid()}.tmp"
            write_private(tmp, (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode(), sync=True)
            os.replace(tmp, self.path)
            return result
        finally:
            os.close(lock)  # drops the lock


    def add(self, rule: Rule) -> Rule:
        """Keep ``rule`` under the next id, in one atomic rewrite."""

        def add(data: dict[str, Any]) -> Rule:
            number = int(data.get("next") or 1)
            added = replace(rule, id=f"R{number}")
            data["next"] = number + 1
            data["rules"].append(added.to_dict())
            return added

        return self.change(add)

    def remove(self, rule_id: str) -> Rule:
        """Take rule ``rule_id`` out (its id is not given again); a RuleError when there is none."""
        def remove(data: dict[str, Any]) -> Rule:
            for i, kept in enumerate(data["rules"]):
                if kept.get("id") == rule_id:
                    del data["rules"][i]
                    return Rule.from_dict(kept)
            raise RuleError(f"no rule {rule_id} on this store; tether rules lists them")

        return self.change(remove)
