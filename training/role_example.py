"""A generating role's training example: the prompt as the role serves it, the JSON it
teaches, and where it came from.

>>> shorten("Caroline: I went to a LGBTQ support group yesterday and it was so powerful.", 40)
'Caroline: I went to a LGBTQ support'
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from tiermem.slm.base import ChatMessage
from tiermem.training.dataset import read_lines


@dataclass(frozen=True, slots=True)
class RoleMeta:
    role: str
    split: str
    sample_id: str
    conversation: int  # position in the file
    question_index: int  # position in the conversation's qa list (the writer: its window's)
    category: str
    evidence: tuple[str, ...]
    prompt_version: str
    question_type: str | None = None


@dataclass(frozen=True, slots=True)
class RoleExample:
    """One prompt of a generating role and the output it teaches (the role's JSON)."""

    messages: tuple[ChatMessage, ...]
    target: str
    meta: RoleMeta

    def to_json(self) -> str:
        return json.dumps(
            {
                "messages": [{"role": m.role, "content": m.content} for m in self.messages],
                "target": self.target,
                "meta": asdict(self.meta),
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, line: str) -> RoleExample:
        raw = json.loads(line)
        meta = dict(raw["meta"])
        meta["evidence"] = tuple(meta["evidence"])
        return cls(
            tuple(ChatMessage(m["role"], m["content"]) for m in raw["messages"]),
            str(raw["target"]),
            RoleMeta(**meta),
        )


def shorten(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit + 1].rsplit(" ", 1)[0]
    return (cut if cut else text[:limit]).rstrip(" ,;:-")


def read_role_examples(path: Path) -> list[RoleExample]:
    """The examples of a JSONL file written by ``tiermem train dataset --role ...``."""
    return read_lines(path, RoleExample.from_json, "a tiermem role training set")


__all__ = ["RoleExample", "RoleMeta", "read_role_examples", "shorten"]
