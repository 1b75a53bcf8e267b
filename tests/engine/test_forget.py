"""forget_user leaves nothing of the user in any store, down to the bytes on disk."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest
from tiermem import Memory
from tiermem.errors import JournalUnavailableError
from tiermem.journal import COMPACT, Journal
from tiermem.stores.naming import collection_name
from tiermem.types import AuditOp, AuditRecord, Role, Turn

from tests.conftest import ON_DISK, T0, MemoryFactory, chat, many_pages

SECRET = "Zyxwvutsrq-7731"


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.parametrize("location", ON_DISK)
def test_forget_user_erases_every_store(
    make_memory: MemoryFactory, tmp_path: Path, location: str
) -> None:
    memory = make_memory(location)
    memory.add(
        chat(("user", f"My locker code is {SECRET}."), ("assistant", "Noted.")),
        user_id="carol",
        session_id="s1",
    )
    memory.add(chat(("user", "I like jazz."), speaker="Dan"), user_id="dan")
    entry = memory.get_all("carol")[0]
    memory.update(entry.id, f"Carol's locker code is {SECRET}, on floor 2.", "carol")
    assert _files_containing(tmp_path, SECRET.encode())

    report = memory.forget_user("carol")

    # "Noted." is small talk: a turn in the journal (erased too), never an entry
    assert (report.entries, report.turns, report.audit_rows, report.stm_sessions) == (1, 2, 2, 1)
    assert memory.get_all("carol") == []
    assert memory.search("locker code", "carol") == []
    assert memory.working_memory("carol", "s1") == ()
    assert memory.components.journal.count_audit("carol") == 0
    memory.close()
    assert _files_containing(tmp_path, SECRET.encode()) == []
    assert _files_containing(tmp_path, b"carol") == []
    # Dan is untouched, also after reopening.
    if location == "edge":  # the user's shard directory is gone, segments, WAL and all
        left = sorted(p.name for p in (tmp_path / "edge").iterdir())
        assert left == [".template-384", _shard("dan")]  # the template holds no user's data
    reopened = make_memory(location)
    assert [e.text for e in reopened.get_all("dan")] == ["Dan: I like jazz."]


def _shard(user_id: str) -> str:
    return collection_name("tiermem_mtm_", user_id)


def test_forget_unknown_user_is_a_no_op(memory: Memory) -> None:
    report = memory.forget_user("nobody")
    assert (report.entries, report.turns, report.audit_rows, report.stm_sessions) == (0, 0, 0, 0)


def test_user_can_start_again_after_being_forgotten(memory: Memory) -> None:
    memory.add(chat(("user", "I live in Ghent.")), user_id="erin")
    memory.forget_user("erin")
    result = memory.add(chat(("user", "I live in Ghent.")), user_id="erin")
    assert len(result.entries) == 1
    assert [e.text for e in memory.get_all("erin")] == ["Ana: I live in Ghent."]


# -- down to the byte, over many pages -----------------------------------------------------
# SQLite's secure_delete zeroes a deleted row, but fragments of deleted rows stayed in the
# free space of pages that another user's rows keep (about half of these seeds, before the
# erasure compacted the file): the check needs many pages, two users interleaved on them.
VICTIM, BYSTANDER = "mira-5521", "otto-7310"


def _interleaved_rows(journal: Journal, seed: int) -> int:
    """~400 rows of random length, two thirds the victim's; returns the bystander's count."""
    rnd = random.Random(seed)
    journal._conn.execute("PRAGMA synchronous = OFF")
    kept = 0
    for i in range(400):
        user = VICTIM if rnd.random() < 0.66 else BYSTANDER
        text = (f"{SECRET} " if user == VICTIM else "jazz ") * rnd.randint(1, 60)
        at = T0 + timedelta(minutes=i)
        with journal.transaction() as writer:
            op = writer.intend(user, "add", {"text": text})
            writer.record([AuditRecord(at, user, f"m{i}", AuditOp.ADD, None, text, "api", {})], op)
            writer.save_turns([Turn(f"t{i}", user, "s1", Role.USER, user[:4], text, at)], op)
        journal.finish(op)
        kept += user == BYSTANDER
    return kept


@pytest.mark.parametrize("seed", range(8))
def test_an_erased_users_bytes_leave_pages_another_user_keeps(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path)
    kept = _interleaved_rows(journal, seed)
    assert path.stat().st_size > 100 * 4096  # many pages
    journal.forget_user(VICTIM)
    journal.compact()
    journal.close()
    data = path.read_bytes()
    assert (data.count(SECRET.encode()), data.count(VICTIM.encode())) == (0, 0)
    reopened = Journal(path)
    assert len(reopened.turns(BYSTANDER, [f"t{i}" for i in range(400)])) == kept
    reopened.close()


@pytest.mark.parametrize("location", ON_DISK)
def test_forget_user_over_many_pages_leaves_no_byte_of_the_user(
    make_memory: MemoryFactory, tmp_path: Path, location: str
) -> None:
    memory = make_memory(location)
    kept = many_pages(memory, VICTIM, BYSTANDER)
    assert (tmp_path / "journal.sqlite3").stat().st_size > 50 * 4096  # many pages
    memory.forget_user(VICTIM)
    memory.close()
    for needle in (SECRET, VICTIM, "Mira"):
        assert _files_containing(tmp_path, needle.encode()) == [], needle
    reopened = make_memory(location)
    assert {e.id: e.text for e in reopened.get_all(BYSTANDER)} == kept
    assert reopened.components.journal.unfinished() == []


def test_a_compaction_that_fails_raises_and_runs_again_on_open(
    make_memory: MemoryFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = make_memory("path")
    kept = many_pages(memory, VICTIM, BYSTANDER)

    def no_room(journal: Journal) -> None:
        raise JournalUnavailableError("cannot compact the journal: database or disk is full")

    monkeypatch.setattr(Journal, "compact", no_room)
    with pytest.raises(JournalUnavailableError, match="full"):
        memory.forget_user(VICTIM)
    assert memory.get_all(VICTIM) == []  # erased but for the bytes: the job says so
    assert [i.kind for i in memory.components.journal.unfinished()] == [COMPACT]
    memory.add(chat(("user", "Writes go on meanwhile.")), user_id=BYSTANDER)
    memory.close()
    monkeypatch.undo()
    reopened = make_memory("path")  # the compaction runs on open
    assert reopened.components.journal.unfinished() == []
    reopened.close()
    for needle in (SECRET, VICTIM, "Mira"):
        assert _files_containing(tmp_path, needle.encode()) == [], needle
    again = make_memory("path")
    assert set(kept) <= {e.id for e in again.get_all(BYSTANDER)}
