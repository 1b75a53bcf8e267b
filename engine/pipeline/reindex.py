"""``tiermem reindex``: one user's MTM entries embedded again with the configured embedder,
into a fresh collection that records it.

The entries are read back from the store as they are (text, kind, times, source turn ids,
supersede links, access statistics): only their vectors depend on the embedder, and a vector
is a pure function of the entry's index text (as ``embed_entries`` embeds it on every write),
so nothing is taken from the old vectors. Nothing changes in the journal: no entry changes.

>>> from tiermem.embedding.hashing import HashEmbedder
>>> from tiermem.stores.reference import ReferenceStore
>>> reindex_user(ReferenceStore(8), HashEmbedder(8), "ana")
ReindexReport(entries=0, previous=None, embedder=EmbedderRecord(name='hash-8', dim=8), found=False)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tiermem.embedding.base import Embedder, EmbedMode, check_vectors
from tiermem.render import index_text
from tiermem.stores.base import EmbedderRecord, MTMStore


@dataclass(frozen=True, slots=True)
class ReindexReport:
    """How many entries were embedded again, the embedder their collection recorded before
    (``None``: none recorded), the one it records now, and whether the user had a collection
    (without one, nothing was done)."""

    entries: int
    previous: EmbedderRecord | None
    embedder: EmbedderRecord
    found: bool = True


def reindex_user(store: MTMStore, embedder: Embedder, user_id: str) -> ReindexReport:
    """Embed ``user_id``'s entries again with ``embedder`` and replace their collection. A
    user with no collection is left without one."""
    stored = store.export_user(user_id)
    now = EmbedderRecord(embedder.name, embedder.dim)
    if not stored.found:
        return ReindexReport(0, None, now, found=False)
    texts = [index_text(e) for e in stored.entries]
    vectors = (
        check_vectors(
            embedder.embed(texts, EmbedMode.DOCUMENT), len(texts), store.dim, embedder.name
        )
        if texts
        else np.zeros((0, store.dim), dtype=np.float32)
    )
    store.replace_user(user_id, stored.entries, vectors)
    return ReindexReport(len(stored.entries), stored.embedder, now)
