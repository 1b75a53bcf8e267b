"""Batch selection and the watermark, as pure functions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from tiermem.ltm import UserState
from tiermem.offline.batch import advance, pending_entries, select_batch, version
from tiermem.types import MemoryEntry, MemoryKind

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def entry(eid: str, minutes: int, *, accessed: int | None = None, uses: int = 0) -> MemoryEntry:
    t = T0 + timedelta(minutes=minutes)
    last = T0 + timedelta(minutes=accessed) if accessed is not None else None
    return MemoryEntry(eid, "u", eid, MemoryKind.TURN, t, t, access_count=uses, last_accessed=last)


def mark(e: MemoryEntry) -> str:
    return f"{e.id}@{version(e)[0].isoformat()}"


def test_new_then_reactivated_entries_in_version_order() -> None:
    entries = [entry("c", 3), entry("a", 1), entry("b", 2, accessed=10)]
    assert [e.id for e in pending_entries(entries, UserState(), mark)] == ["a", "c", "b"]
    state = UserState((T0.replace(minute=2).isoformat(), "zz"), frozenset(), 1)
    assert [e.id for e in pending_entries(entries, state, mark)] == ["c", "b"]


def test_superseded_entries_are_not_consolidated() -> None:
    old = MemoryEntry("o", "u", "old", MemoryKind.FACT, T0, T0, superseded_by="n")
    assert pending_entries([old, entry("n", 1)], UserState(), mark)[0].id == "n"
    assert len(pending_entries([old], UserState(), mark)) == 0


def test_the_watermark_stops_at_the_first_unfinished_entry_and_before_the_cutoff() -> None:
    entries = [entry("a", 1), entry("b", 2), entry("c", 3), entry("d", 50)]
    pending = pending_entries(entries, UserState(), mark)
    cutoff = T0 + timedelta(minutes=40)
    out_of_order = advance(UserState(), [entries[0], entries[2]], pending, mark, cutoff)
    assert out_of_order.watermark == ((T0 + timedelta(minutes=1)).isoformat(), "a")
    assert out_of_order.ahead == {mark(entries[2])}
    caught_up = advance(out_of_order, [entries[1], entries[3]], pending, mark, cutoff)
    assert caught_up.watermark == ((T0 + timedelta(minutes=3)).isoformat(), "c")
    assert caught_up.ahead == {mark(entries[3])}  # too recent for the watermark: a mark
    assert pending_entries(entries, caught_up, mark) == []


def test_an_entry_with_the_same_timestamp_written_later_is_not_lost() -> None:
    first = entry("m", 0)
    done = advance(UserState(), [first], [first], mark, cutoff=T0)  # written at the cutoff
    late = entry("a", 0)  # same time, smaller id, written after the snapshot
    assert [e.id for e in pending_entries([first, late], done, mark)] == ["a"]


def test_under_capacity_pressure_the_next_evicted_go_first() -> None:
    entries = [entry(f"e{i}", i, uses=5) for i in range(10)] + [entry("stale", 60, uses=0)]
    now = T0 + timedelta(days=30)
    calm = select_batch(
        entries, UserState(), mark, now=now, capacity=100, pressure=0.9, batch_size=3
    )
    assert [e.id for e in calm] == ["e0", "e1", "e2"]
    pressed = select_batch(
        entries, UserState(), mark, now=now, capacity=10, pressure=0.9, batch_size=3
    )
    assert pressed[0].id == "stale"
    assert [e.id for e in pressed[1:]] == ["e0", "e1"]


def test_exchanges_are_not_consolidated() -> None:
    """An exchange repeats two turns that are consolidated as entries of their own."""
    pair = replace(entry("ab", 2), kind=MemoryKind.EXCHANGE)
    entries = [entry("a", 1), pair, entry("b", 3)]
    assert [e.id for e in pending_entries(entries, UserState(), mark)] == ["a", "b"]
