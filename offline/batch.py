"""Which MTM entries a consolidation run takes, and how the watermark moves.

Pending: live entries whose version - (last written or last retrieved, id) - is above the
user's watermark and not already done out of order. Under capacity pressure the entries that
eviction would remove next go first, so their knowledge is kept before they are gone; the
rest follow in version order. After each chunk the watermark moves over every pending entry
that is done, in version order, and stops at the first that is not (or that is too recent
to be sure nothing older is still being written; see ``advance``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from tiermem.ltm.store import UserState
from tiermem.pipeline.capacity import LOW_WATER, eviction_order
from tiermem.types import MemoryEntry, MemoryKind

Version = tuple[datetime, str]
Mark = Callable[[MemoryEntry], str]


def version(entry: MemoryEntry) -> Version:
    """An entry changes version when it is rewritten (new, merged, updated) or retrieved."""
    touched = max(entry.updated_at, entry.last_accessed or entry.updated_at)
    return touched, entry.id


def _above(v: Version, watermark: tuple[str, str] | None) -> bool:
    if watermark is None:
        return True
    return v > (datetime.fromisoformat(watermark[0]), watermark[1])


def pending_entries(
    entries: Sequence[MemoryEntry], state: UserState, mark: Mark
) -> list[MemoryEntry]:
    """Live entries not yet consolidated in their current version, in version order.
    Exchanges are left out: each is two turns that have entries of their own."""
    live = [e for e in entries if e.superseded_by is None and e.kind is not MemoryKind.EXCHANGE]
    return sorted(
        (e for e in live if _above(version(e), state.watermark) and mark(e) not in state.ahead),
        key=version,
    )


def select_batch(
    entries: Sequence[MemoryEntry],
    state: UserState,
    mark: Mark,
    *,
    now: datetime,
    capacity: int,
    pressure: float,
    batch_size: int,
) -> list[MemoryEntry]:
    pending = pending_entries(entries, state, mark)
    if len(entries) < pressure * capacity:
        return pending[:batch_size]
    doomed = max(0, len(entries) - int(capacity * LOW_WATER))
    urgent = eviction_order(pending, now)[:doomed]
    chosen = {e.id for e in urgent}
    return (urgent + [e for e in pending if e.id not in chosen])[:batch_size]


def advance(
    state: UserState,
    done: Sequence[MemoryEntry],
    pending: Sequence[MemoryEntry],
    mark: Mark,
    cutoff: datetime,
) -> UserState:
    """The state after ``done`` were consolidated; ``pending`` in version order.

    The watermark only moves over versions older than ``cutoff`` (the run's snapshot time
    minus a margin): an entry written around the snapshot - same timestamp, a clock that
    stepped back, a write that finished just after - could otherwise fall below the
    watermark without being seen. Newer done entries are remembered as marks instead."""
    ahead = set(state.ahead) | {mark(e) for e in done}
    watermark = state.watermark
    for e in pending:
        if not _above(version(e), watermark):  # passed by an earlier chunk of this run
            continue
        m = mark(e)
        touched, eid = version(e)
        if m not in ahead or touched >= cutoff:
            break
        watermark = (touched.isoformat(), eid)
        ahead.discard(m)
    return UserState(watermark, frozenset(ahead), state.runs)


def live_marks(state: UserState, entries: Sequence[MemoryEntry], mark: Mark) -> UserState:
    """Drop out-of-order marks of versions that no longer exist (the entry changed since)."""
    current = {mark(e) for e in entries}
    return UserState(state.watermark, state.ahead & current, state.runs)
