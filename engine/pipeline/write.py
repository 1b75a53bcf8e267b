"""The write path: extract -> materialise -> skip known -> embed -> commit (journal + store).

A failure anywhere before the journal commits leaves nothing behind: the store write happens
inside the journal transaction and is undone if the transaction does not commit.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from tiermem.components import Components
from tiermem.embedding.base import EmbedMode, Vectors, check_vectors
from tiermem.journal import AuditRecord
from tiermem.pipeline.extract import CandidateEntry
from tiermem.render import index_text
from tiermem.types import AddResult, AuditOp, MemoryEntry, Turn

logger = logging.getLogger(__name__)

_ENTRY_NAMESPACE = uuid.UUID("6f1d9c8e-3b0a-5c4e-9d2f-7a1b2c3d4e5f")


def entry_id_for(user_id: str, candidate: CandidateEntry) -> str:
    """A stable id when the candidate has a stable key, else a fresh one."""
    if candidate.stable_key is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_ENTRY_NAMESPACE, f"{user_id}\x1f{candidate.stable_key}"))


def materialise(
    candidates: Sequence[CandidateEntry], user_id: str, now: datetime
) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            id=entry_id_for(user_id, c),
            user_id=user_id,
            text=c.text,
            kind=c.kind,
            created_at=now,
            updated_at=now,
            event_time=c.event_time,
            source_turn_ids=c.source_turn_ids,
            session_id=c.session_id,
        )
        for c in candidates
    ]


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
    """Write ``records`` (and ``turns``) and apply ``mutate`` to the store, all or nothing."""
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


def run_add(c: Components, user_id: str, session_id: str, turns: Sequence[Turn]) -> AddResult:
    """Store ``turns`` as source turns and the extractor's entries as MTM, then update STM."""
    extraction = c.extractor.extract(turns, c.stm.window(user_id, session_id))
    entries = materialise(extraction.candidates, user_id, c.clock.now())
    known = {e.id for e in c.store.get(user_id, [e.id for e in entries])}
    fresh = [e for e in entries if e.id not in known]
    vectors = embed_entries(c, fresh) if fresh else None
    now = c.clock.now()
    records = [
        AuditRecord(
            now,
            user_id,
            e.id,
            AuditOp.ADD,
            None,
            e.text,
            c.extractor.name,
            {"source_turn_ids": list(e.source_turn_ids), "kind": e.kind.value},
        )
        for e in fresh
    ]
    ids = [e.id for e in fresh]

    def mutate() -> None:
        if vectors is not None:
            c.store.upsert(user_id, fresh, vectors)

    commit(c, records, mutate, undo=lambda: c.store.delete(user_id, ids), turns=turns)
    c.stm.append(turns)
    already = tuple(tid for e in entries if e.id in known for tid in e.source_turn_ids)
    return AddResult(tuple(turns), tuple(fresh), extraction.skipped_turn_ids + already)


def run_update(c: Components, old: MemoryEntry, text: str) -> MemoryEntry:
    new = replace(old, text=text, updated_at=c.clock.now())
    vectors = embed_entries(c, [new, old])  # the old vector is the undo
    record = AuditRecord(
        new.updated_at, old.user_id, old.id, AuditOp.UPDATE, old.text, text, "api", {}
    )
    commit(
        c,
        [record],
        mutate=lambda: c.store.upsert(old.user_id, [new], vectors[:1]),
        undo=lambda: c.store.upsert(old.user_id, [old], vectors[1:]),
    )
    return new


def run_delete(c: Components, old: MemoryEntry) -> None:
    vectors = embed_entries(c, [old])  # to restore it if the journal does not commit
    record = AuditRecord(
        c.clock.now(), old.user_id, old.id, AuditOp.DELETE, old.text, None, "api", {}
    )
    commit(
        c,
        [record],
        mutate=lambda: c.store.delete(old.user_id, [old.id]),
        undo=lambda: c.store.upsert(old.user_id, [old], vectors),
    )
