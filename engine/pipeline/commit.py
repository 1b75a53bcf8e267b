"""All-or-nothing writes: audit rows, source turns and the store change commit together."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from tiermem.components import Components
from tiermem.embedding.base import EmbedMode, Vectors, check_vectors
from tiermem.journal import AuditRecord
from tiermem.render import index_text
from tiermem.types import MemoryEntry, Turn

logger = logging.getLogger(__name__)


def embed_entries(c: Components, entries: Sequence[MemoryEntry]) -> Vectors:
    texts = [index_text(e) for e in entries]
    vectors = c.embedder.embed(texts, EmbedMode.DOCUMENT)
    return check_vectors(vectors, len(texts), c.store.dim, c.embedder.name)


def commit(
    c: Components,
    records: Sequence[AuditRecord],
    mutate: Callable[[], None],
    undo: Callable[[], None],
    turns: Sequence[Turn] = (),
) -> None:
    """Write ``records`` (and ``turns``) and apply ``mutate`` to the store, all or nothing:
    the store change runs inside the journal transaction and ``undo`` reverses it if the
    transaction does not commit."""
    try:
        with c.journal.transaction() as tx:
            tx.save_turns(turns)
            tx.record(records)
            mutate()
    except BaseException as exc:
        try:
            undo()
        except Exception as undo_exc:  # noqa: BLE001 - reported on the original error below
            logger.error("undo after a failed write also failed: %s", type(undo_exc).__name__)
            exc.add_note(f"tiermem: undoing the store write failed too: {undo_exc!r}")
        raise
