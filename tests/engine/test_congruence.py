"""Reference-vs-Qdrant congruence: the same writes, searches and filters on the exact
in-memory store and on Qdrant (in memory and on disk through qdrant-client, and Qdrant Edge
shards) give the same ids in the same order."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient
from tiermem.embedding.base import EmbedMode
from tiermem.embedding.hashing import HashEmbedder
from tiermem.stores.base import (
    TIE_ROOM,
    MTMStore,
    Retrievals,
    ScoredEntry,
    hybrid_nearest,
    nearest,
)
from tiermem.stores.edge import EdgeStore
from tiermem.stores.qdrant import QdrantStore
from tiermem.stores.reference import ReferenceStore
from tiermem.types import MemoryEntry, MemoryKind, SearchFilters

from tests.conftest import T0

WORDS = [
    "garden",
    "tomato",
    "bike",
    "train",
    "Lisbon",
    "sister",
    "bakery",
    "flight",
    "cello",
    "exam",
    "cat",
    "Utrecht",
    "marathon",
    "shoes",
    "fish",
    "doctor",
    "night",
    "shift",
    "canal",
    "passport",
    "oboe",
    "jazz",
    "tea",
    "bees",
]
USERS = ("u1", "u2")


def _corpus(seed: int, n: int) -> list[MemoryEntry]:
    rng = random.Random(seed)
    entries = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
        created = T0 + timedelta(hours=i)
        entries.append(
            MemoryEntry(
                id=f"00000000-0000-4000-8000-{i:012d}",
                user_id=USERS[i % 2],
                text=text,
                kind=rng.choice(list(MemoryKind)),
                created_at=created,
                updated_at=created,
                event_time=created - timedelta(days=rng.randint(0, 60))
                if rng.random() < 0.7
                else None,
                source_turn_ids=(f"t{i}",),
                session_id=rng.choice(("s1", "s2", "s3")),
                superseded_by="00000000-0000-4000-8000-999999999999"
                if rng.random() < 0.15
                else None,
            )
        )
    return entries


FILTERS = [
    SearchFilters(),
    SearchFilters(include_superseded=True),
    SearchFilters(kinds=(MemoryKind.FACT, MemoryKind.EVENT)),
    SearchFilters(since=T0 - timedelta(days=20), until=T0 + timedelta(days=2)),
    SearchFilters(until=T0 - timedelta(days=30)),
    SearchFilters(session_id="s2", kinds=(MemoryKind.PLAN,), include_superseded=True),
]


def _tie_groups(results: list[ScoredEntry]) -> list[dict[str, MemoryEntry]]:
    groups: list[list[ScoredEntry]] = []
    for r in results:
        if groups and abs(groups[-1][-1].score - r.score) < 1e-5:
            groups[-1].append(r)
        else:
            groups.append([r])
    return [{r.entry.id: r.entry for r in group} for group in groups]


def _assert_same_ranking(expected: list[ScoredEntry], actual: list[ScoredEntry]) -> None:
    """Same scores in the same order; ids may differ only inside a group of tied scores (and
    the last group may be cut differently by the limit)."""
    assert [a.score for a in actual] == pytest.approx([e.score for e in expected], abs=1e-5)
    want, got = _tie_groups(expected), _tie_groups(actual)
    assert len(want) == len(got)
    for w, g in zip(want[:-1], got[:-1], strict=True):
        assert g == w
    if want:
        assert len(got[-1]) == len(want[-1])


@pytest.fixture(params=["memory", "path", "edge"])
def qdrant_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MTMStore]:
    store: MTMStore
    if request.param == "edge":
        store = EdgeStore(tmp_path / "edge", dim=64, prefix="c_")
    else:
        client = (
            QdrantClient(":memory:")
            if request.param == "memory"
            else QdrantClient(path=str(tmp_path))
        )
        store = QdrantStore(client, dim=64, prefix="c_", server=False)
    yield store
    store.close()


def _write(store: MTMStore, entries: list[MemoryEntry], embedder: HashEmbedder) -> None:
    for user in USERS:
        mine = [e for e in entries if e.user_id == user]
        store.upsert(user, mine, embedder.embed([e.text for e in mine], EmbedMode.DOCUMENT))


def test_searches_and_filters_agree(qdrant_store: MTMStore) -> None:
    embedder = HashEmbedder(dim=64)
    entries = _corpus(seed=7, n=160)
    reference = ReferenceStore(64)
    for store in (reference, qdrant_store):
        _write(store, entries, embedder)
        # the same later mutations on both: deletes, an update, access statistics
        store.delete("u1", [entries[0].id, entries[2].id, "not-a-uuid"])
        store.upsert("u2", [entries[1]], embedder.embed(["cello exam cello"], EmbedMode.DOCUMENT))
        for _ in range(4):  # entries[0] is not u2's: skipped
            store.record_access("u2", {e.id: Retrievals(1, T0) for e in (entries[3], entries[0])})
    queries = ["sister bakery Lisbon", "night shift doctor", "cello exam", "train flight canal"]
    compared = 0
    for user in USERS:
        assert qdrant_store.count(user) == reference.count(user)
        assert qdrant_store.list_entries(user) == reference.list_entries(user)
        for filters in FILTERS:
            assert qdrant_store.list_entries(user, filters) == reference.list_entries(user, filters)
            for query in queries:
                vector = embedder.embed([query], EmbedMode.QUERY)[0]
                expected = reference.search(user, vector, filters, 10)
                actual = qdrant_store.search(user, vector, filters, 10)
                _assert_same_ranking(expected, actual)
                compared += len(expected)
    assert compared > 200  # the filters leave real work to compare
    assert qdrant_store.get("u2", [entries[3].id])[0].access_count == 4


def test_unknown_user_and_ids_agree(qdrant_store: MTMStore) -> None:
    reference = ReferenceStore(64)
    vector = np.ones(64, dtype=np.float32)
    for store in (reference, qdrant_store):
        assert store.search("ghost", vector, SearchFilters(), 5) == []
        assert store.get("ghost", ["x"]) == []
        assert store.list_entries("ghost") == []
        assert store.count("ghost") == 0
        store.delete("ghost", ["x"])
        store.drop_user("ghost")


def test_hybrid_search_agrees(qdrant_store: MTMStore) -> None:
    embedder = HashEmbedder(dim=64)
    entries = _corpus(seed=11, n=120)
    reference = ReferenceStore(64)
    probe = embedder.embed(["cello"], EmbedMode.QUERY)[0]
    for store in (reference, qdrant_store):
        _write(store, entries, embedder)
        for user in USERS:  # builds the embedded BM25 postings, which must then keep in step
            store.hybrid_search(user, probe, "cello", SearchFilters(), 3)
        store.delete("u1", [entries[4].id])
        mine = next(e for e in entries if e.user_id == "u2")
        rewritten = replace(mine, text="cello lessons with my sister in Lisbon")
        store.upsert("u2", [rewritten], embedder.embed([rewritten.text], EmbedMode.DOCUMENT))
    compared = 0
    for user in USERS:
        for filters in FILTERS:
            for query in ("sister bakery Lisbon", "cello", "night shift passport tea"):
                vector = embedder.embed([query], EmbedMode.QUERY)[0]
                want = reference.hybrid_search(user, vector, query, filters, 8)
                got = qdrant_store.hybrid_search(user, vector, query, filters, 8)
                _assert_same_ranking(want.dense, got.dense)
                _assert_same_ranking(want.lexical, got.lexical)
                compared += len(want.lexical)
    assert compared > 100


def test_stored_vectors_agree_and_are_what_search_scores(qdrant_store: MTMStore) -> None:
    """Both stores give back an entry's stored unit vector by id (an updated entry's new
    one; deleted, unknown and other users' ids left out), and searching by it scores the
    entry itself 1: what later statements search from without embedding the hit again."""
    embedder = HashEmbedder(dim=64)
    entries = _corpus(seed=3, n=40)
    newer = embedder.embed(["cello exam cello"], EmbedMode.DOCUMENT)
    reference = ReferenceStore(64)
    for store in (reference, qdrant_store):
        _write(store, entries, embedder)
        store.upsert("u2", [entries[1]], newer)
        store.delete("u1", [entries[0].id])
    ids = [e.id for e in entries[:6]] + ["not-a-uuid", "00000000-0000-4000-8000-777777777777"]
    want = reference.stored_vectors("u2", ids)
    got = qdrant_store.stored_vectors("u2", ids)
    assert sorted(got) == sorted(want) == [entries[1].id, entries[3].id, entries[5].id]
    for i, vector in want.items():
        np.testing.assert_allclose(got[i], vector, atol=1e-5)
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(want[entries[1].id], newer[0] / np.linalg.norm(newer[0]), atol=1e-5)
    assert entries[0].id not in qdrant_store.stored_vectors("u1", [entries[0].id, entries[2].id])
    assert (
        qdrant_store.stored_vectors("nobody", ids) == reference.stored_vectors("nobody", ids) == {}
    )
    top = qdrant_store.search("u2", want[entries[3].id], SearchFilters(include_superseded=True), 1)
    assert top[0].entry.id == entries[3].id
    assert top[0].score == pytest.approx(1.0, abs=1e-5)


def test_tied_scores_come_in_one_order_on_every_store(qdrant_store: MTMStore) -> None:
    """The same words stored under several ids (a turn and its one sentence, a phrase said
    twice) score alike; every store hands them over in one order (at one time, of one kind and
    text: by id), whatever order it was given them in, so the fused ranking and what is
    delivered do not depend on the store."""
    embedder = HashEmbedder(dim=64)
    said = "cello lessons with my sister in Lisbon"
    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in (5, 1, 4, 2, 3)]  # not in id order
    entries = [
        MemoryEntry(i, "u1", said if n < 4 else "tea in the garden", MemoryKind.TURN, T0, T0)
        for n, i in enumerate(ids)
    ]
    reference = ReferenceStore(64)
    query = "cello Lisbon"
    vector = embedder.embed([query], EmbedMode.QUERY)[0]
    ranked = {}
    for store in (reference, qdrant_store):
        _write(store, entries, embedder)
        found = store.hybrid_search("u1", vector, query, SearchFilters(), 8)
        ranked[store] = ([s.entry.id for s in found.dense], [s.entry.id for s in found.lexical])
    tied = sorted(ids[:4])
    assert ranked[reference][0][:4] == tied
    assert ranked[reference][1] == tied  # the fifth shares no word with the query
    assert ranked[qdrant_store] == ranked[reference]


def test_a_limit_that_cuts_a_tie_keeps_the_same_entries_on_every_store(
    qdrant_store: MTMStore,
) -> None:
    """Six entries of the same words, a limit of three: every engine returns three of the six
    (its own three), and ``nearest`` / ``hybrid_nearest`` fetch past the limit so that
    ``best_first`` chooses: the oldest three, on every store."""
    embedder = HashEmbedder(dim=64)
    said = "cello lessons with my sister in Lisbon"
    # given newest first, in no id order: an engine's own order is neither time nor id
    order = (6, 2, 5, 1, 4, 3)
    entries = [
        MemoryEntry(
            f"00000000-0000-4000-8000-{9 - n:012d}",
            "u1",
            said,
            MemoryKind.TURN,
            T0 + timedelta(minutes=n),
            T0 + timedelta(minutes=n),
        )
        for n in order
    ]
    reference = ReferenceStore(64)
    vector = embedder.embed(["cello Lisbon"], EmbedMode.QUERY)[0]
    oldest = [e.id for e in sorted(entries, key=lambda e: e.created_at)[:3]]
    for store in (reference, qdrant_store):
        _write(store, entries, embedder)
        dense = nearest(store, "u1", vector, SearchFilters(), 3)
        hits = hybrid_nearest(store, "u1", vector, "cello Lisbon", SearchFilters(), 3)
        assert [s.entry.id for s in dense] == oldest
        assert [s.entry.id for s in hits.dense] == oldest
        assert [s.entry.id for s in hits.lexical] == oldest


def test_a_wide_bm25_tie_at_the_cut_is_left_out_on_every_store(qdrant_store: MTMStore) -> None:
    """Thirty entries that share one word with the query, at one length, tie under BM25:
    more than ``TIE_ROOM`` past a limit of three, so no store can tell which of them it would
    keep. Every store leaves the group out, and keeps what scores better."""
    embedder = HashEmbedder(dim=64)
    words = [w for w in WORDS if w != "cello"]
    entries = [
        MemoryEntry(
            f"00000000-0000-4000-8000-{(17 * n) % 31:012d}",
            "u1",
            f"cello {words[n % len(words)]} {words[(n + 5) % len(words)]}",
            MemoryKind.TURN,
            T0 + timedelta(minutes=(7 * n) % 30),
            T0,
        )
        for n in range(30)
    ]
    best = MemoryEntry(
        "00000000-0000-4000-8000-000000000099", "u1", "cello", MemoryKind.FACT, T0, T0
    )
    vector = embedder.embed(["cello"], EmbedMode.QUERY)[0]
    for store in (ReferenceStore(64), qdrant_store):
        _write(store, [*entries, best], embedder)
        hits = hybrid_nearest(store, "u1", vector, "cello", SearchFilters(), 3)
        assert [s.entry.id for s in hits.lexical] == [best.id]
        everything = hybrid_nearest(store, "u1", vector, "cello", SearchFilters(), 40)
        assert len(everything.lexical) == 31  # all of it fits: nothing is left out


def test_a_dense_tie_past_the_fetch_margin_is_left_out() -> None:
    """Copies of one text past ``TIE_ROOM`` at the cut: left out, and what scores better
    stays; a limit that takes them all keeps them all."""
    store = ReferenceStore(4)
    at = T0
    same = [
        MemoryEntry(f"00000000-0000-4000-8000-{i:012d}", "u1", "same", MemoryKind.TURN, at, at)
        for i in range(TIE_ROOM + 5)
    ]
    best = MemoryEntry(
        "00000000-0000-4000-8000-999999999999", "u1", "best", MemoryKind.FACT, at, at
    )
    vectors = np.array(
        [[1.0, 1.0, 0.0, 0.0]] * len(same) + [[1.0, 0.0, 0.0, 0.0]], dtype=np.float32
    )
    store.upsert("u1", [*same, best], vectors)
    query = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    assert [s.entry.id for s in nearest(store, "u1", query, SearchFilters(), 3)] == [best.id]
    assert len(nearest(store, "u1", query, SearchFilters(), len(same) + 1)) == len(same) + 1
