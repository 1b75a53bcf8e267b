"""The journal raises only typed errors: a journal another connection has locked (a backup, an
inspector, the sqlite3 shell) gives ``AuditError`` on reads as on writes, and a closed journal
gives ``ClosedError`` from every method, never a raw ``sqlite3`` error."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tiermem.changes import Change
from tiermem.errors import AuditError, ClosedError
from tiermem.journal import Journal

At = datetime(2026, 3, 2, tzinfo=UTC)
Call = Callable[[Journal], Any]

READS: dict[str, Call] = {
    "history": lambda j: j.history("ana", "m1"),
    "turns": lambda j: j.turns("ana", ["t1"]),
    "session_turns": lambda j: j.session_turns("ana", ["s1"]),
    "session_tail": lambda j: j.session_tail("ana", "s1", 4, ["t1"]),
    "user_ids": lambda j: j.user_ids(),
    "speakers": lambda j: j.speakers("ana"),
    "memory_ids": lambda j: j.memory_ids("ana"),
    "had_memories": lambda j: j.had_memories("ana", ["m1"]),
    "ltm_history": lambda j: j.ltm_history("n1"),
    "count_audit": lambda j: j.count_audit("ana"),
    "unfinished": lambda j: j.unfinished(),
    "has_unfinished": lambda j: j.has_unfinished(),
}


def _transaction(journal: Journal) -> None:
    with journal.transaction() as writer:
        writer.intend("ana", "add", {})


WRITES: dict[str, Call] = {
    "transaction": _transaction,
    "finish": lambda j: j.finish(1),
    "mark_undoing": lambda j: j.mark_undoing(1),
    "revoke": lambda j: j.revoke(1),
    "begin_forget": lambda j: j.begin_forget("ana"),
    "forget_user": lambda j: j.forget_user("ana"),
    "record_ltm": lambda j: j.record_ltm([Change("INSERT", "n1", None, "x", 1)], At, "test"),
}


def test_every_journal_method_is_covered_here() -> None:
    """A method added to the journal without a case here fails this test."""
    public = {
        name
        for name in dir(Journal)
        if not name.startswith("_") and callable(getattr(Journal, name)) and name != "close"
    }
    assert public == set(READS) | set(WRITES)


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Journal]:
    """A journal whose file another connection holds an exclusive lock on."""
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path, busy_timeout_s=0.05)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    yield journal
    other.execute("ROLLBACK")
    other.close()
    journal.close()


@pytest.mark.parametrize("name", sorted(READS | WRITES))
def test_a_locked_journal_raises_audit_error(locked: Journal, name: str) -> None:
    with pytest.raises(AuditError, match="locked"):
        (READS | WRITES)[name](locked)


def test_the_journal_answers_again_once_the_lock_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path, busy_timeout_s=0.05)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    with pytest.raises(AuditError):
        journal.user_ids()
    other.execute("ROLLBACK")
    _transaction(journal)
    assert [i.user_id for i in journal.unfinished()] == ["ana"]
    journal.close()
    other.close()


@pytest.mark.parametrize("name", sorted(READS | WRITES))
def test_a_closed_journal_raises_closed_error(tmp_path: Path, name: str) -> None:
    journal = Journal(tmp_path / "journal.sqlite3")
    journal.close()
    journal.close()  # idempotent
    with pytest.raises(ClosedError, match="closed"):
        (READS | WRITES)[name](journal)
