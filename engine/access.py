"""Access statistics off the read path: reads count in memory, writes carry the counts.

``search()``, ``context()`` and ``answer()`` count a retrieval of each entry they hand out.
Writing that count to the store on every read made a read fail whenever a write could not
happen (a full disk, a read-only store). Here a read only adds to pending counts; the next
write (``add``, ``update``, ``delete``, ``forget_user``, a consolidation run) and ``close()``
write them to the store in one call per user, before their own change. Reads of entries
(``get``, ``get_all``) and the hits handed out show the counts as they will stand.

A process killed between two writes loses the counts of the reads in between: they rank
eviction (``tiermem.pipeline.capacity``), and nothing else reads them.

>>> from datetime import UTC, datetime
>>> from tiermem.types import MemoryEntry, MemoryKind
>>> at = datetime(2026, 1, 1, tzinfo=UTC)
>>> log = AccessLog()
>>> entry = MemoryEntry("m1", "u", "x", MemoryKind.TURN, at, at, access_count=2)
>>> log.count("u", ["m1", "m1"], at)  # once per call, as a search hands it out once
>>> log.count("u", ["m1"], at)
>>> log.overlay("u", [entry])[0].access_count
4
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime

from tiermem.stores.base import MTMStore, Retrievals
from tiermem.types import MemoryEntry, SearchHit, Tier


class AccessLog:
    """Retrievals counted but not yet written, per user and entry: how many, and the last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, dict[str, Retrievals]] = {}

    def count(self, user_id: str, ids: Iterable[str], at: datetime) -> None:
        """One retrieval of each distinct id, at ``at``."""
        with self._lock:
            pending = self._pending.setdefault(user_id, {})
            for entry_id in dict.fromkeys(ids):
                before = pending.get(entry_id)
                pending[entry_id] = Retrievals((before.times if before else 0) + 1, at)

    def count_hits(self, user_id: str, hits: Sequence[SearchHit], at: datetime) -> list[SearchHit]:
        """Count the MTM hits handed out; the hits with their counts as they will stand."""
        self.count(user_id, (h.id for h in hits if h.tier is Tier.MTM), at)
        return [
            replace(h, item=self._with_pending(user_id, h.entry)) if h.tier is Tier.MTM else h
            for h in hits
        ]

    def overlay(self, user_id: str, entries: Sequence[MemoryEntry]) -> list[MemoryEntry]:
        """``entries`` as stored, with the retrievals not yet written added."""
        return [self._with_pending(user_id, e) for e in entries]

    def _with_pending(self, user_id: str, entry: MemoryEntry) -> MemoryEntry:
        with self._lock:
            pending = self._pending.get(user_id, {}).get(entry.id)
        if pending is None:
            return entry
        return replace(
            entry,
            access_count=entry.access_count + pending.times,
            last_accessed=pending.last,
        )

    def forget(self, user_id: str) -> None:
        """Drop an erased user's pending counts."""
        with self._lock:
            self._pending.pop(user_id, None)

    def write(self, store: MTMStore) -> None:
        """Write every pending count to ``store`` (one call per user), then forget them. If
        the store refuses, the counts not written stay pending and the error is raised: the
        write that asked for them fails as it would have."""
        with self._lock:
            pending, self._pending = self._pending, {}
        users = list(pending)
        try:
            while users:
                store.record_access(users[0], pending[users[0]])
                users.pop(0)
        except BaseException:
            with self._lock:
                for user in users:  # back, under any counted meanwhile
                    for entry_id, old in pending[user].items():
                        new = self._pending.setdefault(user, {}).get(entry_id)
                        self._pending[user][entry_id] = (
                            old if new is None else Retrievals(old.times + new.times, new.last)
                        )
            raise


__all__ = ["AccessLog"]
