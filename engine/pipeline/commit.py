"""Crash-safe writes: the journal is the source of truth, the store follows it.

A write that changes the store takes three steps:

1. one journal transaction holds the audit rows, the source turns and the *intent*: the store
   change to make (redo) and the store state it replaces (undo);
2. the change is applied to the store, each step idempotent (upserts by id, deletes of ids,
   supersede links), so that doing it twice is doing it once;
3. the intent is deleted: the write is done.

A process killed before step 1 commits leaves nothing. Killed after it, it leaves a pending
intent, and ``tiermem.pipeline.recovery`` applies it again when the memory next opens: the
store catches up with the journal (roll forward), and no entry is ever in the store without its
audit rows and turns.

A store that fails in step 2 while the process lives is rolled back instead, so that the
caller's error means "not written": the intent is marked ``undoing``, the store gets its old
state back, and the write's audit rows, turns and intent leave the journal. If the rollback
fails as well (the store is down), the intent stays ``undoing``; the next write, or the next
open, finishes the rollback before doing anything else.

Vectors are not journaled: an entry's vector is a pure function of the entry
(``embed_entries``), so redo and undo re-embed what they upsert.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.components import Components
from tiermem.embedding.base import EmbedMode, Vectors, check_vectors
from tiermem.errors import AuditError
from tiermem.faults import reached
from tiermem.journal import Intent
from tiermem.render import index_text
from tiermem.stores.payload import entry_to_payload, payload_to_entry
from tiermem.types import AuditRecord, MemoryEntry, Turn

logger = logging.getLogger(__name__)


def embed_entries(c: Components, entries: Sequence[MemoryEntry]) -> Vectors:
    texts = [index_text(e) for e in entries]
    vectors = c.embedder.embed(texts, EmbedMode.DOCUMENT)
    return check_vectors(vectors, len(texts), c.store.dim, c.embedder.name)


@dataclass(frozen=True, slots=True)
class StoreChange:
    """Writes to one user's MTM, applied in this order: upserts, supersede links, deletes."""

    upserts: tuple[MemoryEntry, ...] = ()
    links: tuple[tuple[str, str | None], ...] = ()  # entry id -> the id that superseded it
    deletes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.upserts or self.links or self.deletes)

    def touched(self) -> list[str]:
        ids = [e.id for e in self.upserts] + [i for i, _ in self.links] + list(self.deletes)
        return list(dict.fromkeys(ids))

    def inverse(self, before: Sequence[MemoryEntry]) -> StoreChange:
        """The change that puts back ``before`` (the stored state of the touched entries):
        entries that existed are written back whole, the others are deleted."""
        existed = {e.id for e in before}
        return StoreChange(
            upserts=tuple(before), deletes=tuple(i for i in self.touched() if i not in existed)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "upserts": [{"id": e.id, "entry": entry_to_payload(e)} for e in self.upserts],
            "links": [list(link) for link in self.links],
            "deletes": list(self.deletes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoreChange:
        return cls(
            upserts=tuple(payload_to_entry(u["id"], u["entry"]) for u in data["upserts"]),
            links=tuple((str(old), new) for old, new in data["links"]),
            deletes=tuple(data["deletes"]),
        )


def apply_change(
    c: Components, user_id: str, step: str, change: StoreChange, vectors: Vectors | None = None
) -> None:
    """Apply ``change`` to the store; ``vectors`` are those of ``change.upserts``, computed
    here if not given. Every step is idempotent."""
    if change.upserts:
        if vectors is None:
            vectors = embed_entries(c, change.upserts)
        c.store.upsert(user_id, change.upserts, vectors)
    reached(f"{step}:mid-store-apply")
    if change.links:
        c.store.set_superseded(user_id, dict(change.links))
    if change.deletes:
        c.store.delete(user_id, change.deletes)


def commit(
    c: Components,
    kind: str,
    user_id: str,
    records: Sequence[AuditRecord],
    change: StoreChange,
    turns: Sequence[Turn] = (),
    vectors: Vectors | None = None,
    before: Sequence[MemoryEntry] | None = None,
) -> None:
    """Write ``records`` and ``turns`` and apply ``change`` to the store (see the module
    docstring). ``kind`` names the write (``add``, ``update``, ``delete``, ``evict``); if the
    store fails, its error is raised and nothing of the write stays. ``before``: the stored
    state of the entries the change touches, as the caller read them under the write lock
    (a touched id not among them is one the store does not hold); ``None``: read here."""
    if change.empty:  # the journal alone: one transaction is all or nothing
        with c.journal.transaction() as tx:
            tx.save_turns(turns)
            tx.record(records)
        return
    if before is None:
        before = c.store.get(user_id, change.touched())
    undo = change.inverse(before)
    with c.journal.transaction() as tx:
        op_id = tx.intend(user_id, kind, {"redo": change.to_json(), "undo": undo.to_json()})
        tx.save_turns(turns, op_id)
        tx.record(records, op_id)
        reached(f"{kind}:before-journal-commit")
    reached(f"{kind}:after-journal-commit")
    try:
        apply_change(c, user_id, kind, change, vectors)
    except BaseException as exc:
        _roll_back(c, Intent(op_id, user_id, kind, "undoing", {}), undo, exc)
        raise
    reached(f"{kind}:after-store-apply")
    try:
        c.journal.finish(op_id)
    except AuditError as exc:
        # The write is whole in the journal and the store; only its bookkeeping is behind.
        # The intent is applied again (a no-op) and finished before the next write.
        logger.warning("a finished write stays marked unfinished for now: %s", exc)


def _roll_back(c: Components, intent: Intent, undo: StoreChange, exc: BaseException) -> None:
    """Undo a write the store refused; what cannot be undone now is noted on ``exc`` and left
    to recovery."""
    try:
        c.journal.mark_undoing(intent.op_id)
    except Exception as mark_exc:  # noqa: BLE001 - reported on the original error below
        logger.error("a failed write could not be marked for rollback: %s", type(mark_exc).__name__)
        exc.add_note(
            "tiermem: the journal could not mark this write for rollback either "
            f"({mark_exc!r}); it is completed instead when the memory next writes or opens"
        )
        return
    reached(f"{intent.kind}:undo-marked")
    try:
        undo_intent(c, intent, undo)
    except Exception as undo_exc:  # noqa: BLE001 - reported on the original error below
        logger.error("rolling back a failed write failed too: %s", type(undo_exc).__name__)
        exc.add_note(
            f"tiermem: rolling this write back failed too ({undo_exc!r}); the rollback is "
            "finished before the next write, or when the memory next opens"
        )


def redo_intent(c: Components, intent: Intent) -> None:
    """Apply a pending intent to the store (again) and mark it done."""
    change = StoreChange.from_json(intent.payload["redo"])
    apply_change(c, intent.user_id, intent.kind, change)
    reached(f"{intent.kind}:after-store-apply")
    c.journal.finish(intent.op_id)


def undo_intent(c: Components, intent: Intent, undo: StoreChange | None = None) -> None:
    """Put back the store state an intent replaced, then take the write out of the journal."""
    if undo is None:
        undo = StoreChange.from_json(intent.payload["undo"])
    apply_change(c, intent.user_id, f"{intent.kind}-undo", undo)
    reached(f"{intent.kind}:undone")
    c.journal.revoke(intent.op_id)
