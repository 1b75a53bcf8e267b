"""A store, embedder or journal that fails in the middle of a write leaves no half-written
entry and no audit row; update, delete and eviction are undone the same way. A rollback the
store refuses too, an erasure the store interrupts, and a write whose completion the journal
could not record are finished before the next write. (Crashes: ``test_crash_recovery``.)"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace

import pytest
from qdrant_client import QdrantClient
from tiermem import EmbedderError, Memory, StoreError, TiermemConfig
from tiermem.components import Components, build_components
from tiermem.embedding.base import EmbedMode, Vectors
from tiermem.embedding.hashing import HashEmbedder
from tiermem.errors import AuditError
from tiermem.journal import Journal
from tiermem.stores.qdrant import QdrantStore
from tiermem.stores.reference import ReferenceStore
from tiermem.types import AuditOp, MemoryEntry
from tiermem.validation import normalize_messages

from tests.conftest import chat

EXCHANGE = chat(
    ("user", "I play the oboe."),
    ("assistant", "Since when?"),
    ("user", "Since school, in an orchestra."),
    ("assistant", "Which orchestra?"),
)


class FlakyEmbedder(HashEmbedder):
    armed = False

    def embed(self, texts: Sequence[str], mode: EmbedMode) -> Vectors:
        if self.armed:
            raise EmbedderError("injected: embedder died")
        return super().embed(texts, mode)


class HalfWritingQdrant(QdrantStore):
    """Writes the first half of a batch, then fails, like a connection dropping mid-upsert
    (once: the next call finds it back)."""

    armed = False

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        if not self.armed:
            return super().upsert(user_id, entries, vectors)
        half = max(1, len(entries) // 2)
        super().upsert(user_id, entries[:half], vectors[:half])
        self.armed = False  # the connection comes back
        raise StoreError("injected: connection lost mid-upsert")


class HalfWritingReference(ReferenceStore):
    armed = False

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        if not self.armed:
            return super().upsert(user_id, entries, vectors)
        super().upsert(user_id, entries[:1], vectors[:1])
        self.armed = False
        raise StoreError("injected: connection lost mid-upsert")


class CommitFailingJournal(Journal):
    armed = False

    def _commit(self) -> None:
        if self.armed:
            raise sqlite3.OperationalError("injected: disk I/O error")
        super()._commit()


class FinishFailingJournal(Journal):
    """Cannot record, once, that a write is done."""

    fail_finish = False

    def finish(self, op_id: int) -> None:
        if self.fail_finish:
            self.fail_finish = False
            raise AuditError("injected: disk I/O error while marking a write done")
        super().finish(op_id)


class DownStore(ReferenceStore):
    """A store whose writes all fail while it is down, reads still work."""

    down = False

    def _check(self) -> None:
        if self.down:
            raise StoreError("injected: store unreachable")

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        self._check()
        super().upsert(user_id, entries, vectors)

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        self._check()
        super().delete(user_id, ids)

    def drop_user(self, user_id: str) -> None:
        self._check()
        super().drop_user(user_id)


def _memory(
    store: object = None, journal: Journal | None = None, capacity: int = 10_000
) -> tuple[Memory, Components]:
    config = TiermemConfig.for_tests()
    base = build_components(config)
    components = replace(
        base,
        embedder=FlakyEmbedder(dim=384),
        store=store if store is not None else base.store,
        journal=journal if journal is not None else CommitFailingJournal(None),
        policy=replace(base.policy, capacity=capacity),
    )
    return Memory(config, components=components), components


def _snapshot(memory: Memory) -> tuple[list[MemoryEntry], int, tuple[object, ...], int]:
    """Entries, audit rows, STM, and how many of EXCHANGE's turns the journal holds."""
    c = memory.components
    exchange_ids = [
        t.turn_id for t in normalize_messages(EXCHANGE, "ana", "default", c.clock.now()).turns
    ]
    return (
        memory.get_all("ana"),
        c.journal.count_audit("ana"),
        memory.working_memory("ana"),
        len(c.journal.turns("ana", exchange_ids)),
    )


@pytest.fixture(params=["qdrant", "reference"])
def half_writing_store(request: pytest.FixtureRequest) -> HalfWritingQdrant | HalfWritingReference:
    if request.param == "qdrant":
        return HalfWritingQdrant(QdrantClient(":memory:"), dim=384, prefix="t_", server=False)
    return HalfWritingReference(384)


def test_store_failing_mid_add_leaves_nothing(
    half_writing_store: HalfWritingQdrant | HalfWritingReference,
) -> None:
    memory, _ = _memory(half_writing_store)
    memory.add(chat(("user", "I have a cat.")), user_id="ana")
    before = _snapshot(memory)
    half_writing_store.armed = True
    with pytest.raises(StoreError, match="mid-upsert"):
        memory.add(EXCHANGE, user_id="ana")
    assert _snapshot(memory) == before
    assert before[3] == 0
    half_writing_store.armed = False
    # a retry stores it all: 4 turns and the 3 exchanges between them
    assert len(memory.add(EXCHANGE, user_id="ana").entries) == 7


def test_embedder_failing_mid_add_leaves_nothing() -> None:
    memory, components = _memory()
    memory.add(chat(("user", "I have a cat.")), user_id="ana")
    before = _snapshot(memory)
    components.embedder.armed = True  # type: ignore[attr-defined]
    with pytest.raises(EmbedderError):
        memory.add(EXCHANGE, user_id="ana")
    assert _snapshot(memory) == before


def test_journal_failing_at_commit_leaves_the_store_untouched() -> None:
    memory, components = _memory()
    memory.add(chat(("user", "I have a cat.")), user_id="ana")
    before = _snapshot(memory)
    components.journal.armed = True  # type: ignore[attr-defined]
    with pytest.raises(AuditError, match="disk I/O"):
        memory.add(EXCHANGE, user_id="ana")
    assert _snapshot(memory) == before
    assert components.store.count("ana") == 1


def test_journal_failing_undoes_update_and_delete() -> None:
    memory, components = _memory()
    entry = memory.add(chat(("user", "I have a cat.")), user_id="ana").entries[0]
    components.journal.armed = True  # type: ignore[attr-defined]
    with pytest.raises(AuditError):
        memory.update(entry.id, "I have two cats.", "ana")
    assert memory.get(entry.id, "ana").text == entry.text
    assert memory.search("I have a cat", "ana", k=1)[0].entry.id == entry.id
    with pytest.raises(AuditError):
        memory.delete(entry.id, "ana")
    assert memory.get(entry.id, "ana").text == entry.text
    components.journal.armed = False  # type: ignore[attr-defined]
    assert [e.op for e in memory.history(entry.id, "ana")] == ["ADD"]


def test_store_failing_mid_update_delete_or_eviction_leaves_nothing(
    half_writing_store: HalfWritingQdrant | HalfWritingReference,
) -> None:
    memory, components = _memory(half_writing_store, capacity=3)
    for text in ("I have a cat.", "I live in Ghent.", "I like tea."):
        memory.add(chat(("user", text)), user_id="ana")
    entry = memory.get_all("ana")[0]
    before = _snapshot(memory)
    half_writing_store.armed = True
    with pytest.raises(StoreError):
        memory.update(entry.id, "I have two cats.", "ana")
    assert _snapshot(memory) == before
    half_writing_store.armed = False

    # A delete (and an eviction, which deletes) that the store refuses after the journal
    # committed: nothing of it stays.
    original = half_writing_store.delete

    def refuse(user_id: str, ids: Sequence[str]) -> None:
        raise StoreError("injected: delete refused")

    half_writing_store.delete = refuse  # type: ignore[method-assign]
    with pytest.raises(StoreError, match="delete refused"):
        memory.delete(entry.id, "ana")
    assert _snapshot(memory) == before
    # The 4th entry evicts the 1st: the eviction is undone, the add stands and says so.
    added = memory.add(chat(("user", "I play chess.")), user_id="ana")
    assert added.eviction_error is not None
    assert "delete refused" in added.eviction_error
    assert memory.get(added.entries[0].id, "ana").text == "Ana: I play chess."
    assert [e.op for e in memory.history(entry.id, "ana")] == ["ADD"]
    half_writing_store.delete = original  # type: ignore[method-assign]
    assert not components.journal.has_unfinished()


def test_a_rollback_the_store_refuses_is_finished_before_the_next_write() -> None:
    store = DownStore(384)
    memory, components = _memory(store)
    entry = memory.add(chat(("user", "I have a cat.")), user_id="ana").entries[0]
    store.down = True
    with pytest.raises(StoreError) as failed:
        memory.update(entry.id, "I have two cats.", "ana")
    assert any("rolling this write back failed too" in n for n in failed.value.__notes__)
    assert [e.op for e in memory.history(entry.id, "ana")] == [AuditOp.ADD]
    with pytest.raises(StoreError):  # nothing is written past an unfinished rollback
        memory.add(chat(("user", "I have a dog.")), user_id="ana")
    store.down = False
    memory.add(chat(("user", "I have a dog.")), user_id="ana")
    assert [e.text for e in memory.get_all("ana")] == ["Ana: I have a cat.", "Ana: I have a dog."]
    assert [e.op for e in memory.history(entry.id, "ana")] == [AuditOp.ADD]
    assert not components.journal.has_unfinished()


def test_an_erasure_the_store_interrupts_is_finished_before_the_next_write() -> None:
    store = DownStore(384)
    memory, components = _memory(store)
    memory.add(chat(("user", "My locker code is 7731.")), user_id="ana", session_id="s1")
    store.down = True
    with pytest.raises(StoreError):
        memory.forget_user("ana")
    store.down = False
    memory.add(chat(("user", "I like jazz.")), user_id="bob")
    assert memory.get_all("ana") == []
    assert components.journal.count_audit("ana") == 0
    assert components.journal.user_ids() == ["bob"]
    assert memory.working_memory("ana", "s1") == ()
    assert not components.journal.has_unfinished()


def test_a_write_whose_completion_cannot_be_recorded_still_succeeds_once() -> None:
    journal = FinishFailingJournal(None)
    memory, _ = _memory(journal=journal)
    journal.fail_finish = True
    (entry,) = memory.add(chat(("user", "I have a cat.")), user_id="ana").entries
    assert journal.has_unfinished()  # applied again (a no-op) and finished by the next write
    memory.add(chat(("user", "I have a dog.")), user_id="ana")
    assert not journal.has_unfinished()
    assert [e.text for e in memory.get_all("ana")] == ["Ana: I have a cat.", "Ana: I have a dog."]
    assert [e.op for e in memory.history(entry.id, "ana")] == [AuditOp.ADD]
