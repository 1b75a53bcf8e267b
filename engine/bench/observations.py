"""The writer's ceiling: a data set's gold observations written as writer entries.

LoCoMo holds, for every session and speaker, GPT-written facts (``observation``), each
pointing at the turn it came from. :class:`ObservationWriter` stores them as a perfect writer
would, beside what the configured extractor writes (the verbatim turns and exchanges), so the
budget curve of ``bench locomo --systems tiermem+observations`` is the most a writer can add to
retrieval. An observation is written with the ``add()`` call that brings its last source turn;
its hit delivers those turns, as any writer entry's does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from tiermem.bench.datasets.conversation import Observation
from tiermem.roles.extract import CandidateEntry, EntryExtractor, Extraction
from tiermem.types import MemoryEntry, MemoryKind, Turn


class ObservationWriter:
    """``base``'s entries, and a fact entry per observation whose source turns all arrive in
    this call (``"Speaker: text"``, as the SLM writer labels a fact)."""

    wants_existing = False

    def __init__(self, base: EntryExtractor, observations: Sequence[Observation]) -> None:
        self._base = base
        self._observations = tuple(observations)
        self.name = f"gold-observations+{base.name}"

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry]
    ) -> Extraction:
        made = self._base.extract(turns, context, existing)
        arrived = {t.turn_id: t for t in turns}
        written = []
        for o in self._observations:
            if not all(i in arrived for i in o.turn_ids):
                continue
            first = arrived[o.turn_ids[0]]
            key = hashlib.blake2b(f"{o.turn_ids}\x1f{o.text}".encode(), digest_size=12)
            written.append(
                CandidateEntry(
                    text=f"{o.speaker}: {o.text}",
                    kind=MemoryKind.FACT,
                    source_turn_ids=o.turn_ids,
                    event_time=None,
                    session_id=first.session_id,
                    stable_key=f"observation:{key.hexdigest()}",
                )
            )
        return Extraction((*made.candidates, *written), made.skipped_turn_ids)


__all__ = ["ObservationWriter"]
