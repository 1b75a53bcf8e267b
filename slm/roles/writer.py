"""SLM-3 as the write path's extractor.

Small talk is dropped by rules first (no model call). The remaining turns go to the model in
chunks of at most ``max_turns`` turns, with the session's earlier turns as context and the
user's related memories so the model can mark an update (``replaces``). The turns are always
kept verbatim beside the writer's entries, with the exchanges the model-free path writes: a
small writer's entries are lossy, and the verbatim floor is what retrieval can always find
(on LoCoMo conversation 1 with qwen0.5b, the writer's entries alone delivered 5.4% of the
gold evidence at k=10, the verbatim turns 53.8%).

Three guards on what the model wrote, each counted in the meter's writer events:

- ``speaker_fixed``: who said it comes from the cited turns, never from the model's text. A
  speaker label the model wrote ("Maya: ...") is replaced by the cited turns' speakers. An
  entry citing only assistant turns is re-cited to the user's turn it is about
  (``cited_speaker``), else labelled as the assistant's.
- ``restated_dropped``: an entry that restates its own source turn is dropped (``restates``):
  the verbatim turn already says it. A small writer cites the wrong turn and copies the
  earlier turns and stored turn entries it is shown, so a copy of any of those is dropped
  too. (A dropped copy's ``replaces`` goes with it: measured on qwen0.5b, the replaces of
  copies were turn numbers, not updates.)
- ``replaces_ungrounded``: an entry marked as replacing a memory keeps the entry but loses
  the ``replaces`` when it says nothing beyond that memory, or little of it is in the turns
  it cites (``grounded``): a supersede hides a fact, so it must rest on the turn that states
  the change.

Unless ``supersedes`` is on (``slm.writer_supersedes``), no ``replaces`` is handed on at all:
one that passed the guards above is counted ``replaces_off``, and the entry is kept and hides
nothing. The small local writers'
supersedes were mostly wrong (see ``SLMConfig.writer_supersedes``).

Fallback (counted): on invalid output, timeout or an unreachable backend, the chunk adds no
entry of the writer's; its turns are in the verbatim floor, so nothing said is lost.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import TypeVar

from tiermem.errors import SLMError, SLMOutputInvalid
from tiermem.lexical import content_stems, stem
from tiermem.ranking import in_turns
from tiermem.render import human_date, render_memory
from tiermem.roles.extract import CandidateEntry, Extraction, verbatim_floor
from tiermem.slm.prompts import writer as prompt
from tiermem.slm.roles.common import Role, RoleRuntime
from tiermem.smalltalk import split_small_talk
from tiermem.types import MemoryEntry, MemoryKind, Turn
from tiermem.types import Role as Speaker

# A copy with a word or two dropped or changed is still a copy; a rewrite into the third
# person changes the pronouns and verbs of a short turn, which puts it well below this.
RESTATED_JACCARD = 0.9
CONTEXT_TURNS = 4  # the session's turns before a chunk, shown as context
SHOWN = prompt.MAX_ENTRIES + 3  # related memories shown to a chunk
SHOWN_PER_TURN = 3  # of them, each turn's best
_M = TypeVar("_M")
GROUNDED_SHARE = 0.3  # of an update's content words, found in the turns it cites
_TOKEN = re.compile(r"\w+")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def _contains(words: Sequence[str], run: Sequence[str]) -> bool:
    n = len(run)
    return any(words[i : i + n] == run for i in range(len(words) - n + 1))


def grounded(said: str, sources: Sequence[Turn], replaced: str) -> bool:
    """Whether an update rests on the turns it cites and says something beyond the memory it
    replaces: some of its content words (by stem, the speakers' names aside) are the cited
    turns' own, and some are not the replaced memory's. An update hides what it supersedes:
    measured on ``tiermem bench updates`` with qwen0.5b, 8 of the writer's 12 supersedes (all
    12 wrong) cited a turn that says nothing of the kind, or restated the memory they hid.

    >>> from datetime import UTC, datetime
    >>> from tiermem.types import Role
    >>> t = Turn("t1", "u", "s1", Role.USER, "Ann", "I moved to Porto.", datetime.now(UTC))
    >>> old = "Ann lives in Lyon."
    >>> [grounded(x, [t], old) for x in ("Ann moved to Porto.", "Ann likes chess.", old)]
    [True, False, False]
    """
    names = {stem(t.speaker) for t in sources}
    words = content_stems(said) - names
    if not words - content_stems(replaced):  # nothing new: a copy, not an update
        return False
    cited = set().union(*(content_stems(t.content) for t in sources))
    return len(words & cited) >= max(1.0, GROUNDED_SHARE * len(words))


def restates(text: str, turns: Sequence[str]) -> bool:
    """Whether ``text`` only repeats ``turns`` (the contents of its source turns) in their own
    words. Compared on case-folded word tokens, punctuation ignored: its words in order are
    a run of a turn's words (the whole turn, or an excerpt that is no more self-contained than
    the turn), or its word set is near-identical to a turn's (Jaccard >= ``RESTATED_JACCARD``:
    a copy with a word dropped). Several turns are also compared as one text.

    >>> restates("I run in the mornings", ["I run in the mornings before work."])
    True
    >>> restates("Maya runs in the mornings", ["I run in the mornings before work."])
    False
    """
    mine = _tokens(text)
    if not mine:
        return True
    for turn in [*turns, " ".join(turns)] if len(turns) > 1 else turns:
        theirs = _tokens(turn)
        if _contains(theirs, mine):
            return True
        union = set(mine) | set(theirs)
        if len(set(mine) & set(theirs)) >= RESTATED_JACCARD * len(union):
            return True
    return False


def cited_speaker(said: str, sources: Sequence[Turn], chunk: Sequence[Turn]) -> list[Turn]:
    """The turns an entry comes from. A small writer often cites the assistant's echo of what
    the user said ("Nice choice." after "I bought new running shoes"): an entry citing only
    assistant turns that names a user of this chunk, or shares more content words with one
    of their turns than with what it cites, comes from that user's turn. A fact about Maya
    that Maya stated is hers, never the assistant's.

    >>> from tiermem.types import Role as R
    >>> t = datetime(2026, 9, 30, tzinfo=UTC)
    >>> maya = Turn("t1", "u", "s", R.USER, "Maya", "I bought new running shoes, in blue.", t)
    >>> bot = Turn("t2", "u", "s", R.ASSISTANT, "Assistant", "Nice choice.", t)
    >>> [x.turn_id for x in cited_speaker("Maya bought blue running shoes.", [bot], [maya, bot])]
    ['t1']
    """
    if not sources or not all(t.role is Speaker.ASSISTANT for t in sources):
        return list(sources)
    users = [t for t in chunk if t.role is not Speaker.ASSISTANT]
    if not users:
        return list(sources)
    words = content_stems(said)

    def overlap(turn: Turn) -> int:
        return len(words & content_stems(turn.content))

    named = [t for t in users if re.search(rf"\b{re.escape(t.speaker)}\b", said, re.I)]
    best = max(named or users, key=overlap)
    if named or overlap(best) > max(overlap(t) for t in sources):
        return [best]
    return list(sources)


def speaker_label(sources: Sequence[Turn]) -> str:
    """The speakers of ``sources`` in order of first appearance: "Maya and Assistant"."""
    names = list(dict.fromkeys(t.speaker for t in sources))
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _event_time(value: str, sources: Sequence[Turn]) -> datetime:
    """The stated date (at noon UTC) if the model gave a valid one, else when it was said."""
    try:
        if value:
            return datetime.combine(date.fromisoformat(value), time(12), UTC)
    except ValueError:
        pass
    return max(t.timestamp for t in sources)


def copies(
    said: str, sources: Sequence[Turn], chunk: Sequence[Turn], earlier: Sequence[str]
) -> bool:
    """Whether ``said`` copies its sources, any other turn of ``chunk`` (the citation may be
    wrong) or one of the ``earlier`` texts (the turns before the chunk, the stored turn
    entries shown): the verbatim floor already holds all of them."""
    return (
        restates(said, [t.content for t in sources])
        or any(restates(said, [turn.content]) for turn in chunk)
        or any(restates(said, [text]) for text in earlier)
    )


def related_to(
    memories: Sequence[_M], text: Callable[[_M], str], turns: Sequence[Turn], *, fill: bool = True
) -> list[_M]:
    """What a chunk's prompt shows of the related memories: for each of its turns the
    ``SHOWN_PER_TURN`` memories sharing the most content words with it, each word weighted
    by how rare it is among the memories and the sum by the memory's length (as BM25 does;
    on ties, and for none in common, the earlier in ``memories``: the store's order, which
    ``related_memories`` takes in turns over all the call's turns, so a memory found by its
    meaning alone fills a place only after those sharing a word; without ``fill``, only those
    sharing a word), taken in turns, ``SHOWN`` at most.

    >>> from tiermem.types import Role as R
    >>> t = datetime(2026, 9, 30, tzinfo=UTC)
    >>> turns = [Turn(f"t{i}", "u", "s", R.USER, "Ann", c, t)
    ...          for i, c in enumerate(["I moved to Porto from Lyon.", "My cat is ill."])]
    >>> related_to(["Ann likes jazz.", "Ann's cat Tofu.", "Ann lives in Lyon."], str, turns)[:2]
    ['Ann lives in Lyon.', "Ann's cat Tofu."]
    """
    stems = [content_stems(text(m)) for m in memories]
    count = Counter(w for s in stems for w in s)
    weight = {w: math.log((1 + len(stems)) / n) for w, n in count.items()}  # rare words count
    ranked = []
    for turn in turns:
        words = content_stems(turn.content[:2000])
        scored = sorted(
            (-sum(weight[w] for w in words & s) / math.sqrt(len(s) or 1), i)
            for i, s in enumerate(stems)
            if fill or words & s
        )
        ranked.append([memories[i] for _, i in scored[:SHOWN_PER_TURN]])
    return in_turns(ranked, SHOWN)


def writer_input(
    chunk: Sequence[Turn], context: Sequence[Turn], shown: Sequence[str]
) -> prompt.WriterInput:
    """What the model reads for one chunk: its turns dated, the turns before it, and the
    memories shown (``render_memory`` of each)."""
    return prompt.WriterInput(
        turns=[prompt.turn_line(human_date(t.timestamp), t.speaker, t.content) for t in chunk],
        context=[f"{t.speaker}: {t.content}" for t in context],
        existing=list(shown),
    )


@dataclass(frozen=True, slots=True)
class _Shown:
    """What the model was shown for one chunk: what an entry may copy."""

    chunk: Sequence[Turn]
    context: Sequence[Turn]
    existing: Sequence[MemoryEntry]
    speakers: frozenset[str]

    def copies(self, said: str, sources: Sequence[Turn]) -> bool:
        stored = [
            prompt.split_label(e.text, self.speakers)[1]
            for e in self.existing
            if e.kind is MemoryKind.TURN
        ]
        return copies(said, sources, self.chunk, [*(t.content for t in self.context), *stored])


class SLMWriter(Role):
    name = "slm-writer"
    wants_existing = True

    def __init__(
        self,
        runtime: RoleRuntime,
        max_turns: int = 8,
        context_turns: int = CONTEXT_TURNS,
        *,
        supersedes: bool = False,
    ) -> None:
        super().__init__(runtime)
        self._max_turns = max_turns
        self._context_turns = context_turns
        self._supersedes = supersedes

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry]
    ) -> Extraction:
        split = split_small_talk(turns, context)
        kept = split.kept
        candidates: list[CandidateEntry] = []
        before = list(context)
        for start in range(0, len(kept), self._max_turns):
            chunk = kept[start : start + self._max_turns]
            candidates.extend(self._write(chunk, before[-self._context_turns :], existing))
            before.extend(chunk)
        # the model-free path's whole store, a floor on recall (a failed chunk's turns too)
        candidates.extend(verbatim_floor(turns, kept, context))
        return Extraction(tuple(candidates), split.skipped_turn_ids)

    def _write(
        self, chunk: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry]
    ) -> list[CandidateEntry]:
        """The writer's entries for ``chunk``, none when the model failed (counted)."""
        shown = related_to(existing, lambda e: e.text, chunk)
        inp = writer_input(chunk, context, [render_memory(e) for e in shown])
        try:
            output = self._rt.call(
                prompt.SPEC, prompt.build_messages(inp), prompt.schema(len(chunk), len(shown))
            )
        except SLMError as exc:
            self._rt.fallback(prompt.SPEC.name, exc, "verbatim turns")
            return []
        entries = [e for e in output.entries if e.text.strip()]
        bad = [e for e in entries if any(not 1 <= n <= len(chunk) for n in e.turns)]
        bad += [e for e in entries if e.replaces > len(shown)]
        if bad:  # parsed, but named turns or memories that were not shown
            invalid = SLMOutputInvalid(
                prompt.SPEC.name,
                f"turns={bad[0].turns} replaces={bad[0].replaces}",
                "numbers out of range",
            )
            self._rt.fallback(prompt.SPEC.name, invalid, "verbatim turns", parsed=True)
            return []
        seen = _Shown(chunk, context, shown, frozenset(t.speaker for t in [*chunk, *context]))
        written: list[CandidateEntry] = []
        for e in entries:
            cited = [chunk[n - 1] for n in sorted(set(e.turns))]
            written_label, said = prompt.split_label(e.text, seen.speakers)
            sources = cited_speaker(said, cited, chunk)
            if seen.copies(said, sources):
                self._rt.meter.record_event(prompt.SPEC.name, "restated_dropped")
            else:
                recited = sources != cited
                written.append(
                    self._candidate(e, sources, shown, written_label, said, recited=recited)
                )
        return written

    def _candidate(
        self,
        entry: prompt.WrittenEntry,
        sources: Sequence[Turn],
        shown: Sequence[MemoryEntry],
        written_label: str | None,
        said: str,
        *,
        recited: bool = False,
    ) -> CandidateEntry:
        """The entry, its speaker taken from ``sources`` (counted when that changes what the
        model wrote or cited: ``recited``)."""
        only_assistant = all(t.role is Speaker.ASSISTANT for t in sources)
        label = speaker_label(sources) if written_label is not None or only_assistant else None
        if recited or (written_label or "").casefold() != (label or "").casefold():
            self._rt.meter.record_event(prompt.SPEC.name, "speaker_fixed")
        text = f"{label}: {said}" if label else said
        target = shown[entry.replaces - 1] if entry.replaces else None
        replaces = target.id if target is not None else None
        if target is not None and not grounded(said, sources, target.text):
            self._rt.meter.record_event(prompt.SPEC.name, "replaces_ungrounded")
            replaces = None
        elif target is not None and not self._supersedes:
            self._rt.meter.record_event(prompt.SPEC.name, "replaces_off")
            replaces = None
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
            replaces=replaces,
        )
