"""SLM-3, the writer: turn an exchange into short, self-contained MTM entries."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field
from tiermem.slm.base import ChatMessage
from tiermem.slm.prompts.sections import clip, render
from tiermem.slm.task import TaskSpec

VERSION = "writer-v2"  # v2: a worked example

EXAMPLE = """Input:
Earlier in the session:
(none)

Existing memories:
[1] [20 April 2026] Sam's puppy class starts on 2 May 2026.

Turns:
[1] 3 May 2026 · Sam: I finally adopted a dog, a beagle called Pepper!
[2] 3 May 2026 · Assistant: Congratulations! Pepper is a lovely name.
[3] 3 May 2026 · Sam: Puppy class got moved to Saturday 9 May.
Output:
{"entries": [{"text": "Sam adopted a beagle named Pepper on 3 May 2026.", "kind": "event", \
"turns": [1], "date": "2026-05-03", "replaces": 0}, {"text": "Sam's puppy class moved to \
Saturday 9 May 2026.", "kind": "plan", "turns": [3], "date": "2026-05-09", "replaces": 1}]}"""
MAX_ENTRIES = 5


class WrittenEntry(BaseModel):
    text: str = Field(min_length=3, max_length=220)
    kind: Literal["fact", "event", "preference", "plan"]
    turns: list[int] = Field(min_length=1, max_length=8)
    date: str = Field(max_length=10, description="YYYY-MM-DD of the event, or empty")
    replaces: int = Field(ge=0, le=8, description="number of an existing memory it updates")


class WriterOutput(BaseModel):
    entries: list[WrittenEntry] = Field(max_length=MAX_ENTRIES)


# Budget from the schema: 5 entries x (220 chars ~ 60 tokens + ~35 of structure).
SPEC = TaskSpec("writer", VERSION, WriterOutput, max_tokens=520)


def schema(turns: int, existing: int) -> dict[str, Any]:
    """This call's schema: turn numbers and replaced-memory numbers that exist."""
    base = SPEC.json_schema()
    entry = base["properties"]["entries"]["items"]
    entry["properties"]["turns"]["items"] = {"type": "integer", "enum": list(range(1, turns + 1))}
    entry["properties"]["replaces"] = {"type": "integer", "enum": list(range(0, existing + 1))}
    return base


def turn_line(date: str, speaker: str, content: str) -> str:
    """How a turn is shown to the model: "3 May 2026 · Sam: I adopted a dog"."""
    return f"{date} · {speaker}: {content}"


# What a small model copies from the head of a turn line: "[2] ", "3 May 2026 · ".
_COPIED_HEAD = re.compile(r"^\s*(?:\[\d+\]\s*)?(?:\d{1,2} [A-Z][a-z]+ \d{4}\s*·\s*)?")


def split_label(text: str, speakers: Iterable[str]) -> tuple[str | None, str]:
    """(the speaker label the model wrote, the rest): a copied line's number and date are
    dropped, and a leading "Name:" is a label only when Name is one of ``speakers`` (or
    "user"/"assistant"), compared case-insensitively.

    >>> split_label("3 May 2026 · Sam: I adopted a dog", ["Sam", "Assistant"])
    ('Sam', 'I adopted a dog')
    >>> split_label("Note: Sam adopted a dog", ["Sam"])
    (None, 'Note: Sam adopted a dog')
    """
    head = _COPIED_HEAD.match(text)
    rest = text[head.end() if head else 0 :]
    names = {s.casefold() for s in speakers} | {"user", "assistant"}
    name, colon, said = rest.partition(":")
    if colon and name.strip().casefold() in names:
        return name.strip(), said.strip()
    return None, rest.strip()


@dataclass(frozen=True, slots=True)
class WriterInput:
    turns: Sequence[str]  # turn_line(...) each, numbered by the prompt
    context: Sequence[str]  # earlier turns of the session, unnumbered
    existing: Sequence[str]  # "[date] text" of related memories already stored


def build_messages(inp: WriterInput) -> list[ChatMessage]:
    numbered = "\n".join(f"[{i}] {clip(t, 400)}" for i, t in enumerate(inp.turns, 1))
    context = "\n".join(clip(t, 200) for t in inp.context) or "(none)"
    existing = "\n".join(f"[{i}] {clip(e, 220)}" for i, e in enumerate(inp.existing, 1)) or "(none)"
    return render(
        role="You write a user's long-term memory from their conversations.",
        task=(
            "From the numbered turns, write short, self-contained memories worth keeping: facts "
            "about the people, their preferences, events with their dates, and plans with their "
            "details. Each memory names the person (never 'I' or 'he') and gives absolute dates. "
            "List the numbers of the turns it comes from. If it changes or corrects one of the "
            "existing memories, give that memory's number in replaces, else 0."
        ),
        constraints=[
            f"At most {MAX_ENTRIES} memories; none for greetings or small talk.",
            "One fact per memory, under 30 words, in the third person.",
            "Copy names, numbers and places exactly as written.",
        ],
        output_format=(
            'JSON: {"entries": [{"text": str, "kind": "fact"|"event"|"preference"|"plan", '
            '"turns": [numbers], "date": "YYYY-MM-DD" or "", "replaces": number}]}'
        ),
        example=EXAMPLE,
        input_text=(
            f"Earlier in the session:\n{context}\n\nExisting memories:\n{existing}\n\n"
            f"Turns:\n{numbered}"
        ),
    )
