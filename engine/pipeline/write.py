"""The write path: unseen turns -> extract (rules, then the writer) -> materialise -> embed ->
resolve against MTM (add / merge / supersede) -> commit journal, then store -> STM -> capacity.

A failure before the journal commits leaves nothing behind; after it, the write is finished
(or, if the store refused it, rolled back) as ``tiermem.pipeline.commit`` describes. Each write
first finishes anything an earlier failure left unfinished.

The capacity eviction is a write of its own, after the add's: if it fails, it is rolled back
like any write (or left to recovery if the rollback fails too), but the add stands and is
returned, with the failure in ``AddResult.eviction_error``. Every add enforces capacity
again, so the next one catches up.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np
from tiermem.components import Components
from tiermem.embedding.base import EmbedMode
from tiermem.errors import MemoryNotFoundError, TiermemError
from tiermem.lexical import lexical_query
from tiermem.pipeline.capacity import enforce_capacity
from tiermem.pipeline.commit import StoreChange, commit, embed_entries
from tiermem.pipeline.recovery import finish_unfinished
from tiermem.pipeline.resolve import Proposed, apply_writes, merged_entry, plan_writes
from tiermem.ranking import in_turns
from tiermem.roles.extract import CandidateEntry
from tiermem.smalltalk import split_small_talk
from tiermem.stores.base import hybrid_nearest
from tiermem.types import (
    VERBATIM_KINDS,
    AddResult,
    AuditOp,
    AuditRecord,
    MemoryEntry,
    SearchFilters,
    Turn,
)

logger = logging.getLogger(__name__)

_ENTRY_NAMESPACE = uuid.UUID("6f1d9c8e-3b0a-5c4e-9d2f-7a1b2c3d4e5f")
RELATED_PER_TURN = 3  # each kept turn's best of each search
RELATED_MEMORIES = 64  # at most, all turns together: the writer shows each chunk its own
SESSION_CONTEXT_TURNS = 64  # the stored turns of the session an extractor sees before new ones


def entry_id_for(user_id: str, candidate: CandidateEntry) -> str:
    """A stable id when the candidate has a stable key, else a fresh one."""
    if candidate.stable_key is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_ENTRY_NAMESPACE, f"{user_id}\x1f{candidate.stable_key}"))


def materialise(
    candidates: Sequence[CandidateEntry], user_id: str, now: datetime
) -> list[Proposed]:
    return [
        Proposed(
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
            ),
            c.replaces,
        )
        for c in candidates
    ]


def grown_entries(
    proposed: Sequence[Proposed], stored: dict[str, MemoryEntry], now: datetime
) -> list[tuple[MemoryEntry, MemoryEntry]]:
    """Stored verbatim entries that a proposal with the same id extends with new source
    turns (an exchange whose answer went on in a later message), as they become: the new
    text, the source turns united; ``(stored, grown)`` pairs. A proposal naming no new turn is
    a re-add: nothing. An entry whose text no longer starts the new one (the user corrected
    it with ``update()``) keeps its text and its turns."""
    out = []
    for p in proposed:
        old = stored.get(p.entry.id)
        if old is None or old.kind not in VERBATIM_KINDS:
            continue
        grows = set(p.entry.source_turn_ids) - set(old.source_turn_ids)
        if grows and p.entry.text.startswith(old.text):
            out.append((old, merged_entry(old, p.entry, now)))
    return out


def related_memories(
    c: Components, user_id: str, turns: Sequence[Turn], context: Sequence[Turn] = ()
) -> list[MemoryEntry]:
    """The user's stored memories related to these turns, for the writer to update: each
    turn that is not small talk searched on its own (dense and BM25, alternating), the turns'
    lists taken in turns. The writer shows each chunk the ones that match its own turns
    (:func:`tiermem.slm.roles.writer.related_to`). One search for all the turns of a call,
    its first five shown to every chunk, drowned a short statement among the rest: on
    ``tiermem bench updates``' scenarios (a session a call) the older statement of a change
    was shown for 0 of 36 changes, measured by shared words."""
    kept = split_small_talk(turns, context).kept
    if not kept:
        return []
    texts = [t.content[:2000] for t in kept]
    vectors = c.embedder.embed(texts, EmbedMode.QUERY)
    ranked = []
    entries: dict[str, MemoryEntry] = {}
    for text, vector in zip(texts, vectors, strict=True):
        hits = hybrid_nearest(
            c.store, user_id, vector, lexical_query(text), SearchFilters(), RELATED_PER_TURN
        )
        ranked.append(
            in_turns(
                [[h.entry.id for h in hits.dense], [h.entry.id for h in hits.lexical]],
                2 * RELATED_PER_TURN,
            )
        )
        for h in [*hits.dense, *hits.lexical]:
            entries.setdefault(h.entry.id, h.entry)
    return [entries[i] for i in in_turns(ranked, RELATED_MEMORIES)]


def run_add(
    c: Components, user_id: str, session_id: str, turns: Sequence[Turn], now: datetime
) -> AddResult:
    """Add ``turns`` (see the module docstring); ``now`` is the one time the add reads: its
    entries' creation, their audit rows and the capacity check all carry it."""
    ids = [t.turn_id for t in turns]
    # One read of the journal: what is unfinished, which turns are stored, and the session's
    # stored turns before these (not STM's: an exchange forms however the messages came, one
    # add() each or all at once, and across restarts).
    snapshot = c.journal.before_add(user_id, session_id, ids, SESSION_CONTEXT_TURNS)
    if snapshot.unfinished:  # an earlier failure's write is finished first: read again
        finish_unfinished(c)
        snapshot = c.journal.before_add(user_id, session_id, ids, SESSION_CONTEXT_TURNS)
    known, context = snapshot.known, snapshot.tail
    new_turns = [t for t in turns if t.turn_id not in known]  # re-adding costs nothing
    existing = (
        related_memories(c, user_id, new_turns, context)
        if new_turns and c.extractor.wants_existing
        else []
    )
    extraction = c.extractor.extract(new_turns, context, existing)
    proposed = materialise(extraction.candidates, user_id, now)
    stored = {e.id: e for e in c.store.get(user_id, [p.entry.id for p in proposed])}
    grown = grown_entries(proposed, stored, now)
    unseen = [p.entry.id for p in proposed if p.entry.id not in stored]
    gone = c.journal.had_memories(user_id, unseen)  # deleted or evicted: it stays gone
    proposed = [p for p in proposed if p.entry.id not in stored and p.entry.id not in gone]
    vectors = None
    if proposed:
        vectors = embed_entries(c, [p.entry for p in proposed])
    elif grown:  # only grown entries: nothing new to embed, they are re-embedded as merges
        vectors = np.zeros((0, c.store.dim), dtype=np.float32)
    plan = (
        plan_writes(c, user_id, proposed, vectors, c.policy.merge_threshold, now, grown)
        if vectors is not None
        else None
    )
    if plan is not None:
        apply_writes(c, user_id, plan, new_turns, c.extractor.name, now)
    elif new_turns:
        commit(c, "add", user_id, [], StoreChange(), new_turns)  # the turns are still the record
    c.stm.append(new_turns)
    written = [e.id for e in plan.adds] + [new.id for _, new, _ in plan.merges] if plan else []
    evicted, eviction_error = _evict(c, user_id, written, now)
    return AddResult(
        turns=tuple(turns),
        entries=tuple(plan.adds) if plan else (),
        skipped_turn_ids=extraction.skipped_turn_ids + tuple(known),
        merged=tuple(new for _, new, _ in plan.merges) if plan else (),
        superseded=tuple(replace(old, superseded_by=new.id) for old, new in plan.supersedes)
        if plan
        else (),
        evicted_ids=evicted,
        eviction_error=eviction_error,
    )


def _evict(
    c: Components, user_id: str, written: Sequence[str], now: datetime
) -> tuple[tuple[str, ...], str | None]:
    """Enforce capacity after an add, never evicting the entries it ``written``: the ids
    evicted, or none and why not. The add is done by now, so a failure here must not look like the
    add's: it is reported, not raised."""
    try:
        evicted = enforce_capacity(
            c, user_id, c.policy.capacity, c.policy.merge_threshold, now, protected=set(written)
        )
    except TiermemError as exc:
        # Not the message: it may quote the store's or the user's data.
        logger.warning(
            "capacity eviction after an add failed (%s); the add stands, the next add retries",
            type(exc).__name__,
        )
        return (), f"{type(exc).__name__}: {exc}"
    return evicted, None


def run_update(c: Components, old: MemoryEntry, text: str) -> MemoryEntry:
    old = _current(c, old)
    new = replace(old, text=text, updated_at=c.clock.now())
    record = AuditRecord(
        new.updated_at, old.user_id, old.id, AuditOp.UPDATE, old.text, text, "api", {}
    )
    change = StoreChange(upserts=(new,))
    vectors = embed_entries(c, [new])
    commit(c, "update", old.user_id, [record], change, vectors=vectors, before=[old])
    return new


def run_delete(c: Components, old: MemoryEntry) -> None:
    old = _current(c, old)
    record = AuditRecord(
        c.clock.now(), old.user_id, old.id, AuditOp.DELETE, old.text, None, "api", {}
    )
    commit(c, "delete", old.user_id, [record], StoreChange(deletes=(old.id,)), before=[old])


def _current(c: Components, entry: MemoryEntry) -> MemoryEntry:
    """``entry`` as stored once anything an earlier failure left is finished."""
    if not finish_unfinished(c):
        return entry
    found = c.store.get(entry.user_id, [entry.id])
    if not found:
        raise MemoryNotFoundError(entry.id, entry.user_id)
    return found[0]
