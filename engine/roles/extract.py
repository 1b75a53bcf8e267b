"""Stage: turn an exchange into candidate MTM entries.

``TurnExtractor`` is the model-free stage: one entry per user or assistant turn, verbatim with
its speaker, after the same small-talk rules the SLM writer applies ("thanks!" is a turn in the
journal, not a memory), and one per exchange: a turn with the reply that follows it. The SLM
writer plugs in through the same ``EntryExtractor`` interface.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Protocol

from tiermem.smalltalk import split_small_talk
from tiermem.types import MemoryEntry, MemoryKind, Turn

# Knobs of the model-free write path, not yet re-chosen on all three data sets
# (docs/decisions.md, "Write path"; each value tried costs a new embedding of LongMemEval-S).
EXCHANGE_SIDE_WORDS = 60  # the most words an exchange takes from each of its two bursts
EXCHANGE_SIDE_TURNS = 16  # and the most messages
CHUNK_WORDS: int | None = 120  # a longer turn is indexed in pieces of this many words
# A shorter turn of several sentences is indexed as its sentences too (docs/decisions.md,
# "Write path"); one shorter than this ("Yes!", "Thanks a lot.") gets none.
SENTENCE_MIN_WORDS = 4

# A sentence ends at . ! or ? (maybe closed by a quote or bracket) followed by white space.
# "Dr. Smith" splits too: an extra entry costs little, a missed break hides a sentence.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’)\]])\s+")


@dataclass(frozen=True, slots=True)
class CandidateEntry:
    """An entry the extractor proposes, before it gets an id and is embedded."""

    text: str
    kind: MemoryKind
    source_turn_ids: tuple[str, ...]
    event_time: datetime | None
    session_id: str | None
    stable_key: str | None = None  # same key, same entry id: re-ingesting is idempotent
    replaces: str | None = None  # id of an existing entry this one supersedes


@dataclass(frozen=True, slots=True)
class Extraction:
    candidates: tuple[CandidateEntry, ...]
    skipped_turn_ids: tuple[str, ...]


class EntryExtractor(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def wants_existing(self) -> bool:
        """Whether ``extract`` should see the user's related memories (costs a search)."""
        ...

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry]
    ) -> Extraction:
        """Propose entries for ``turns``; ``context`` is the STM window before them and
        ``existing`` the user's stored memories most related to them."""
        ...


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, in order; a text without a sentence break is one sentence.

    >>> split_sentences("I ran 5 km. It rained!  Did you? (Yes.) ok")
    ['I ran 5 km.', 'It rained!', 'Did you?', '(Yes.)', 'ok']
    >>> split_sentences("v1.2 is out")
    ['v1.2 is out']
    """
    parts = [p.strip() for p in _SENTENCE_END.split(text)]
    return [p for p in parts if p] or [text]


def verbatim_candidates(
    turns: Sequence[Turn],
    chunk_words: int | None = CHUNK_WORDS,
    sentence_words: int | None = SENTENCE_MIN_WORDS,
) -> tuple[CandidateEntry, ...]:
    """One verbatim entry per turn, "Speaker: content", keyed by the turn (re-adding it
    proposes the same entry id). A turn of more than ``chunk_words`` words (a pasted document,
    a long assistant answer) is indexed in pieces of that many words instead, each pointing
    at the whole turn: an embedder reads only a text's first few hundred word pieces, and a
    piece matches a question that the whole dilutes. The journal keeps the turn whole. A
    "word" is at most 40 characters: text without spaces (minified JSON, a URL list) is cut
    into pieces too.

    A shorter turn with two or more sentences of at least ``sentence_words`` words is indexed
    as those sentences too, beside the whole (``None``: not): people mention a fact in
    passing, in a message about something else ("I need new socks. By the way, we play
    tennis every other Sunday now."), and the sentence matches a question that the rest of
    the message dilutes. A sentence's hit delivers its whole turn
    (``tiermem.pipeline.deliver``).

    >>> from datetime import UTC, datetime
    >>> from tiermem.types import Role
    >>> when = datetime(2026, 1, 1, tzinfo=UTC)
    >>> t = Turn("t1", "u", "s1", Role.USER, "Ann", "one two three four five", when)
    >>> [(e.text, e.source_turn_ids) for e in verbatim_candidates([t], chunk_words=2)]
    [('Ann: one two', ('t1',)), ('Ann: three four', ('t1',)), ('Ann: five', ('t1',))]
    >>> t = Turn("t2", "u", "s1", Role.USER, "Ann", "New socks. We play tennis on Sundays.", when)
    >>> [e.text for e in verbatim_candidates([t], None, 2)]  # doctest: +NORMALIZE_WHITESPACE
    ['Ann: New socks. We play tennis on Sundays.', 'Ann: New socks.',
     'Ann: We play tennis on Sundays.']
    >>> [e.text for e in verbatim_candidates([t])]  # one sentence of 4+ words: the turn alone
    ['Ann: New socks. We play tennis on Sundays.']
    """
    out = []
    for t in turns:
        pieces = _pieces(t.content, chunk_words)
        if len(pieces) == 1:
            out.append(_verbatim(t, t.content, f"turn:{t.turn_id}"))
            if sentence_words is not None:
                out.extend(_sentence_entries(t, sentence_words))
        else:
            out.extend(_verbatim(t, p, f"turn:{t.turn_id}#{i}") for i, p in enumerate(pieces))
    return tuple(out)


def _verbatim(turn: Turn, text: str, key: str) -> CandidateEntry:
    """``text`` (the turn, or a part of it) as an entry of ``turn``, under its speaker."""
    return CandidateEntry(
        text=f"{turn.speaker}: {text}",
        kind=MemoryKind.TURN,
        source_turn_ids=(turn.turn_id,),
        event_time=turn.timestamp,
        session_id=turn.session_id,
        stable_key=key,
    )


def _sentence_entries(turn: Turn, min_words: int) -> list[CandidateEntry]:
    """``turn``'s sentences of at least ``min_words`` words as entries of their own (none
    unless there are two), keyed by the turn and the sentence's place."""
    sentences = [s for s in split_sentences(turn.content) if len(_segments(s)) >= min_words]
    if len(sentences) < 2:
        return []
    return [_verbatim(turn, s, f"turn:{turn.turn_id}~{i}") for i, s in enumerate(sentences)]


def cut_in_pieces(text: str) -> bool:
    """Whether ``verbatim_candidates`` indexes a turn of ``text`` in pieces (more than
    ``CHUNK_WORDS`` words), not whole (a shorter turn's sentences are indexed beside it).

    >>> cut_in_pieces("one two three"), cut_in_pieces(" ".join(["w"] * 121))
    (False, True)
    """
    return len(_pieces(text, CHUNK_WORDS)) > 1


_SEGMENT = re.compile(r"\S{1,40}")


def _segments(text: str) -> list[re.Match[str]]:
    """The words of ``text``, a word longer than 40 characters in 40-character parts."""
    return list(_SEGMENT.finditer(text))


def _span(text: str, words: Sequence[re.Match[str]]) -> str:
    """The text from the first of ``words`` to the last, its white space made single spaces
    (a long word stays whole)."""
    return " ".join(text[words[0].start() : words[-1].end()].split())


def _pieces(text: str, chunk_words: int | None) -> list[str]:
    words = _segments(text)
    if chunk_words is None or len(words) <= chunk_words:
        return [text]
    return [_span(text, words[i : i + chunk_words]) for i in range(0, len(words), chunk_words)]


def bursts(turns: Sequence[Turn]) -> list[tuple[Turn, ...]]:
    """A session's turns cut into bursts: the consecutive turns of one speaker. People send
    bursts of short messages; a burst is what they said before the other side answered.

    >>> from datetime import UTC, datetime
    >>> from tiermem.types import Role
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> ts = [Turn(f"t{i}", "u", "s1", Role.USER, who, "x", t) for i, who in enumerate("AABA")]
    >>> [[x.turn_id for x in b] for b in bursts(ts)]
    [['t0', 't1'], ['t2'], ['t3']]
    """
    out: list[list[Turn]] = []
    for turn in turns:
        last = out[-1][-1] if out else None
        if last is not None and (last.speaker, last.session_id) == (turn.speaker, turn.session_id):
            out[-1].append(turn)
        else:
            out.append([turn])
    return [tuple(b) for b in out]


def _words_text(text: str, limit: int, tail: bool) -> str:
    words = _segments(text)
    if len(words) <= limit:
        return " ".join(text.split())
    return _span(text, words[-limit:] if tail else words[:limit])


def _side(burst: Sequence[Turn], limit: int, tail: bool) -> list[tuple[Turn, str]]:
    """The turns of ``burst`` an exchange takes, nearest the other side first, with their
    text: whole turns while they fit ``limit`` words, then as much of one more as fits (at
    least a part of the turn next to the other side)."""
    order = list(reversed(burst)) if tail else list(burst)
    taken: list[tuple[Turn, str]] = []
    left = limit
    for turn in order[:EXCHANGE_SIDE_TURNS]:
        if left <= 0:
            break
        text = _words_text(turn.content, left, tail)
        taken.append((turn, text))
        left -= len(_segments(turn.content))
    return list(reversed(taken)) if tail else taken


def _worth_pairing(
    first: Sequence[tuple[Turn, str]], second: Sequence[tuple[Turn, str]], kept: set[str]
) -> bool:
    """Both sides say something, or the second answers the question the first asks."""
    if not any(t.turn_id in kept for t, _ in first):
        return False
    answers = first[-1][0].content.rstrip().endswith("?")
    return answers or any(t.turn_id in kept for t, _ in second)


def exchange_candidates(
    turns: Sequence[Turn],
    kept: Sequence[Turn],
    before: Sequence[Turn] = (),
    side_words: int = EXCHANGE_SIDE_WORDS,
) -> tuple[CandidateEntry, ...]:
    r"""One verbatim entry per exchange that ``turns`` take part in: a burst (a speaker's
    consecutive turns) and the burst that answers it. A question and its answer are often
    said in different turns, and in real chats in several short messages each ("Where did
    you go?" / "Lisbon!" / "for the festival"): the pair, embedded and indexed as one text,
    matches a query that no single message matches.

    ``before`` are the session's stored turns said before ``turns`` (so an exchange forms
    whether the messages came in one ``add()`` or one at a time); each side keeps at most
    ``side_words`` words (and ``EXCHANGE_SIDE_TURNS`` messages), the words nearest the other
    side. An exchange is keyed by the last turn before its answer: when a later message
    extends the answer, the entry is re-proposed with the same id and grows
    (``tiermem.pipeline.write.grown_entries``). Small talk ("thanks!") pairs with nothing, unless it
    answers a question ("Did you pass?" / "yes!").

    >>> from datetime import UTC, datetime
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> from tiermem.types import Role
    >>> said = [("Ann", "Where did you go?"), ("Bo", "Lisbon."), ("Bo", "It was hot.")]
    >>> ts = [Turn(f"t{i}", "u", "s1", Role.USER, who, text, t)
    ...       for i, (who, text) in enumerate(said)]
    >>> [(e.text, e.source_turn_ids) for e in exchange_candidates(ts, ts)]
    [('Ann: Where did you go?\nBo: Lisbon.\nBo: It was hot.', ('t0', 't1', 't2'))]
    >>> [e.source_turn_ids for e in exchange_candidates(ts[2:], ts, before=ts[:2])]
    [('t0', 't1', 't2')]
    """
    new_ids = {t.turn_id for t in turns}
    kept_ids = {t.turn_id for t in kept}
    # in the order things were said (a back-filled message goes where it belongs)
    seq = sorted(
        [t for t in before if t.turn_id not in new_ids] + list(turns), key=lambda t: t.timestamp
    )
    out = []
    for first, second in pairwise(bursts(seq)):
        if first[0].session_id != second[0].session_id:
            continue
        a, b = _side(first, side_words, tail=True), _side(second, side_words, tail=False)
        members = [t for t, _ in a + b]
        if not any(t.turn_id in new_ids for t in members):
            continue  # stored already, by an earlier add
        if not _worth_pairing(a, b, kept_ids):
            continue
        out.append(
            CandidateEntry(
                text="\n".join(f"{t.speaker}: {text}" for t, text in a + b),
                kind=MemoryKind.EXCHANGE,
                source_turn_ids=tuple(t.turn_id for t in members),
                event_time=members[0].timestamp,
                session_id=members[0].session_id,
                stable_key=f"exchange:{a[-1][0].turn_id}",
            )
        )
    return tuple(out)


def verbatim_floor(
    turns: Sequence[Turn],
    kept: Sequence[Turn],
    context: Sequence[Turn],
    exchanges: bool = True,
    side_words: int = EXCHANGE_SIDE_WORDS,
    chunk_words: int | None = CHUNK_WORDS,
) -> tuple[CandidateEntry, ...]:
    """What the model-free path stores of ``turns`` (``kept``: those that are not small talk):
    each kept turn verbatim and, with ``exchanges``, each exchange they take part in. A writer
    keeps the same beside its entries."""
    candidates = verbatim_candidates(kept, chunk_words)
    if exchanges:
        earlier = split_small_talk(context, ()).kept
        candidates += exchange_candidates(turns, (*earlier, *kept), context, side_words)
    return candidates


class TurnExtractor:
    """One verbatim entry per user or assistant turn that is not small talk (a long turn in
    pieces), and one per exchange of two bursts (``exchange_candidates``); system turns are
    instructions, not memories. Skipped turns are reported, and stay in the journal.

    ``exchanges=False``: single turns only (what ``turn-v1`` wrote)."""

    wants_existing = False

    def __init__(
        self,
        exchanges: bool = True,
        side_words: int = EXCHANGE_SIDE_WORDS,
        chunk_words: int | None = CHUNK_WORDS,
    ) -> None:
        self._exchanges, self._side_words, self._chunk_words = exchanges, side_words, chunk_words
        self.name = "turn-burst-v3" if exchanges else "turn-v1"

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry] = ()
    ) -> Extraction:
        split = split_small_talk(turns, context)
        candidates = verbatim_floor(
            turns, split.kept, context, self._exchanges, self._side_words, self._chunk_words
        )
        return Extraction(candidates, split.skipped_turn_ids)
