"""Training sets of the generating roles: the controller's and the writer's.

An example is the role's prompt, rendered by the module it serves with
(:mod:`tiermem.slm.prompts.controller`), and the JSON output it teaches, in the role's own
schema. For the controller, the target for a question is what the memory that answers it
would say: each gold evidence turn as ``Speaker: text``, shortened to the schema's 160
characters, as a hypothetical query routed to MTM (the first weighted 3, then 2 and 1), with a
time window only where the question names a month of a year and every evidence turn falls in
it. The read path always searches the user's own words beside these, so the target need not
repeat them.

The controller sees what the benchmark's read path gives it: no recent turns (each question
is asked outside the ingested sessions) and, as today, the date of the conversation's last
session. Only the headline questions (with evidence, not adversarial) are taken. Splits are
by position in the file modulo ten (:data:`tiermem.training.dataset.SPLITS`): 0-6 train, 7
tune, 8-9 test. :func:`drop_leaks` removes a training example whose question or target holds
the text of a question or an evidence turn of the tune or test split (LongMemEval S shares
distractor sessions between haystacks), and says how many it dropped.

The writer's examples are built by :mod:`tiermem.training.writer_data`.

>>> window("What did Mel paint in August 2023?", [date(2023, 8, 14)])
('2023-08-01', '2023-08-31')
>>> window("What did Mel paint in August 2023?", [date(2023, 9, 2)])
('', '')
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.conversation import ADVERSARIAL, Conversation, Question
from tiermem.bench.update_scenarios import scenarios
from tiermem.slm.prompts import controller
from tiermem.training import TrainingInputError
from tiermem.training.dataset import SPLITS
from tiermem.training.role_example import RoleExample, RoleMeta, read_role_examples, shorten
from tiermem.training.writer_data import (
    UPDATE_FIRST_USER,
    UPDATE_SEED,
    UPDATE_USERS,
    update_examples,
    writer_examples,
)

ROLES = ("selector", "controller", "writer")
QUERY_CHARS = 160  # HypotheticalQuery.text's max_length
MAX_QUERIES = 3  # ControllerOutput.queries' max_length
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTH_YEAR = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s*,?\s*(\d{4})\b", re.IGNORECASE)
_LEAK_CHARS = 24  # shorter texts ("Thanks!") are shared by chance, not leaked


def window(question: str, evidence_dates: Sequence[date]) -> tuple[str, str]:
    """(since, until) of the month and year the question names, when every evidence turn
    falls in it; else empty."""
    found = _MONTH_YEAR.search(question)
    if not found or not evidence_dates:
        return "", ""
    year, month = int(found.group(2)), _MONTHS[found.group(1).lower()]
    first, last = date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])
    if all(first <= d <= last for d in evidence_dates):
        return first.isoformat(), last.isoformat()
    return "", ""


def _headline(question: Question) -> bool:
    return bool(question.evidence) and question.category != ADVERSARIAL


def controller_examples(
    conversations: Sequence[Conversation], positions: Sequence[int], split: str
) -> list[RoleExample]:
    """The controller's examples of the conversations at ``positions`` of a file."""
    out = []
    for position, sample in zip(positions, conversations, strict=True):
        turns = {t.turn_id: (t, s.date) for s in sample.sessions for t in s.turns}
        dates = [s.date for s in sample.sessions if s.date]
        today = max(dates).date() if dates else date(2000, 1, 1)
        for index, question in enumerate(sample.questions):
            if not _headline(question):
                continue
            found = [turns[e] for e in question.evidence if e in turns and turns[e][0].text]
            if not found:
                continue
            queries = [
                {
                    "text": shorten(f"{t.speaker}: {t.text}", QUERY_CHARS),
                    "route": "mtm",
                    "weight": 3 - i,
                }
                for i, (t, _) in enumerate(found[:MAX_QUERIES])
            ]
            since, until = window(question.question, [d.date() for _, d in found if d])
            target = {"queries": queries, "since": since, "until": until, "kinds": []}
            controller.ControllerOutput.model_validate(target)  # the schema it serves with
            messages = controller.build_messages(
                controller.ControllerInput(question.question, (), today)
            )
            meta = RoleMeta(
                "controller", split, sample.sample_id, position, index, question.category,
                tuple(question.evidence), controller.VERSION, question.question_type,
            )  # fmt: skip
            out.append(RoleExample(tuple(messages), json.dumps(target), meta))
    return out


def _held_out_texts(conversations: Sequence[Conversation]) -> set[str]:
    texts = set()
    for sample in conversations:
        turns = {t.turn_id: t.text for s in sample.sessions for t in s.turns}
        for question in sample.questions:
            texts.add(question.question)
            texts.update(turns[e] for e in question.evidence if e in turns)
    return {" ".join(t.split()).lower() for t in texts if len(t) >= _LEAK_CHARS}


def drop_leaks(
    examples: Iterable[RoleExample], held_out: Sequence[Conversation]
) -> tuple[list[RoleExample], int]:
    """``examples`` without those that hold a held-out question or evidence turn's text, and
    how many were dropped."""
    texts = _held_out_texts(held_out)
    kept, dropped = [], 0
    for example in examples:
        seen = " ".join((example.messages[-1].content + " " + example.target).split()).lower()
        if any(text in seen for text in texts):
            dropped += 1
        else:
            kept.append(example)
    return kept, dropped


@dataclass(frozen=True, slots=True)
class RoleDatasetStats:
    conversations: int
    examples: int
    leaks_dropped: int
    update_examples: int = 0  # the writer's, from the update scenarios (train split)


def write_role_dataset(role: str, files: Sequence[Path], split: str, out: Path) -> RoleDatasetStats:
    """The examples of ``role`` from the ``split`` of each file (each split by its own
    positions), held-out leaks dropped when the split is train, written to ``out``. The
    writer's train split also takes the update examples (:func:`update_examples`)."""
    if role not in ("controller", "writer"):
        raise TrainingInputError(f"--role takes one of {', '.join(ROLES)}, got {role!r}")
    if split not in SPLITS:
        raise TrainingInputError(f"--split takes one of {', '.join(SPLITS)}, got {split!r}")
    examples: list[RoleExample] = []
    conversations = dropped = 0
    for path in files:
        samples, _quirks = load_dataset(path)
        positions = [i for i in range(len(samples)) if i % 10 in SPLITS[split]]
        chosen = [samples[i] for i in positions]
        build = controller_examples if role == "controller" else writer_examples
        found = build(chosen, positions, split)
        if split == "train":
            held = [s for i, s in enumerate(samples) if i % 10 not in SPLITS["train"]]
            found, leaks = drop_leaks(found, held)
            dropped += leaks
        examples += found
        conversations += len(chosen)
    updates = []
    if role == "writer" and split == "train" and examples:
        updates = update_examples(scenarios(UPDATE_SEED, UPDATE_USERS, UPDATE_FIRST_USER), split)
        examples += updates
    if not examples:
        why = (
            " (it learns from LoCoMo's `observation` facts: none here)" if role == "writer" else ""
        )
        raise TrainingInputError(f"no {role} example in the {split} split of the files given{why}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(e.to_json() + "\n" for e in examples), encoding="utf-8")
    return RoleDatasetStats(conversations, len(examples), dropped, len(updates))


__all__ = [
    "ROLES",
    "RoleDatasetStats",
    "RoleExample",
    "RoleMeta",
    "controller_examples",
    "drop_leaks",
    "read_role_examples",
    "window",
    "write_role_dataset",
]
