"""LoCoMo-format conversations (Maharana et al., ACL 2024) and their questions.

Tolerates the known quirks and counts each: evidence strings holding several ids or stray
text, session dates without a session (and sessions without a date), integer answers,
adversarial questions with no ``answer``, and turns that share an image (the caption is kept
in the text, as a reader of the conversation would see it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_DIA_ID = re.compile(r"D\d+:\d+")
_SESSION = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True, slots=True)
class LocomoTurn:
    dia_id: str
    speaker: str
    text: str


@dataclass(frozen=True, slots=True)
class LocomoSession:
    index: int
    date: datetime | None
    turns: tuple[LocomoTurn, ...]


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True, slots=True)
class LocomoSample:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[LocomoSession, ...]
    questions: tuple[LocomoQuestion, ...]

    @property
    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


@dataclass
class Quirks:
    counts: Counter[str] = field(default_factory=Counter)

    def note(self, quirk: str, n: int = 1) -> None:
        self.counts[quirk] += n


def parse_session_date(value: str) -> datetime:
    """LoCoMo writes dates like ``1:56 pm on 8 May, 2023``; taken as UTC.

    >>> parse_session_date("1:56 pm on 8 May, 2023").isoformat()
    '2023-05-08T13:56:00+00:00'
    """
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _turn(raw: dict[str, Any], quirks: Quirks) -> LocomoTurn:
    text = str(raw.get("text", "")).strip()
    caption = raw.get("blip_caption")
    if caption:
        quirks.note("image turns (caption appended)")
        text = f"{text} [shares a photo: {caption}]".strip()
    return LocomoTurn(str(raw["dia_id"]), str(raw["speaker"]), text)


def _question(raw: dict[str, Any], quirks: Quirks) -> LocomoQuestion:
    evidence: list[str] = []
    for item in raw.get("evidence", []):
        found = _DIA_ID.findall(str(item))
        if len(found) != 1 or found[0] != str(item).strip():
            quirks.note("malformed evidence strings")
        evidence.extend(found)
    answer = raw.get("answer", raw.get("adversarial_answer"))
    if "answer" not in raw:
        quirks.note("questions without 'answer' (adversarial)")
    if isinstance(answer, int | float):
        quirks.note("non-string answers")
    return LocomoQuestion(
        str(raw["question"]),
        "" if answer is None else str(answer),
        tuple(dict.fromkeys(evidence)),
        int(raw["category"]),
    )


def parse_sample(raw: dict[str, Any], quirks: Quirks) -> LocomoSample:
    conversation = raw["conversation"]
    sessions = []
    indices = sorted(int(m.group(1)) for k in conversation if (m := _SESSION.match(k)))
    dated = {int(k.split("_")[1]) for k in conversation if k.endswith("_date_time")}
    quirks.note("session dates without a session", len(dated - set(indices)))
    for index in indices:
        date_text = conversation.get(f"session_{index}_date_time")
        if not date_text:
            quirks.note("sessions without a date")
        turns = tuple(_turn(t, quirks) for t in conversation[f"session_{index}"])
        if not turns:
            quirks.note("empty sessions")
            continue
        sessions.append(
            LocomoSession(index, parse_session_date(date_text) if date_text else None, turns)
        )
    return LocomoSample(
        sample_id=str(raw.get("sample_id", f"sample-{id(raw)}")),
        speaker_a=str(conversation["speaker_a"]),
        speaker_b=str(conversation["speaker_b"]),
        sessions=tuple(sessions),
        questions=tuple(_question(q, quirks) for q in raw.get("qa", [])),
    )


def load_locomo(path: Path) -> tuple[list[LocomoSample], Quirks]:
    """Every sample in a LoCoMo-format JSON file, and the quirks met while reading it."""
    quirks = Quirks()
    data = json.loads(path.read_text(encoding="utf-8"))
    return [parse_sample(raw, quirks) for raw in data], quirks


def session_messages(session: LocomoSession, fallback_date: datetime) -> list[dict[str, Any]]:
    """A session as ``add()`` messages: both speakers keep their names, turn ids are the
    dialogue ids (so gold evidence maps onto source turns), turns a minute apart."""
    from datetime import timedelta

    start = session.date or fallback_date
    return [
        {
            "role": "user",
            "speaker": t.speaker,
            "content": t.text or "(no text)",
            "timestamp": start + timedelta(minutes=i),
            "turn_id": t.dia_id,
        }
        for i, t in enumerate(session.turns)
    ]
