"""Erasing a user whose words reached the knowledge graph: the audit rows of what only they
supported are blanked before the graph forgets those items, so neither a failed audit write
(a full disk) nor a kill -9 between the two can leave their words in the journal."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from tiermem import ManualClock, Memory
from tiermem.changes import Change
from tiermem.errors import JournalUnavailableError
from tiermem.journal import Journal

from tests.conftest import chat
from tests.offline.conftest import node, scripted, units

SECRET = "bluewhalezz"


def _consolidated(make_ltm_memory: Callable[..., Memory]) -> Memory:
    memory = make_ltm_memory(chunk_size=1)
    backend = scripted(memory)
    memory.add(chat(("user", f"My secret project is codenamed {SECRET}")), "alice")
    memory.add(chat(("user", "Pottery keeps me sane"), speaker="Bo"), "bob")
    backend.push(units([node("project", f"codenamed {SECRET}")]), units([node("pottery", "clay")]))
    memory.consolidate_now()
    return memory


def _holding(root: Path) -> list[str]:
    return [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and SECRET.encode() in p.read_bytes()
    ]


def _erasure_audit(fail: Callable[[], None]) -> Callable[..., None]:
    real = Journal.record_ltm

    def record(self: Journal, changes: Sequence[Change], at: datetime, actor: str) -> None:
        if actor == "erasure":
            fail()
        real(self, changes, at, actor)

    return record


def test_an_erasure_whose_audit_write_fails_leaves_nothing_once_retried(
    make_ltm_memory: Callable[..., Memory], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = _consolidated(make_ltm_memory)
    assert _holding(tmp_path)

    def full() -> None:
        raise JournalUnavailableError("journal write failed: database or disk is full")

    journal, ltm = memory.components.journal, memory.components.ltm
    failing = _erasure_audit(full)
    # the graph's audit sink is the journal's method, bound when the memory opened
    monkeypatch.setattr(ltm, "_audit", lambda *args: failing(journal, *args))
    with pytest.raises(JournalUnavailableError):
        memory.forget_user("alice")
    monkeypatch.undo()
    assert memory.forget_user("alice").ltm_removed == 1  # the retry still finds the item
    memory.close()
    assert _holding(tmp_path) == []


def _forget_and_die(config: Any, now: datetime) -> None:
    Journal.record_ltm = _erasure_audit(lambda: os._exit(9))  # type: ignore[method-assign]
    Memory(config, clock=ManualClock(now)).forget_user("alice")


def test_an_erasure_killed_at_its_audit_write_leaves_nothing_after_reopening(
    make_ltm_memory: Callable[..., Memory], tmp_path: Path, clock: ManualClock
) -> None:
    memory = _consolidated(make_ltm_memory)
    config = memory.config
    memory.close()
    child = multiprocessing.get_context("fork").Process(
        target=_forget_and_die, args=(config, clock.now())
    )
    child.start()
    child.join(60)
    assert child.exitcode == 9
    with Memory(config, clock=clock) as reopened:  # the erasure job runs again on open
        assert reopened.get_all("alice") == []
        assert reopened.components.journal.unfinished() == []
    assert _holding(tmp_path) == []
