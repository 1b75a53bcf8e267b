"""The embedder a collection records, kept in the collection's own metadata (a Qdrant
collection's ``metadata``, on the server and in the embedded store alike), and the state of
a ``tiermem reindex`` that was rebuilding it.

A reindex writes the new vectors into a staging collection first (``staging_name``), marks it
``complete``, then rebuilds the user's collection from it (marked ``filling`` until every point
is in) and drops the staging one. Stopped anywhere, a collection marked ``filling``, or a
missing one beside a ``complete`` staging copy, is refused until the reindex is run again.

>>> meta = record_metadata(EmbedderRecord("hash-384", 384))
>>> meta
{'tiermem_embedder': 'hash-384', 'tiermem_embedder_dim': 384, 'tiermem_reindex': None}
>>> read_record(meta), reindex_state(meta)
(EmbedderRecord(name='hash-384', dim=384), None)
>>> read_record(None) is None, read_record({"other": 1}) is None
(True, True)
>>> staging_name("tiermem_mtm_u_ab")
'tiermem_mtm_u_ab_reindex'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from tiermem.errors import EmbedderMismatchError, StoreError
from tiermem.stores.base import EmbedderRecord

EMBEDDER_KEY: Final = "tiermem_embedder"
DIM_KEY: Final = "tiermem_embedder_dim"
REINDEX_KEY: Final = "tiermem_reindex"
ReindexState = Literal["staging", "complete", "filling"]


def record_metadata(
    record: EmbedderRecord | None, state: ReindexState | None = None
) -> dict[str, Any]:
    """A collection's metadata: its embedder (none: no record) and its reindex state. Every
    key is written each time, so a store that merges metadata keeps no stale state."""
    meta: dict[str, Any] = (
        {} if record is None else {EMBEDDER_KEY: record.name, DIM_KEY: record.dim}
    )
    return {**meta, REINDEX_KEY: state}


def read_record(metadata: Mapping[str, Any] | None) -> EmbedderRecord | None:
    """The embedder a collection's metadata records, or ``None``."""
    name = (metadata or {}).get(EMBEDDER_KEY)
    dim = (metadata or {}).get(DIM_KEY)
    if not isinstance(name, str) or not isinstance(dim, int):
        return None
    return EmbedderRecord(name, dim)


def reindex_state(metadata: Mapping[str, Any] | None) -> ReindexState | None:
    state = (metadata or {}).get(REINDEX_KEY)
    return state if state in ("staging", "complete", "filling") else None


STAGING_SUFFIX: Final = "_reindex"


def staging_name(name: str) -> str:
    """Where a reindex of collection ``name`` stages its new vectors (never a user's name:
    those end in their digest)."""
    return f"{name}{STAGING_SUFFIX}"


def judge_record(
    name: str,
    user_id: str,
    metadata: Mapping[str, Any] | None,
    size: int | None,
    expected: EmbedderRecord,
) -> Literal["ok", "adopt"]:
    """What an opened collection's metadata means for a store whose embedder is ``expected``:
    ``ok``; ``adopt`` one with no record and the right size (written before collections
    recorded their embedder); ``EmbedderMismatchError`` for another embedder's, and
    ``StoreError`` for one that a stopped reindex was rebuilding.

    >>> mine = EmbedderRecord("hash-384", 384)
    >>> [judge_record("c", "u", meta, 384, mine) for meta in (record_metadata(mine), None)]
    ['ok', 'adopt']
    """
    if reindex_state(metadata) is not None:
        raise StoreError(
            f"collection {name} was being rebuilt by a `tiermem reindex` that stopped; "
            "run it again for this user"
        )
    recorded = read_record(metadata)
    if recorded is None and size == expected.dim:
        return "adopt"
    if recorded != expected:
        found = recorded or EmbedderRecord("an unrecorded embedder", size or 0)
        raise EmbedderMismatchError(user_id, found.name, found.dim, expected.name, expected.dim)
    return "ok"
