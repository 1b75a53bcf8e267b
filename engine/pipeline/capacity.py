"""Stage: keep a user's MTM within its capacity B.

Over capacity, the store is brought down to a low-water mark (95% of B, at least one entry)
so the work runs rarely. Victims, in order: superseded entries (already replaced), then the
entries of lowest utility (stale and rarely used). The entries the current add just wrote are
never victims: an add never evicts what it returns (if it wrote more than B entries, the store
stays over B until a later add). A victim with a live near-duplicate is merged into it first
(its source turns survive there); every removal is an audit row with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime

from tiermem.components import Components
from tiermem.pipeline.commit import StoreChange, commit, embed_entries
from tiermem.stores.base import nearest
from tiermem.types import AuditOp, AuditRecord, MemoryEntry, SearchFilters

LOW_WATER = 0.95


def low_water_mark(capacity: int) -> int:
    """How many entries an eviction leaves: 95% of ``capacity``, never none.

    >>> low_water_mark(100), low_water_mark(3), low_water_mark(1)
    (95, 2, 1)
    """
    return max(1, int(capacity * LOW_WATER))


def utility(entry: MemoryEntry, now: datetime, half_life_days: float = 30.0) -> float:
    """How worth keeping an entry is: use (log of access count) times freshness, where
    freshness halves every ``half_life_days`` since the entry was last written or used.

    >>> from datetime import UTC, datetime, timedelta
    >>> from tiermem.types import MemoryEntry, MemoryKind
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> e = MemoryEntry("a", "u", "x", MemoryKind.FACT, t, t)
    >>> round(utility(e, t + timedelta(days=30)), 3), round(utility(e, t), 3)
    (0.5, 1.0)
    """
    last = max(entry.updated_at, entry.last_accessed or entry.updated_at)
    age_days = max(0.0, (now - last).total_seconds() / 86_400)
    freshness: float = 0.5 ** (age_days / half_life_days)
    return (1.0 + math.log1p(entry.access_count)) * freshness


def eviction_order(entries: Sequence[MemoryEntry], now: datetime) -> list[MemoryEntry]:
    """Superseded entries first (oldest first), then live entries by rising utility."""
    return sorted(
        entries, key=lambda e: (e.superseded_by is None, utility(e, now), e.updated_at, e.id)
    )


def enforce_capacity(
    c: Components,
    user_id: str,
    capacity: int,
    merge_threshold: float,
    now: datetime,
    protected: Collection[str] = (),
) -> tuple[str, ...]:
    """Evict down to the low-water mark once over ``capacity``; never the ``protected`` ids
    (the entries the current add wrote). The ids evicted."""
    count = c.store.count(user_id)
    if count <= capacity:
        return ()
    entries = c.store.list_entries(user_id, SearchFilters(include_superseded=True))
    candidates = [e for e in entries if e.id not in protected]
    victims = eviction_order(candidates, now)[: count - low_water_mark(capacity)]
    if not victims:
        return ()
    victim_ids = {v.id for v in victims}
    keepers: dict[str, MemoryEntry] = {}
    records: list[AuditRecord] = []
    vectors = embed_entries(c, victims)
    for victim, vector in zip(victims, vectors, strict=True):
        reason = "superseded" if victim.superseded_by else "low utility"
        if victim.superseded_by is None:
            for hit in nearest(c.store, user_id, vector, SearchFilters(), 2):
                if hit.entry.id not in victim_ids and hit.score >= merge_threshold:
                    keeper = keepers.get(hit.entry.id, hit.entry)
                    sources = tuple(dict.fromkeys(keeper.source_turn_ids + victim.source_turn_ids))
                    keepers[keeper.id] = replace(keeper, source_turn_ids=sources, updated_at=now)
                    records.append(
                        AuditRecord(
                            now,
                            user_id,
                            keeper.id,
                            AuditOp.MERGE,
                            keeper.text,
                            keeper.text,
                            "capacity",
                            {"absorbed": victim.id},
                        )
                    )
                    reason = f"merged into {keeper.id}"
                    break
        records.append(
            AuditRecord(
                now,
                user_id,
                victim.id,
                AuditOp.DELETE,
                victim.text,
                None,
                "capacity",
                {"reason": reason, "utility": round(utility(victim, now), 6)},
            )
        )
    merged = tuple(keepers.values())
    change = StoreChange(upserts=merged, deletes=tuple(v.id for v in victims))
    commit(
        c, "evict", user_id, records, change, vectors=embed_entries(c, merged) if merged else None
    )
    return tuple(v.id for v in victims)
