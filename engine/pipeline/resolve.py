"""Stage: decide what each proposed entry does to the user's MTM, then commit it as one write.

- ``replaces`` an existing entry (the writer saw it change) and is similar enough to it: the
  new entry is added and the old one is kept with ``superseded_by`` set (SUPERSEDE), never
  overwritten. A dissimilar "replacement" is a model error: it is counted and ignored.
- near an existing entry (cosine >= the merge threshold): merged into it (MERGE): the newer
  text wins, the source turns are united, the old text stays in its history. This is decided
  first: a copy of a stored memory is never taken as an update of another.
- otherwise: added (ADD).
Verbatim entries (turns, exchanges) are never merged: each keeps its own entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np
from tiermem.components import Components
from tiermem.embedding.base import EmbedMode, Vectors, check_vectors
from tiermem.pipeline.commit import StoreChange, commit, embed_entries
from tiermem.stores.base import nearest
from tiermem.types import VERBATIM_KINDS, AuditOp, AuditRecord, MemoryEntry, SearchFilters, Turn


@dataclass(frozen=True, slots=True)
class Proposed:
    entry: MemoryEntry
    replaces: str | None = None


@dataclass
class WritePlan:
    adds: list[MemoryEntry] = field(default_factory=list)
    add_vectors: list[Vectors] = field(default_factory=list)
    merges: list[tuple[MemoryEntry, MemoryEntry, float]] = field(default_factory=list)
    merge_vectors: list[Vectors] = field(default_factory=list)
    supersedes: list[tuple[MemoryEntry, MemoryEntry]] = field(default_factory=list)  # old, new

    def replaced(self) -> list[MemoryEntry]:
        """The stored entries this plan changes, as they were read to make it: those merged
        into and those superseded (each new entry's id is one the store does not hold)."""
        olds = [old for old, _, _ in self.merges] + [old for old, _ in self.supersedes]
        return list({e.id: e for e in olds}.values())


def merged_entry(old: MemoryEntry, new: MemoryEntry, now: datetime) -> MemoryEntry:
    sources = tuple(dict.fromkeys(old.source_turn_ids + new.source_turn_ids))
    return replace(
        old,
        text=new.text,
        updated_at=now,
        source_turn_ids=sources,
        event_time=new.event_time or old.event_time,
        confidence=max(old.confidence, new.confidence),
    )


def plan_writes(
    c: Components,
    user_id: str,
    proposed: Sequence[Proposed],
    vectors: Vectors,
    merge_threshold: float,
    now: datetime,
    grown: Sequence[tuple[MemoryEntry, MemoryEntry]] = (),
) -> WritePlan:
    """Decide add / merge / supersede for each proposed entry (see the module docstring);
    ``grown`` verbatim entries merge into their stored selves.

    A near-duplicate of a live entry merges into it before any ``replaces`` is considered:
    measured on LoCoMo with Qwen2.5-Coder-0.5B, the writer often copies a memory it was shown
    and marks it as replacing a different one; a copy is not an update."""
    plan = WritePlan()
    # A verbatim entry that grew (``grown``, as stored and as it becomes): merged by id.
    plan.merges.extend((old, new, 1.0) for old, new in grown)
    for item, vector in zip(proposed, vectors, strict=True):
        entry = item.entry
        twin = (
            _nearest(c, user_id, vector, plan, merge_threshold)
            if entry.kind not in VERBATIM_KINDS
            else None
        )
        if twin is not None:
            old, similarity = twin
            if item.replaces is not None and item.replaces != old.id:
                c.meter.record_event("writer", "copy_not_update")
            plan.merges.append((old, merged_entry(old, entry, now), similarity))
            continue
        if item.replaces is not None:
            _accept_supersede(c, user_id, item, plan)  # the new entry is added either way
        plan.adds.append(entry)
        plan.add_vectors.append(vector)
    if plan.merges:
        plan.merge_vectors = list(embed_entries(c, [new for _, new, _ in plan.merges]))
    return plan


def _accept_supersede(c: Components, user_id: str, item: Proposed, plan: WritePlan) -> None:
    """Record a supersede if the target is live and the two statements are related; a weak
    model marks unrelated facts as updates, and then both are kept (counted)."""
    assert item.replaces is not None
    target = c.store.get(user_id, [item.replaces])
    if not target or target[0].superseded_by is not None:
        return
    if statement_similarity(c, item.entry, target[0]) < c.policy.supersede_min_similarity:
        c.meter.record_event("writer", "supersede_rejected")
        return
    plan.supersedes.append((target[0], item.entry))


def statement_similarity(c: Components, a: MemoryEntry, b: MemoryEntry) -> float:
    """Cosine of the two statements alone: an update carries a new date by nature, so the
    dated index vectors would understate (or, lexically, overstate) how related they are."""
    pair = check_vectors(
        c.embedder.embed([a.text, b.text], EmbedMode.DOCUMENT), 2, c.store.dim, c.embedder.name
    )
    return float(np.dot(pair[0], pair[1]))


def _nearest(
    c: Components, user_id: str, vector: Vectors, plan: WritePlan, threshold: float
) -> tuple[MemoryEntry, float] | None:
    """The most similar stored live entry at or above ``threshold``, unless this batch already
    merged into it (then the new entry stays apart rather than merging twice unseen)."""
    for hit in nearest(c.store, user_id, vector, SearchFilters(), 1):
        merged_already = any(hit.entry.id == old.id for old, _, _ in plan.merges)
        if hit.entry.kind not in VERBATIM_KINDS and hit.score >= threshold and not merged_already:
            return hit.entry, hit.score
    return None


def apply_writes(
    c: Components,
    user_id: str,
    plan: WritePlan,
    turns: Sequence[Turn],
    actor: str,
    now: datetime,
) -> None:
    records = [
        AuditRecord(
            now,
            user_id,
            e.id,
            AuditOp.ADD,
            None,
            e.text,
            actor,
            {"source_turn_ids": list(e.source_turn_ids), "kind": e.kind.value},
        )
        for e in plan.adds
    ]
    records += [
        AuditRecord(
            now,
            user_id,
            old.id,
            AuditOp.MERGE,
            old.text,
            new.text,
            actor,
            {"similarity": round(similarity, 4), "source_turn_ids": list(new.source_turn_ids)},
        )
        for old, new, similarity in plan.merges
    ]
    records += [
        AuditRecord(
            now,
            user_id,
            old.id,
            AuditOp.SUPERSEDE,
            old.text,
            new.text,
            actor,
            {"superseded_by": new.id},
        )
        for old, new in plan.supersedes
    ]
    merged = [new for _, new, _ in plan.merges]
    change = StoreChange(
        upserts=(*plan.adds, *merged),
        links=tuple((old.id, new.id) for old, new in plan.supersedes),
    )
    vectors = [*plan.add_vectors, *plan.merge_vectors]
    stacked = np.stack(vectors) if vectors else None
    commit(c, "add", user_id, records, change, turns, stacked, before=plan.replaced())
