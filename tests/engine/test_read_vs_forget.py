"""A read racing ``forget_user`` of the same user: the collection can go between the store
finding it and asking it. Such a read answers as for a user with no memories (empty results,
``MemoryNotFoundError`` for ``get``), never with a store error. The drop is put exactly in that
window: the first call the read makes to the Qdrant client drops the collection first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tiermem import Memory, MemoryNotFoundError
from tiermem.stores.qdrant import QdrantStore

from tests.conftest import MemoryFactory, chat

READS = ("query_points", "query_batch_points", "scroll", "retrieve", "count")
Read = Callable[[Memory, str], object]


def _drop_on_next_read(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the store's next client read drop ana's collection just before it runs, as a
    ``forget_user`` in another thread would. The names of the reads that met the drop."""
    store = memory.components.store
    assert isinstance(store, QdrantStore)
    client = store._client  # the window is inside the store
    met: list[str] = []

    def wrap(name: str) -> Callable[..., Any]:
        original = getattr(client, name)

        def read(*args: Any, **kwargs: Any) -> Any:
            if not met:
                met.append(name)
                store.drop_user("ana")
            return original(*args, **kwargs)

        return read

    for name in READS:
        monkeypatch.setattr(client, name, wrap(name))
    return met


def _search(memory: Memory, memory_id: str) -> object:
    assert memory.search("the ocean", user_id="ana") == []
    return None


def _get_all(memory: Memory, memory_id: str) -> object:
    assert memory.get_all("ana") == []
    return None


def _get(memory: Memory, memory_id: str) -> object:
    with pytest.raises(MemoryNotFoundError):
        memory.get(memory_id, "ana")
    return None


@pytest.fixture(params=["memory", "path"])
def qdrant_memory(request: pytest.FixtureRequest, make_memory: MemoryFactory) -> Memory:
    return make_memory(request.param)


@pytest.mark.parametrize("read", [_search, _get_all, _get], ids=["search", "get_all", "get"])
def test_a_read_meeting_a_dropped_collection_finds_nothing(
    qdrant_memory: Memory, read: Read, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    memory = qdrant_memory
    entry = memory.add(chat(("user", "I swim in the ocean every morning.")), "ana").entries[0]
    memory.add(chat(("user", "I swim in the ocean too.")), "bob")
    met = _drop_on_next_read(memory, monkeypatch)
    read(memory, entry.id)
    assert met, "the read never reached the client: the test missed the window"
    monkeypatch.undo()
    # The store recovers: the user is as if forgotten, another user is untouched, and a new
    # add for the user creates the collection again.
    assert memory.get_all("ana") == []
    assert [e.text for e in memory.get_all("bob")] == ["Ana: I swim in the ocean too."]
    again = memory.add(chat(("user", "I like tea.")), "ana").entries[0]
    assert memory.get(again.id, "ana").text == "Ana: I like tea."
    assert [h.id for h in memory.search("tea", user_id="ana")] == [again.id]
