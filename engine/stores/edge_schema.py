"""What an Edge shard holds, and the queries it answers: the server path's schema in Qdrant
Edge's own types (``qdrant_edge``, the ``edge`` extra).

The same as a collection on a Qdrant server (``tiermem.stores.qdrant``): one dense vector
``dense`` (cosine), BM25 over ``INDEX_TEXT`` with the server's default text index (the word
tokenizer, lowercased, no stemmer, no stop words, no length limits: what qdrant-client's
reference scorer, and so ``ReferenceStore``, tokenizes alike), and keyword / float indexes on
the fields that filters read (``superseded_by`` too, which every search filters on; not
``user_id``, which no filter reads in a shard of one user).

Two choices differ from a server collection, both for Edge 0.9.0:

- the online path never builds HNSW (``indexing_threshold=0``): ``optimize()`` holds the GIL
  and blocks the process, so there it only ever vacuums deleted points (see
  ``tiermem.stores.edge``). ``tiermem optimize`` builds the server's graph offline
  (``GRAPH_THRESHOLD_KB``, ``HNSW``: its threshold and parameters). Searches ask for no
  exact scan: a plain segment is searched in full whatever they ask (the reference store's
  ranking, to the score), a graph as a server searches it;
- filters never match a boolean: ``MatchValue(False)`` silently matches nothing in 0.9.0.
  "Not superseded" is ``IsEmptyCondition("superseded_by")`` (null or absent): Edge's
  ``set_payload`` of a null removes the key, so clearing a link leaves no null for the
  server's ``IsNullCondition`` to match.

>>> from tiermem.types import SearchFilters
>>> to_edge_filter(SearchFilters()).must[0].key
'superseded_by'
>>> to_edge_filter(SearchFilters(include_superseded=True)) is None
True
"""

from __future__ import annotations

import qdrant_edge as qe
from tiermem.stores.payload import INDEX_TEXT
from tiermem.types import SearchFilters

DENSE = "dense"

# Vectors and payload indexes on disk ("cold"), read through the page cache as queries touch
# them. Placed in memory (Edge's default for vectors), opening a shard faults in the whole
# preallocated 32 MiB first chunk of its vectors, whatever it holds. Edge 0.9.0 still faults
# in a mutable segment's text and keyword index pages on opening, whatever their placement:
# about 50 MiB of page cache per open shard (counted in RSS; clean, so reclaimable).
COLD = qe.Memory.Cold
# The server's default full-text index (qdrant.py creates it with only the scoring set), said
# out loud so that a change of Edge's defaults cannot change the tokens.
TEXT_INDEX = qe.TextIndexParams(
    tokenizer=qe.TokenizerType.Word,
    lowercase=True,
    ascii_folding=False,
    phrase_matching=False,
    stemmer=qe.DisabledStemmer(),
    scoring=qe.TextScoringParams(qe.TextScoringType.Bm25),
    memory=COLD,
)
KEYWORD = qe.KeywordIndexParams(memory=COLD)
PAYLOAD_INDEXES: tuple[tuple[str, qe.PayloadSchemaParams], ...] = (
    (INDEX_TEXT, TEXT_INDEX),
    ("kind", KEYWORD),
    ("session_id", KEYWORD),
    ("time_ts", qe.FloatIndexParams(memory=COLD)),
    ("superseded_by", KEYWORD),
)
# A Qdrant server collection's defaults, said out loud: a segment whose vectors pass 10,000 KB
# (KiB: about 6,700 vectors of 384 dimensions) gets an HNSW graph (m 16, ef_construct 100); a
# filter that leaves fewer points than full_scan_threshold (in KB of vectors) is searched in
# full.
GRAPH_THRESHOLD_KB = 10_000
HNSW = qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10_000)


def shard_config(dim: int, indexing_threshold_kb: int = 0) -> qe.EdgeConfig:
    """A shard of ``dim``-d cosine vectors, one search thread (a user's shard is one segment;
    64 open shards would otherwise start 64 thread pools), whose ``optimize()`` builds a graph
    in a segment past ``indexing_threshold_kb`` of vectors (0: never, the online path's)."""
    return qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine, memory=COLD)},
        payload_memory=COLD,
        hnsw_config=HNSW,
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=indexing_threshold_kb),
        max_search_threads=1,
    )


def to_edge_filter(filters: SearchFilters | None) -> qe.Filter | None:
    """The constraints of ``tiermem.stores.filtering.matches``, as an Edge filter."""
    if filters is None:
        return None
    must: list[qe.FieldCondition | qe.IsEmptyCondition] = []
    if not filters.include_superseded:
        must.append(qe.IsEmptyCondition("superseded_by"))
    if filters.kinds:
        must.append(qe.FieldCondition("kind", match=qe.MatchAny([k.value for k in filters.kinds])))
    if filters.session_id is not None:
        must.append(qe.FieldCondition("session_id", match=qe.MatchValue(filters.session_id)))
    if filters.since is not None or filters.until is not None:
        window = qe.RangeFloat(
            gte=filters.since.timestamp() if filters.since else None,
            lte=filters.until.timestamp() if filters.until else None,
        )
        must.append(qe.FieldCondition("time_ts", range=window))
    return qe.Filter(must=list(must)) if must else None


def dense_query(vector: list[float], query_filter: qe.Filter | None, limit: int) -> qe.QueryRequest:
    """The top ``limit`` by cosine, with payloads: exact in a plain segment, through the graph
    in one that ``tiermem optimize`` indexed."""
    return qe.QueryRequest(
        limit=limit,
        query=qe.Query.Nearest(vector, using=DENSE),
        filter=query_filter,
        with_payload=True,
    )


def bm25_query(text: str, query_filter: qe.Filter | None, limit: int) -> qe.QueryRequest:
    """The top ``limit`` by BM25 over the index text, with payloads."""
    return qe.QueryRequest(
        limit=limit,
        query=qe.TextQuery(INDEX_TEXT, text),
        filter=query_filter,
        with_payload=True,
    )
