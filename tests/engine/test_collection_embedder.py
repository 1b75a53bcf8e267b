"""A user's collection records the embedder that wrote it: opening it with another is a typed
error that says to reindex, a collection from before the record is adopted, and
``tiermem reindex`` embeds the user's entries again so that search works with the new one."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient
from tiermem import Memory
from tiermem.cli import main
from tiermem.embedding.base import EmbedMode
from tiermem.embedding.hashing import HashEmbedder
from tiermem.errors import EmbedderMismatchError, StoreError
from tiermem.pipeline.reindex import reindex_user
from tiermem.settings import load_config
from tiermem.stores.base import EmbedderRecord
from tiermem.stores.qdrant import QdrantStore
from tiermem.types import MemoryEntry, MemoryKind, SearchFilters

from tests.conftest import T0, chat
from tests.fakes.ollama_server import OllamaProtocolServer, serving

DOCUMENT = EmbedMode.DOCUMENT
HASH = '[embedder]\nkind = "hash"\nmodel = "hash-384"\n'


@pytest.fixture
def nomic() -> Iterator[OllamaProtocolServer]:
    """nomic-embed-text as an Ollama server serves it (the test server's stand-in, 768-d)."""
    with serving(embedder=HashEmbedder(768)) as server:
        yield server


def config_file(tmp_path: Path, embedder: str) -> Path:
    path = tmp_path / "tiermem.toml"
    path.write_text(f'data_dir = "{tmp_path / "data"}"\n{embedder}')
    return path


def ollama(server: OllamaProtocolServer) -> str:
    return f'[embedder]\nkind = "ollama"\nhost = "{server.url}"\nretry_backoff_s = 0\n'


def remember(config: Path, *texts: str) -> None:
    with Memory(load_config(config, {})) as memory:
        for text in texts:
            memory.add(chat(("user", text)), user_id="maya")


def write(store: QdrantStore, n: int) -> list[MemoryEntry]:
    """``n`` entries of user ``ana``, embedded by the hash embedder."""
    entries = [
        MemoryEntry(str(uuid.uuid4()), "ana", f"fact number {i}", MemoryKind.TURN, T0, T0)
        for i in range(n)
    ]
    store.upsert("ana", entries, HashEmbedder(64).embed([e.text for e in entries], DOCUMENT))
    return entries


def test_opening_a_collection_with_another_embedder_is_a_typed_error(
    tmp_path: Path, nomic: OllamaProtocolServer
) -> None:
    config = config_file(tmp_path, HASH)
    remember(config, "My sister Ana lives in Lisbon.")
    with Memory(load_config(config_file(tmp_path, ollama(nomic)), {})) as memory:
        with pytest.raises(EmbedderMismatchError) as refused:
            memory.search("where does my sister live", user_id="maya")
        with pytest.raises(EmbedderMismatchError):
            memory.add(chat(("user", "Comet is a greyhound.")), user_id="maya")
        memory.add(chat(("user", "I live in Porto.")), user_id="rui")  # a new user: fine
    message = str(refused.value)
    assert "hash-384 (384-d)" in message
    assert "ollama:nomic-embed-text (768-d)" in message
    assert "tiermem reindex --user maya" in message
    assert (refused.value.recorded, refused.value.configured) == (
        "hash-384",
        "ollama:nomic-embed-text",
    )


def test_the_same_dimension_from_another_model_is_refused_too() -> None:
    client = QdrantClient(location=":memory:")
    write(QdrantStore(client, dim=64, prefix="t_", server=False, embedder="model-a"), 3)
    other = QdrantStore(client, dim=64, prefix="t_", server=False, embedder="model-b")
    with pytest.raises(EmbedderMismatchError, match=r"model-a \(64-d\).*model-b \(64-d\)"):
        other.count("ana")


def test_a_collection_without_a_record_is_adopted_by_the_embedder_that_opens_it() -> None:
    client = QdrantClient(location=":memory:")
    write(QdrantStore(client, dim=64, prefix="t_", server=False), 3)
    adopter = QdrantStore(client, dim=64, prefix="t_", server=False, embedder="hash-64")
    assert adopter.count("ana") == 3
    assert adopter.export_user("ana").embedder == EmbedderRecord("hash-64", 64)
    with pytest.raises(EmbedderMismatchError, match="hash-64"):
        QdrantStore(client, dim=64, prefix="t_", server=False, embedder="other").count("ana")


def test_reindex_makes_search_work_again_with_the_new_embedder(
    tmp_path: Path, nomic: OllamaProtocolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    old = config_file(tmp_path, HASH)
    remember(old, "My sister Ana lives in Lisbon.", "I adopted a greyhound called Comet.")
    with Memory(load_config(old, {})) as memory:
        before = memory.get_all("maya")
        memory.search("greyhound", user_id="maya")  # an access the reindex must keep
        counted = {e.id: e.access_count for e in memory.get_all("maya")}
    new = config_file(tmp_path, ollama(nomic))

    assert main(["reindex", "--user", "maya", "--config", str(new)]) == 0
    out = capsys.readouterr().out
    assert "reindexed 2 entries with ollama:nomic-embed-text (768-d)" in out
    assert "(written by hash-384 (384-d))" in out

    with Memory(load_config(new, {})) as memory:
        after = memory.get_all("maya")
        hits = memory.search("where does my sister live", user_id="maya", k=1)
        history = memory.history(hits[0].id, "maya")
    assert hits[0].entry.text == "Ana: My sister Ana lives in Lisbon."
    assert [(e.id, e.text, e.created_at) for e in after] == [
        (e.id, e.text, e.created_at) for e in before
    ]
    assert {e.id: e.access_count for e in after} == counted
    assert history  # the journal still knows the entry
    embedded = [t for r in nomic.requests if r["path"] == "/api/embed" for t in r["input"]]
    assert sum(t.startswith("search_document: ") for t in embedded) == 2


def test_reindex_of_a_user_without_a_collection_does_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reindex", "--user", "nobody", "--config", str(config_file(tmp_path, HASH))]) == 0
    assert "no MTM collection" in capsys.readouterr().out


def test_a_reindex_stopped_half_way_is_refused_until_run_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = QdrantClient(location=":memory:")
    write(QdrantStore(client, dim=64, prefix="t_", server=False, embedder="old"), 4)
    store = QdrantStore(client, dim=64, prefix="t_", server=False, embedder="hash-64")
    fill = QdrantStore._fill
    calls: list[str] = []

    def stop_before_the_rebuild(self: QdrantStore, name: str, *args: object) -> None:
        calls.append(name)
        if len(calls) == 2:  # the staging copy is complete; the user's was just dropped
            raise StoreError("the process stopped here")
        fill(self, name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(QdrantStore, "_fill", stop_before_the_rebuild)
    with pytest.raises(StoreError, match="stopped here"):
        reindex_user(store, HashEmbedder(64), "ana")
    monkeypatch.setattr(QdrantStore, "_fill", fill)
    fresh = QdrantStore(client, dim=64, prefix="t_", server=False, embedder="hash-64")
    with pytest.raises(StoreError, match="run it again"):
        fresh.list_entries("ana")
    report = reindex_user(fresh, HashEmbedder(64), "ana")
    assert report.entries == 4
    assert len(fresh.list_entries("ana", SearchFilters())) == 4
    assert not client.collection_exists(calls[0])  # the staging copy is gone
    fresh.drop_user("ana")
    assert not fresh.export_user("ana").found
