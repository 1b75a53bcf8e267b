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

For the writer, an example is a window of turns as the write path serves it
(:class:`tiermem.slm.roles.writer.SLMWriter`): a session is one ``add()`` (as the benchmark
ingests it), small talk is dropped by the same rules, and the kept turns go in chunks of eight,
the session's four turns before each as context. The existing memories it is shown are the
user's earlier turns and facts with the most content words in common with the session (the
store's hybrid search is approximated by that overlap, five at most, as
``RELATED_MEMORIES``). The target is LoCoMo's gold ``observation`` facts whose last source
turn falls in the window, citing their turns by number; a fact that only restates its turn is
left out, as the writer drops it when served; a window with none teaches "nothing worth
keeping". Update examples come from ``tiermem bench updates``' scenario generator under
another seed (:data:`UPDATE_SEED`), a statement and its reply at a time: a change or a
correction targets the fact with ``replaces`` pointing at the older statement, which the
window is always shown; a look-alike (a friend's move) replaces nothing. Only the families of
:data:`WRITER_FAMILIES` are taught, so the other four stay unseen for the benchmark.

>>> shorten("Caroline: I went to a LGBTQ support group yesterday and it was so powerful.", 40)
'Caroline: I went to a LGBTQ support'
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
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.conversation import (
    ADVERSARIAL,
    Conversation,
    Observation,
    Question,
    Session,
)
from tiermem.bench.update_scenarios import Scenario, StatedFact, scenarios
from tiermem.lexical import content_stems
from tiermem.render import human_date
from tiermem.slm.base import ChatMessage
from tiermem.slm.prompts import controller, writer
from tiermem.slm.roles.writer import restates
from tiermem.smalltalk import split_small_talk
from tiermem.training import TrainingInputError
from tiermem.training.dataset import SPLITS, read_lines
from tiermem.types import Role, Turn

ROLES = ("selector", "controller", "writer")
QUERY_CHARS = 160  # HypotheticalQuery.text's max_length
MAX_QUERIES = 3  # ControllerOutput.queries' max_length
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTH_YEAR = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s*,?\s*(\d{4})\b", re.IGNORECASE)
_LEAK_CHARS = 24  # shorter texts ("Thanks!") are shared by chance, not leaked
WINDOW_TURNS = 8  # SLMWriter's max_turns
CONTEXT_TURNS = 4  # SLMWriter's context_turns
RELATED = 5  # tiermem.pipeline.write.RELATED_MEMORIES
UPDATE_SEED = 1001  # bench updates runs seed 7
UPDATE_USERS = 24
WRITER_FAMILIES = ("home", "job", "diet", "dentist", "correction")
_PLAN = re.compile(r"\b(plans?|planning|will|going to|intends?|hopes? to|wants? to)\b", re.I)
_PREFERENCE = re.compile(r"\b(loves?|likes?|enjoys?|prefers?|favou?rite|passionate)\b", re.I)


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


def shorten(text: str, limit: int = QUERY_CHARS) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit + 1].rsplit(" ", 1)[0]
    return (cut if cut else text[:limit]).rstrip(" ,;:-")


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
                {"text": shorten(f"{t.speaker}: {t.text}"), "route": "mtm", "weight": 3 - i}
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


def kind_of(text: str) -> str:
    """A gold fact's kind for the writer's schema (LoCoMo's observations have none).

    >>> [kind_of(t) for t in ("Ana plans to visit Rome.", "Ana loves jazz.", "Ana has a cat.")]
    ['plan', 'preference', 'fact']
    """
    return "plan" if _PLAN.search(text) else "preference" if _PREFERENCE.search(text) else "fact"


@dataclass(frozen=True, slots=True)
class _Memory:
    """An earlier turn or fact, as the store would show it to the writer."""

    text: str
    at: datetime
    turn_id: str
    stems: frozenset[str]

    @property
    def shown(self) -> str:
        return f"[{human_date(self.at)}] {self.text}"


def _memory(text: str, at: datetime, turn_id: str) -> _Memory:
    return _Memory(text, at, turn_id, frozenset(content_stems(text)))


def _related(stored: Sequence[_Memory], text: str) -> list[_Memory]:
    """The stored memories with the most content words of ``text``, newest first on ties."""
    words = content_stems(text[:2000])
    scored = [(len(words & m.stems), i, m) for i, m in enumerate(stored)]
    best = sorted((x for x in scored if x[0]), key=lambda x: (-x[0], -x[1]))
    return [m for _, _, m in best[:RELATED]]


def _session_turns(session: Session, fallback: datetime) -> list[Turn]:
    """A session's turns as ``add()`` stores them (``session_messages``: a minute apart)."""
    start = session.date or fallback
    return [
        Turn(t.turn_id, "u", f"s{session.index}", Role.USER, t.speaker, t.text or "(no text)",
             start + timedelta(minutes=i))
        for i, t in enumerate(session.turns)
    ]  # fmt: skip


def _writer_messages(
    chunk: Sequence[Turn], before: Sequence[Turn], shown: Sequence[_Memory]
) -> list[ChatMessage]:
    return writer.build_messages(
        writer.WriterInput(
            turns=[writer.turn_line(human_date(t.timestamp), t.speaker, t.content) for t in chunk],
            context=[f"{t.speaker}: {t.content}" for t in before[-CONTEXT_TURNS:]],
            existing=[m.shown for m in shown],
        )
    )


def _target(entries: list[dict[str, object]], turns: int, shown: int) -> str:
    """The writer's JSON, checked against the schema it is served with."""
    output = writer.WriterOutput.model_validate({"entries": entries})
    for e in output.entries:
        if not all(1 <= n <= turns for n in e.turns) or e.replaces > shown:
            raise ValueError(f"a target names a turn or memory that is not shown: {e}")
    return json.dumps({"entries": entries}, ensure_ascii=False)


def _observation_entries(
    found: Sequence[Observation], chunk: Sequence[Turn]
) -> list[dict[str, object]]:
    number = {t.turn_id: i for i, t in enumerate(chunk, 1)}
    entries: list[dict[str, object]] = []
    for o in found:
        cited = sorted({number[i] for i in o.turn_ids if i in number})
        text = shorten(o.text, 220)
        if restates(text, [chunk[n - 1].content for n in cited]):
            continue  # served, the writer drops a copy of its turn: never teach one
        entries.append(
            {"text": text, "kind": kind_of(text), "turns": cited, "date": "", "replaces": 0}
        )
    return entries[: writer.MAX_ENTRIES]


def writer_examples(
    conversations: Sequence[Conversation], positions: Sequence[int], split: str
) -> list[RoleExample]:
    """The writer's windows of the conversations at ``positions`` of a file, each with the
    gold observations it should write (conversations without observations give none)."""
    out = []
    for position, sample in zip(positions, conversations, strict=True):
        if not sample.observations:
            continue
        order = {t.turn_id: i for i, t in enumerate(t for s in sample.sessions for t in s.turns)}
        stored: list[_Memory] = []
        window = 0
        fallback = datetime(2000, 1, 1, tzinfo=UTC)
        for session in sample.sessions:
            turns = _session_turns(session, fallback)
            fallback = turns[0].timestamp + timedelta(days=1) if turns else fallback
            kept = split_small_talk(turns, []).kept
            kept_ids = {t.turn_id for t in kept}
            # an observation is written with the window of its last kept source turn
            home: dict[str, list[Observation]] = {}
            for o in sample.observations:
                sources = [i for i in o.turn_ids if i in kept_ids]
                if sources:
                    home.setdefault(max(sources, key=order.__getitem__), []).append(o)
            shown = _related(stored, " ".join(t.content for t in kept))
            before: list[Turn] = []
            written: list[_Memory] = []
            for start in range(0, len(kept), WINDOW_TURNS):
                chunk = kept[start : start + WINDOW_TURNS]
                found = [o for t in chunk for o in home.get(t.turn_id, [])]
                entries = _observation_entries(found, chunk)
                at = chunk[0].timestamp
                written += [_memory(str(e["text"]), at, chunk[0].turn_id) for e in entries]
                meta = RoleMeta(
                    "writer", split, sample.sample_id, position, window, "observations",
                    tuple(t.turn_id for t in chunk), writer.VERSION,
                )  # fmt: skip
                messages = _writer_messages(chunk, before, shown)
                target = _target(entries, len(chunk), len(shown))
                out.append(RoleExample(tuple(messages), target, meta))
                before.extend(chunk)
                window += 1
            # what the store holds after this add(): the verbatim turns and the entries written
            stored += [_memory(f"{t.speaker}: {t.content}", t.timestamp, t.turn_id) for t in kept]
            stored += written
    return out


def update_examples(made: Sequence[Scenario], split: str) -> list[RoleExample]:
    """The writer's update examples: each labelled statement of :data:`WRITER_FAMILIES` and
    its reply as one ``add()``, the older statement shown where it is replaced."""
    out = []
    for position, scenario in enumerate(made):
        conv = scenario.conversation
        facts = {f.turn_id: f for f in scenario.facts}
        stored: list[_Memory] = []
        for session in conv.sessions:
            turns = _session_turns(session, session.date or datetime(2000, 1, 1, tzinfo=UTC))
            for i in range(0, len(turns), 2):  # a statement and its reply
                pair, before = turns[i : i + 2], turns[max(0, i - CONTEXT_TURNS) : i]
                chunk = split_small_talk(pair, before).kept
                fact = facts.get(pair[0].turn_id)
                if fact is not None and fact.family in WRITER_FAMILIES and pair[0] in chunk:
                    out.append(
                        _update_example(
                            fact, chunk, before, stored, (conv.sample_id, position), split
                        )
                    )
                stored += [_memory(f"{t.speaker}: {t.content}", t.timestamp, t.turn_id)
                           for t in chunk]  # fmt: skip
                if fact is not None:
                    stored.append(_memory(fact.text, pair[0].timestamp, pair[0].turn_id))
    return out


def _update_example(
    fact: StatedFact,
    chunk: Sequence[Turn],
    before: Sequence[Turn],
    stored: Sequence[_Memory],
    where: tuple[str, int],
    split: str,
) -> RoleExample:
    shown = _related(stored, " ".join(t.content for t in chunk))
    replaces = 0
    if fact.replaces is not None:
        old = next((m for m in shown if m.turn_id == fact.replaces), None)
        if old is None:  # the older statement is always shown
            old = next(m for m in stored if m.turn_id == fact.replaces)
            shown = [old, *shown[: RELATED - 1]]
        replaces = shown.index(old) + 1
    number = [t.turn_id for t in chunk].index(fact.turn_id) + 1
    entry = {"text": fact.text, "kind": fact.kind, "turns": [number], "date": "",
             "replaces": replaces}  # fmt: skip
    evidence = (fact.turn_id, *([fact.replaces] if fact.replaces else []))
    meta = RoleMeta(
        "writer", split, *where, int(fact.turn_id.split(":")[-1]),
        "update", evidence, writer.VERSION, fact.family,
    )  # fmt: skip
    messages = _writer_messages(chunk, before, shown)
    return RoleExample(tuple(messages), _target([entry], len(chunk), len(shown)), meta)


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
        updates = update_examples(scenarios(UPDATE_SEED, UPDATE_USERS), split)
        examples += updates
    if not examples:
        why = (
            " (it learns from LoCoMo's `observation` facts: none here)" if role == "writer" else ""
        )
        raise TrainingInputError(f"no {role} example in the {split} split of the files given{why}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(e.to_json() + "\n" for e in examples), encoding="utf-8")
    return RoleDatasetStats(conversations, len(examples), dropped, len(updates))


def read_role_examples(path: Path) -> list[RoleExample]:
    """The examples of a JSONL file written by :func:`write_role_dataset`."""
    return read_lines(path, RoleExample.from_json, "a tiermem role training set")


__all__ = [
    "ROLES",
    "RoleDatasetStats",
    "RoleExample",
    "RoleMeta",
    "controller_examples",
    "drop_leaks",
    "kind_of",
    "read_role_examples",
    "shorten",
    "update_examples",
    "window",
    "write_role_dataset",
    "writer_examples",
]
