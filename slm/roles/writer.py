"""SLM-3 as the write path's extractor.

Small talk is dropped by rules first (no model call). The remaining turns go to the model in
chunks of at most ``max_turns`` turns, with the session's earlier turns as context and the
user's related memories so the model can mark an update (``replaces``). With ``keep_turns``
(the default) the turns are also kept verbatim beside the writer's entries: a small writer's
entries are lossy, and the verbatim turns are the floor on what retrieval can find.

Fallback (counted): on invalid output, timeout or an unreachable backend, the chunk's turns
are stored verbatim, one entry per turn, so nothing said is lost.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, date, datetime, time

from tiermem.errors import SLMError, SLMOutputInvalid
from tiermem.pipeline.extract import CandidateEntry, Extraction, verbatim_candidates
from tiermem.render import human_date, render_memory
from tiermem.slm.prompts import writer as prompt
from tiermem.slm.roles.common import Role, RoleRuntime
from tiermem.smalltalk import split_small_talk
from tiermem.types import MemoryEntry, MemoryKind, Turn


def _event_time(value: str, sources: Sequence[Turn]) -> datetime:
    """The stated date (at noon UTC) if the model gave a valid one, else when it was said."""
    try:
        if value:
            return datetime.combine(date.fromisoformat(value), time(12), UTC)
    except ValueError:
        pass
    return max(t.timestamp for t in sources)


class SLMWriter(Role):
    name = "slm-writer"
    wants_existing = True

    def __init__(
        self,
        runtime: RoleRuntime,
        max_turns: int = 8,
        context_turns: int = 4,
        *,
        keep_turns: bool = True,
    ) -> None:
        super().__init__(runtime)
        self._max_turns = max_turns
        self._context_turns = context_turns
        self._keep_turns = keep_turns

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry]
    ) -> Extraction:
        split = split_small_talk(turns, context)
        kept = split.kept
        candidates: list[CandidateEntry] = []
        before = list(context)
        for start in range(0, len(kept), self._max_turns):
            chunk = kept[start : start + self._max_turns]
            facts = self._write(chunk, before[-self._context_turns :], existing)
            candidates.extend(facts or [])
            if facts is None or self._keep_turns:  # the verbatim turns: a floor on recall
                candidates.extend(verbatim_candidates(chunk))
            before.extend(chunk)
        return Extraction(tuple(candidates), split.skipped_turn_ids)

    def _write(
        self, chunk: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry]
    ) -> list[CandidateEntry] | None:
        """The writer's entries for ``chunk``, or ``None`` when the model failed (counted)."""
        shown = list(existing[: prompt.MAX_ENTRIES + 3])
        inp = prompt.WriterInput(
            turns=[f"{human_date(t.timestamp)} · {t.speaker}: {t.content}" for t in chunk],
            context=[f"{t.speaker}: {t.content}" for t in context],
            existing=[render_memory(e) for e in shown],
        )
        try:
            output = self._rt.call(
                prompt.SPEC, prompt.build_messages(inp), prompt.schema(len(chunk), len(shown))
            )
        except SLMError as exc:
            self._rt.fallback(prompt.SPEC.name, exc, "verbatim turns")
            return None
        try:
            return [self._candidate(e, chunk, shown) for e in output.entries if e.text.strip()]
        except SLMOutputInvalid as exc:  # parsed, but named unknown turns
            self._rt.fallback(prompt.SPEC.name, exc, "verbatim turns", parsed=True)
            return None

    def _candidate(
        self, entry: prompt.WrittenEntry, chunk: Sequence[Turn], shown: Sequence[MemoryEntry]
    ) -> CandidateEntry:
        if any(not 1 <= n <= len(chunk) for n in entry.turns) or entry.replaces > len(shown):
            raise SLMOutputInvalid(
                prompt.SPEC.name,
                f"turns={entry.turns} replaces={entry.replaces}",
                "numbers out of range",
            )
        sources = [chunk[n - 1] for n in sorted(set(entry.turns))]
        text = entry.text.strip()
        key = hashlib.blake2b(
            f"{[t.turn_id for t in sources]}\x1f{text}".encode(), digest_size=12
        ).hexdigest()
        return CandidateEntry(
            text=text,
            kind=MemoryKind(entry.kind),
            source_turn_ids=tuple(t.turn_id for t in sources),
            event_time=_event_time(entry.date, sources),
            session_id=sources[0].session_id,
            stable_key=f"writer:{key}",
            replaces=shown[entry.replaces - 1].id if entry.replaces else None,
        )
