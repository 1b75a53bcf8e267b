"""The loader of LoCoMo-format files (Maharana et al., ACL 2024), into the dataset-neutral
types of :mod:`tiermem.bench.datasets.conversation`.

LoCoMo's integer categories become names (:data:`CATEGORIES`); a question's own
``question_type`` (LongMemEval S, converted to this format, has one on every question) is kept.

Reads any real file to the end, tolerating its known quirks and counting each: evidence
strings holding several ids or stray text, evidence naming no turn, session dates without a
session (and sessions without a date), integer answers, adversarial questions with no
``answer``, turns that share an image (the caption is kept in the text, as a reader of the
conversation would see it), and messages that are empty or only invisible characters
(LongMemEval has some: skipped, and dropped from the evidence that names them). Long
messages are kept whole.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tiermem.bench.datasets.conversation import (
    Conversation,
    DialogueTurn,
    Question,
    Quirks,
    Session,
)
from tiermem.validation import MAX_CONTENT_CHARS

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_DIA_ID = re.compile(r"D\d+:\d+")
_SESSION = re.compile(r"^session_(\d+)$")
# Zero-width space, non-joiner, joiner, word joiner, byte-order mark: a message of only these
# says nothing, though ``str.strip`` keeps them.
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))


def parse_session_date(value: str) -> datetime:
    """LoCoMo writes dates like ``1:56 pm on 8 May, 2023``; taken as UTC.

    >>> parse_session_date("1:56 pm on 8 May, 2023").isoformat()
    '2023-05-08T13:56:00+00:00'
    """
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def is_empty(text: str) -> bool:
    """A message with nothing to read: blank, or only zero-width characters.

    >>> is_empty(" \\u200b "), is_empty("ok\\u200b")
    (True, False)
    """
    return not text.translate(_INVISIBLE).strip()


def category_name(raw: Any) -> str:
    """LoCoMo's category id as a name; an unknown id keeps its own spelling.

    >>> category_name(4), category_name("2"), category_name(9)
    ('single-hop', 'temporal', '9')
    """
    text = str(raw).strip()
    return CATEGORIES.get(int(text), text) if text.isdigit() else text


def _turn(raw: dict[str, Any], quirks: Quirks) -> DialogueTurn | None:
    text = str(raw.get("text", "")).strip()
    caption = raw.get("blip_caption")
    if caption:
        quirks.note("image turns (caption appended)")
        text = f"{text} [shares a photo: {caption}]".strip()
    if is_empty(text):
        quirks.note("empty messages (skipped)")
        return None
    if len(text) > MAX_CONTENT_CHARS:  # add() refuses it: every system reads the same cut
        quirks.note("messages over add()'s limit (cut to it)")
        text = text[:MAX_CONTENT_CHARS]
    return DialogueTurn(str(raw["dia_id"]), str(raw["speaker"]), text)


def _question(raw: dict[str, Any], turns: set[str], skipped: set[str], quirks: Quirks) -> Question:
    evidence: list[str] = []
    for item in raw.get("evidence", []):
        found = _DIA_ID.findall(str(item))
        if len(found) != 1 or found[0] != str(item).strip():
            quirks.note("malformed evidence strings")
        for turn_id in found:
            if turn_id in skipped:
                quirks.note("evidence on empty messages (dropped)")
            else:
                quirks.note("evidence naming no turn", int(turn_id not in turns))
                evidence.append(turn_id)
    answer = raw.get("answer", raw.get("adversarial_answer"))
    if "answer" not in raw:
        quirks.note("questions without 'answer' (adversarial)")
    if isinstance(answer, int | float):
        quirks.note("non-string answers")
    question_type = raw.get("question_type")
    return Question(
        str(raw["question"]),
        "" if answer is None else str(answer),
        tuple(dict.fromkeys(evidence)),
        category_name(raw["category"]),
        str(question_type) if question_type else None,
    )


def parse_sample(raw: dict[str, Any], quirks: Quirks) -> Conversation:
    conversation = raw["conversation"]
    sessions = []
    skipped: set[str] = set()
    indices = sorted(int(m.group(1)) for k in conversation if (m := _SESSION.match(k)))
    dated = {int(k.split("_")[1]) for k in conversation if k.endswith("_date_time")}
    quirks.note("session dates without a session", len(dated - set(indices)))
    for index in indices:
        date_text = conversation.get(f"session_{index}_date_time")
        if not date_text:
            quirks.note("sessions without a date")
        turns = []
        for item in conversation[f"session_{index}"]:
            turn = _turn(item, quirks)
            if turn is None:
                skipped.add(str(item.get("dia_id")))
            else:
                turns.append(turn)
        if not turns:
            quirks.note("empty sessions")
            continue
        date = parse_session_date(date_text) if date_text else None
        sessions.append(Session(index, date, tuple(turns)))
    kept = {t.turn_id for s in sessions for t in s.turns}
    return Conversation(
        sample_id=str(raw.get("sample_id", f"sample-{id(raw)}")),
        speaker_a=str(conversation["speaker_a"]),
        speaker_b=str(conversation["speaker_b"]),
        sessions=tuple(sessions),
        questions=tuple(_question(q, kept, skipped, quirks) for q in raw.get("qa", [])),
    )


def load_locomo(path: Path) -> tuple[list[Conversation], Quirks]:
    """Every conversation in a LoCoMo-format JSON file, and the quirks met while reading it."""
    quirks = Quirks()
    data = json.loads(path.read_text(encoding="utf-8"))
    return [parse_sample(raw, quirks) for raw in data], quirks


__all__ = ["CATEGORIES", "category_name", "is_empty", "load_locomo", "parse_session_date"]
