"""A cheap rule filter in front of the writer: greetings, acknowledgements and restatements
cost no model call. Pure functions.

>>> from datetime import UTC, datetime
>>> from tiermem.types import Role, Turn
>>> t = lambda c, r=Role.USER: Turn("t", "u", "s", r, "Ana", c, datetime(2026, 1, 1, tzinfo=UTC))
>>> small_talk_reason(t("Thanks a lot!"), None)
'acknowledgement'
>>> small_talk_reason(t("I moved to Porto in May."), None) is None
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tiermem.types import Role, Turn

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")  # words of any script: "спасибо" is one too
_GREETING = re.compile(
    r"^(hi|hey|hello|hiya|yo|good (morning|afternoon|evening|night)|bye|goodbye|see you"
    r"( later| soon| tomorrow)?|take care|talk (to you )?(later|soon)|have a (good|nice|great)"
    r" (day|one|evening|night|weekend))\b"
)
_ACK = re.compile(
    r"^(ok(ay)?|k|sure|yes|yeah|yep|no|nope|thanks?( you)?( so much| a lot)?|thx|ty|cool|great|"
    r"nice|awesome|got it|noted|understood|sounds good|perfect|lol|haha+|wow|right|alright|"
    r"you're welcome|no problem|np|of course|indeed|true|exactly)\b"
)
# Words that may follow a greeting or acknowledgement without making it carry content.
_FILLER = {
    "so",
    "much",
    "a",
    "lot",
    "again",
    "too",
    "really",
    "very",
    "you",
    "man",
    "all",
    "then",
    "for",
    "that",
    "it",
    "the",
    "help",
    "there",
    "everyone",
    "friend",
    "buddy",
    "to",
    "later",
    "soon",
    "see",
    "how",
    "are",
    "doing",
    "good",
    "great",
    "nice",
    "meet",
    "chat",
    "hope",
    "well",
    "your",
    "day",
    "morning",
    "evening",
    "night",
    "talk",
    "bye",
    "and",
}


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def small_talk_reason(turn: Turn, previous: Turn | None) -> str | None:
    """Why ``turn`` carries nothing worth remembering, or ``None`` if it may."""
    if turn.role is Role.SYSTEM:
        return "system"
    words = _words(turn.content)
    if not words:
        return "empty"
    text = " ".join(words)
    for pattern, reason in ((_GREETING, "greeting"), (_ACK, "acknowledgement")):
        match = pattern.match(text)
        if match and set(words[len(_words(match.group(0))) :]) <= _FILLER:
            return reason
    if previous is not None and turn.role is Role.ASSISTANT and _restates(words, previous):
        return "restatement"
    return None


@dataclass(frozen=True, slots=True)
class SmallTalkSplit:
    """The turns worth extracting from, and the ids of those the rules dropped."""

    kept: tuple[Turn, ...]
    skipped_turn_ids: tuple[str, ...]


def split_small_talk(turns: Sequence[Turn], context: Sequence[Turn]) -> SmallTalkSplit:
    """Apply ``small_talk_reason`` to each turn, each judged against the turn before it
    (the last of ``context`` for the first). Every extractor runs this, with or without a
    model: the dropped turns stay in the journal as the record, they just get no entry."""
    kept: list[Turn] = []
    skipped: list[str] = []
    previous = context[-1] if context else None
    for turn in turns:
        if small_talk_reason(turn, previous):
            skipped.append(turn.turn_id)
        else:
            kept.append(turn)
        previous = turn
    return SmallTalkSplit(tuple(kept), tuple(skipped))


_ACK_WORDS = {
    "noted",
    "got",
    "understood",
    "updated",
    "okay",
    "sure",
    "great",
    "nice",
    "lovely",
    "sounds",
    "good",
    "perfect",
    "thanks",
    "thank",
    "now",
    "from",
    "on",
    "it",
    "is",
}


def _content(text: str) -> set[str]:
    """Content words, plural s stripped, acknowledgement words left out."""
    words = {w.rstrip("s") if len(w) > 3 else w for w in _words(text) if len(w) > 2}
    return words - _ACK_WORDS


def _restates(words: list[str], previous: Turn) -> bool:
    """An assistant turn whose content words (an acknowledgement aside) nearly all come from
    the previous turn adds nothing: "Evening runs noted." after "I switched my runs to the
    evenings"."""
    mine = _content(" ".join(words))
    theirs = _content(previous.content)
    if not mine or not theirs:
        return not mine and bool(theirs)  # a bare "Noted." after a real turn
    return len(mine - theirs) <= len(mine) // 5
