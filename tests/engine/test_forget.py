"""forget_user leaves nothing of the user in any store, down to the bytes on disk."""

from __future__ import annotations

from pathlib import Path

from tiermem import Memory

from tests.conftest import MemoryFactory, chat

SECRET = "Zyxwvutsrq-7731"


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_forget_user_erases_every_store(make_memory: MemoryFactory, tmp_path: Path) -> None:
    memory = make_memory("path")
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
    reopened = make_memory("path")
    assert [e.text for e in reopened.get_all("dan")] == ["Dan: I like jazz."]


def test_forget_unknown_user_is_a_no_op(memory: Memory) -> None:
    report = memory.forget_user("nobody")
    assert (report.entries, report.turns, report.audit_rows, report.stm_sessions) == (0, 0, 0, 0)


def test_user_can_start_again_after_being_forgotten(memory: Memory) -> None:
    memory.add(chat(("user", "I live in Ghent.")), user_id="erin")
    memory.forget_user("erin")
    result = memory.add(chat(("user", "I live in Ghent.")), user_id="erin")
    assert len(result.entries) == 1
    assert [e.text for e in memory.get_all("erin")] == ["Ana: I live in Ghent."]
