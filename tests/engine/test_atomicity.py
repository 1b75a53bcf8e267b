"""A store, embedder or journal that fails in the middle of a write leaves no half-written
entry and no audit row; update and delete are undone the same way."""

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
from tiermem.types import MemoryEntry
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
    """Writes the first half of a batch, then fails, like a connection dropping mid-upsert."""

    armed = False

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        if not self.armed:
            return super().upsert(user_id, entries, vectors)
        half = max(1, len(entries) // 2)
        super().upsert(user_id, entries[:half], vectors[:half])
        raise StoreError("injected: connection lost mid-upsert")


class HalfWritingReference(ReferenceStore):
    armed = False

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        if not self.armed:
            return super().upsert(user_id, entries, vectors)
        super().upsert(user_id, entries[:1], vectors[:1])
        raise StoreError("injected: connection lost mid-upsert")


class CommitFailingJournal(Journal):
    armed = False

    def _commit(self) -> None:
        if self.armed:
            raise sqlite3.OperationalError("injected: disk I/O error")
        super()._commit()


def _memory(store: object = None) -> tuple[Memory, Components]:
    config = TiermemConfig.for_tests()
    base = build_components(config)
    components = replace(
        base,
        embedder=FlakyEmbedder(dim=384),
        store=store if store is not None else base.store,
        journal=CommitFailingJournal(None),
    )
    return Memory(config, components=components), components


def _snapshot(memory: Memory) -> tuple[list[MemoryEntry], int, tuple[object, ...], int]:
    """Entries, audit rows, STM, and how many of EXCHANGE's turns the journal holds."""
    c = memory.components
    exchange_ids = [t.turn_id for t in normalize_messages(EXCHANGE, "ana", "default", c.clock)]
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
    assert len(memory.add(EXCHANGE, user_id="ana").entries) == 4  # a retry stores it all


def test_embedder_failing_mid_add_leaves_nothing() -> None:
    memory, components = _memory()
    memory.add(chat(("user", "I have a cat.")), user_id="ana")
    before = _snapshot(memory)
    components.embedder.armed = True  # type: ignore[attr-defined]
    with pytest.raises(EmbedderError):
        memory.add(EXCHANGE, user_id="ana")
    assert _snapshot(memory) == before


def test_journal_failing_at_commit_undoes_the_store_write() -> None:
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
