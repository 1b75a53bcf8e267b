"""User B never sees, updates or deletes user A's entries, through any API."""

from __future__ import annotations

import pytest
from tiermem import Memory, MemoryNotFoundError
from tiermem.stores.naming import collection_name

from tests.conftest import chat


@pytest.fixture
def two_users(memory: Memory) -> Memory:
    memory.add(
        chat(
            ("user", "My passport number is in the blue folder."),
            ("user", "I fly to Oslo on Friday."),
        ),
        user_id="alice",
    )
    memory.add(chat(("user", "I fly to Rome next week."), speaker="Bob"), user_id="bob")
    return memory


def test_search_and_answer_only_see_own_entries(two_users: Memory) -> None:
    hits = two_users.search("passport blue folder Oslo", "bob", k=10)
    assert hits, "bob has his own entry to find"
    assert all(h.entry.user_id == "bob" for h in hits)
    assert all("Oslo" not in h.entry.text and "passport" not in h.entry.text for h in hits)
    result = two_users.answer("where is my passport", "bob")
    assert "passport" not in result.text
    assert all(t.user_id == "bob" for t in result.source_turns.values())


def test_get_update_delete_history_refuse_other_users_ids(two_users: Memory) -> None:
    alice_entry = two_users.get_all("alice")[0]
    for call in (
        lambda: two_users.get(alice_entry.id, "bob"),
        lambda: two_users.update(alice_entry.id, "hijacked", "bob"),
        lambda: two_users.delete(alice_entry.id, "bob"),
        lambda: two_users.history(alice_entry.id, "bob"),
    ):
        with pytest.raises(MemoryNotFoundError):
            call()
    assert two_users.get(alice_entry.id, "alice") == alice_entry
    assert len(two_users.history(alice_entry.id, "alice")) == 1


def test_get_all_and_source_turns_are_per_user(two_users: Memory) -> None:
    assert {e.user_id for e in two_users.get_all("alice")} == {"alice"}
    assert {e.user_id for e in two_users.get_all("bob")} == {"bob"}
    alice_hits = two_users.search("Oslo", "alice", k=1)
    # Bob asking for Alice's source turns gets nothing back.
    assert two_users.source_turns(alice_hits, "bob") == {}


def test_forgetting_one_user_leaves_the_other_intact(two_users: Memory) -> None:
    bob_before = two_users.get_all("bob")
    two_users.forget_user("alice")
    assert two_users.get_all("alice") == []
    assert two_users.get_all("bob") == bob_before


def test_same_turn_text_for_two_users_gives_two_entries(memory: Memory) -> None:
    messages = chat(("user", "I like tea."))
    a = memory.add(messages, user_id="alice").entries[0]
    b = memory.add(messages, user_id="bob").entries[0]
    assert a.id != b.id
    memory.delete(a.id, "alice")
    assert memory.get(b.id, "bob").text == b.text


@pytest.mark.parametrize(
    ("first", "second"),
    [("alice", "Alice"), ("a/b", "a_b"), ("ü", "u"), ("x" * 128, "x" * 127), ("a b", "a_b")],
)
def test_similar_user_ids_get_distinct_collections(first: str, second: str) -> None:
    assert collection_name("tiermem_mtm_", first) != collection_name("tiermem_mtm_", second)
    for name in (collection_name("tiermem_mtm_", first), collection_name("tiermem_mtm_", second)):
        assert name.replace("_", "").isalnum()


def test_a_foreign_point_planted_in_a_collection_is_never_returned() -> None:
    """Defence in depth: even if a point of user B ended up in A's collection (a naming bug,
    a hand edit), no read hands it to A."""
    from qdrant_client import QdrantClient, models
    from tiermem.embedding.base import EmbedMode
    from tiermem.embedding.hashing import HashEmbedder
    from tiermem.stores.payload import entry_to_payload
    from tiermem.stores.qdrant import DENSE, QdrantStore
    from tiermem.types import MemoryEntry, MemoryKind, SearchFilters

    from tests.conftest import T0

    client = QdrantClient(":memory:")
    store = QdrantStore(client, dim=384, prefix="t_", server=False)
    embedder = HashEmbedder()

    def entry(i: int, user: str, text: str) -> MemoryEntry:
        return MemoryEntry(
            f"00000000-0000-4000-8000-00000000000{i}", user, text, MemoryKind.FACT, T0, T0
        )

    mine = entry(1, "alice", "alice likes tea")
    store.upsert("alice", [mine], embedder.embed([mine.text], EmbedMode.DOCUMENT))
    planted = entry(2, "bob", "bob secret tea recipe")
    vector = embedder.embed([planted.text], EmbedMode.DOCUMENT)[0].tolist()
    point = models.PointStruct(
        id=planted.id, vector={DENSE: vector}, payload=entry_to_payload(planted)
    )
    client.upsert(collection_name("t_", "alice"), points=[point])

    query = embedder.embed(["bob secret tea recipe"], EmbedMode.QUERY)[0]
    assert [s.entry.id for s in store.search("alice", query, SearchFilters(), 10)] == [mine.id]
    assert store.get("alice", [planted.id, mine.id]) == [mine]
    assert store.list_entries("alice") == [mine]
