"""The embedded BM25 postings give qdrant-client's own scores, after any edits."""

from __future__ import annotations

import random

import pytest
from qdrant_client.local.bm25 import DEFAULT_B, DEFAULT_K1, bm25_scores, document_tokens
from tiermem.stores.lexical_index import LexicalIndex

WORDS = [
    "cat",
    "dog",
    "bird",
    "the",
    "a",
    "of",
    "Lisbon",
    "porto",
    "bread",
    "oboe",
    "cello",
    "Mahler",
    "friday",
    "2024",
    "naïve",
]


def test_scores_equal_qdrant_clients_scorer_after_inserts_updates_and_removals() -> None:
    rng = random.Random(7)
    docs = {
        f"d{i}": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14))) for i in range(400)
    }
    index = LexicalIndex()
    index.upsert_many(docs.items())
    for doc_id in list(docs)[:60]:  # removals
        index.remove(doc_id)
        del docs[doc_id]
    for doc_id in list(docs)[60:90]:  # rewrites
        docs[doc_id] = "cat cat Lisbon bread"
        index.upsert(doc_id, docs[doc_id])
    corpus = {d: t for d, v in docs.items() if (t := document_tokens([v]))}
    assert len(index) == len(corpus)
    for query in ("cat Lisbon", "the bird of porto", "zebra", "Mahler mahler friday", ""):
        ours, theirs = index.scores(query), bm25_scores(corpus, query, DEFAULT_K1, DEFAULT_B)
        assert ours.keys() == theirs.keys()
        for doc_id, score in ours.items():
            assert score == pytest.approx(theirs[doc_id], rel=1e-12)


def test_removing_everything_leaves_an_empty_index() -> None:
    index = LexicalIndex()
    index.upsert("a", "cat")
    index.upsert("a", "dog")  # a rewrite replaces, never adds
    assert index.scores("cat") == {}
    index.remove("a")
    index.remove("missing")
    assert len(index) == 0
    assert index.scores("dog") == {}
