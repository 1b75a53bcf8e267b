"""The journal raises only typed errors: a journal another connection has locked (a backup, an
inspector, the sqlite3 shell) gives ``AuditError`` on reads as on writes, a full disk gives
``JournalUnavailableError`` on every write (and again on the next, not SQLite's "cannot
rollback"), a closed journal gives ``ClosedError`` from every method, never a raw ``sqlite3``
error; and a second process cannot open a journal that one holds."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tiermem.changes import Change
from tiermem.errors import AuditError, ClosedError, JournalLockedError, JournalUnavailableError
from tiermem.journal import Journal

At = datetime(2026, 3, 2, tzinfo=UTC)
Call = Callable[[Journal], Any]

READS: dict[str, Call] = {
    "history": lambda j: j.history("ana", "m1"),
    "turns": lambda j: j.turns("ana", ["t1"]),
    "session_tail": lambda j: j.session_tail("ana", "s1", 4, ["t1"]),
    "placed_turns": lambda j: j.placed_turns("ana", ["t1"]),
    "user_ids": lambda j: j.user_ids(),
    "speakers": lambda j: j.speakers("ana"),
    "memory_ids": lambda j: j.memory_ids("ana"),
    "had_memories": lambda j: j.had_memories("ana", ["m1"]),
    "ltm_history": lambda j: j.ltm_history("n1"),
    "count_audit": lambda j: j.count_audit("ana"),
    "unfinished": lambda j: j.unfinished(),
    "has_unfinished": lambda j: j.has_unfinished(),
    "before_add": lambda j: j.before_add("ana", "s1", ["t1"], 4),
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
    "end_forget": lambda j: j.end_forget(1),
    "compact": lambda j: j.compact(),
    "check_writable": lambda j: j.check_writable(),
}
# The writes that need room for new rows: each fails on a full disk.
GROWING: dict[str, Call] = {
    "transaction": lambda j: _big_transaction(j),
    "begin_forget": lambda j: j.begin_forget("ana-" + "x" * 5000),
    "record_ltm": lambda j: j.record_ltm([Change("INSERT", "n1", None, "x" * 9000, 1)], At, "t"),
    "check_writable": lambda j: j.check_writable(),
}


def _big_transaction(journal: Journal) -> None:
    with journal.transaction() as writer:
        writer.intend("ana", "add", {"text": "x" * 9000})


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


def _fill(journal: Journal) -> None:
    """Fault injection for a full disk: the file may not grow past the pages it has (SQLite
    then answers SQLITE_FULL, "database or disk is full", as it does when the disk is)."""
    conn = journal._conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")


@pytest.mark.parametrize("name", sorted(GROWING))
def test_a_full_disk_raises_journal_unavailable_on_every_write(tmp_path: Path, name: str) -> None:
    journal = Journal(tmp_path / "journal.sqlite3")
    with journal.transaction() as writer:
        writer.intend("bo", "add", {"text": "acknowledged"})
    _fill(journal)
    for _ in range(3):  # the same typed error every time, never "cannot rollback"
        with pytest.raises(JournalUnavailableError, match="full"):
            GROWING[name](journal)
    assert [(i.user_id, i.payload) for i in journal.unfinished()] == [
        ("bo", {"text": "acknowledged"})
    ]
    journal._conn.execute("PRAGMA max_page_count = 1073741823")
    GROWING[name](journal)
    journal.close()


def test_a_second_process_cannot_open_a_journal_that_one_holds(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path)
    script = (
        "import sys; from pathlib import Path; from tiermem.journal import Journal\n"
        "from tiermem.errors import JournalLockedError\n"
        "try:\n    Journal(Path(sys.argv[1]))\n"
        "except JournalLockedError as exc:\n    print(type(exc).__name__, exc.pid)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.split() == ["JournalLockedError", str(os.getpid())], out.stderr
    with pytest.raises(JournalLockedError):  # a second open in this process too
        Journal(path)
    journal.close()
    Journal(path).close()  # free again once closed


def test_journal_files_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "data" / "journal.sqlite3"
    journal = Journal(path)
    with journal.transaction() as writer:
        writer.intend("ana", "add", {})
    journal.close()
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    path.chmod(0o644)  # as an earlier version left it
    Journal(path).close()
    assert path.stat().st_mode & 0o777 == 0o600
