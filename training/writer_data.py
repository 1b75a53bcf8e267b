"""The writer's training windows: the prompts the write path sends, with the facts they should
yield.

A window is built as :class:`tiermem.slm.roles.writer.SLMWriter` serves the benchmark's
ingestion: a session is one ``add()`` (``session_messages``), small talk is dropped by the
same rules, the kept turns go in chunks of ``writer_max_turns`` with the session's turns
before each as context (:func:`tiermem.slm.roles.writer.writer_input`), and the memories
shown are the user's earlier turns and written facts that best match each of the chunk's
turns (:func:`tiermem.slm.roles.writer.related_to`). The store's hybrid search that picks
the candidates when served (:func:`tiermem.pipeline.write.related_memories`) is left out:
all earlier memories are candidates, and only those sharing a word are shown (served, a
memory found by its meaning alone may fill a place). The target is the gold facts whose
last kept source turn falls in the chunk, citing their turns by number, in the role's
schema, at most ``MAX_ENTRIES`` (the rest are counted: :attr:`WriterWindow.cut`):

- LoCoMo's ``observation`` facts (:func:`writer_examples`): ``replaces`` 0, no date (they
  carry none), their kind from their words (:func:`kind_of`); a file without observations
  gives no window. A chunk with none teaches "nothing worth keeping".
- ``tiermem bench updates``' statements (:func:`update_examples`), generated for other users
  than the benchmark's (:data:`UPDATE_FIRST_USER` on, another seed), only the chunks holding a
  statement, all of :data:`WRITER_FAMILIES` (the benchmark's other families and its
  corrections stay unseen): a change replaces the memory shown of the older statement, the
  turn or the fact written of it; where retrieval shows neither, nothing (the writer can only
  replace what it is shown).

A gold fact that the write path would drop as a copy (:func:`tiermem.slm.roles.writer.copy_of`)
is never taught. The memories shown hold the gold facts of earlier sessions, as if a perfect
writer had written them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from tiermem.bench.datasets.conversation import Conversation, Session, session_messages
from tiermem.bench.update_scenarios import Scenario
from tiermem.config import SLMConfig
from tiermem.lexical import content_stems
from tiermem.render import human_date
from tiermem.slm.prompts import writer
from tiermem.slm.roles.writer import CONTEXT_TURNS, copy_of, related_to, writer_input
from tiermem.smalltalk import split_small_talk
from tiermem.training.role_example import RoleExample, RoleMeta, shorten
from tiermem.types import Role, Turn

WINDOW_TURNS = SLMConfig().writer_max_turns
UPDATE_SEED = 1001  # bench updates runs seed 7
UPDATE_FIRST_USER = 100  # bench updates' users are 0-23: other names, dates and values
UPDATE_USERS = 24
WRITER_FAMILIES = ("home", "job", "diet", "dentist")
ENTRY_CHARS = 220  # WrittenEntry.text's max_length
_PLAN = re.compile(r"\b(plans?|planning|will|going to|intends?|hopes? to|wants? to)\b", re.I)
_PREFERENCE = re.compile(r"\b(loves?|likes?|enjoys?|prefers?|favou?rite|passionate)\b", re.I)


def kind_of(text: str) -> str:
    """A gold fact's kind for the writer's schema (LoCoMo's observations have none).

    >>> [kind_of(t) for t in ("Ana plans to visit Rome.", "Ana loves jazz.", "Ana has a cat.")]
    ['plan', 'preference', 'fact']
    """
    return "plan" if _PLAN.search(text) else "preference" if _PREFERENCE.search(text) else "fact"


@dataclass(frozen=True, slots=True)
class Gold:
    """A fact a perfect writer keeps, from the turns it names (and the older statement's turn
    it supersedes, if any)."""

    text: str
    kind: str
    turn_ids: tuple[str, ...]
    replaces: str | None = None


@dataclass(frozen=True, slots=True)
class _Memory:
    """An earlier turn or fact, as the store would show it to the writer."""

    text: str
    at: datetime
    turn_id: str
    verbatim: bool  # a stored turn, not a written fact
    stems: frozenset[str]

    @property
    def shown(self) -> str:
        return f"[{human_date(self.at)}] {self.text}"  # render_memory's form


def _memory(text: str, at: datetime, turn_id: str, *, verbatim: bool) -> _Memory:
    return _Memory(text, at, turn_id, verbatim, frozenset(content_stems(text)))


@dataclass(frozen=True, slots=True)
class WriterWindow:
    """One writer call: what it reads and the entries it should write."""

    chunk: tuple[Turn, ...]
    context: tuple[Turn, ...]
    shown: tuple[str, ...]  # the memories shown, rendered
    earlier: tuple[str, ...]  # what an entry may not copy: the context, the stored turns shown
    entries: tuple[dict[str, object], ...]
    cut: int  # gold facts past MAX_ENTRIES, not taught
    meta: RoleMeta
    shown_turns: tuple[str, ...] = ()  # the turn each memory shown comes from
    shown_texts: tuple[str, ...] = ()  # and its text, as stored
    changes: tuple[tuple[str, str], ...] = ()  # (new statement's turn, older one's): labelled

    def example(self) -> RoleExample:
        messages = writer.build_messages(writer_input(self.chunk, self.context, self.shown))
        target = json.dumps({"entries": list(self.entries)}, ensure_ascii=False)
        writer.WriterOutput.model_validate_json(target)  # the schema it serves with
        return RoleExample(tuple(messages), target, self.meta)


def _turns(session: Session, fallback: datetime, user: str) -> list[Turn]:
    """A session as ``add()`` stores it."""
    return [
        Turn(m["turn_id"], user, f"s{session.index}", Role.USER, m["speaker"], m["content"],
             m["timestamp"])
        for m in session_messages(session, fallback)
    ]  # fmt: skip


def _entries(
    found: Sequence[Gold], chunk: Sequence[Turn], earlier: Sequence[str], shown: Sequence[_Memory]
) -> list[dict[str, object]]:
    number = {t.turn_id: i for i, t in enumerate(chunk, 1)}
    out: list[dict[str, object]] = []
    for g in found:
        cited = sorted({number[i] for i in g.turn_ids if i in number})
        text = shorten(g.text, ENTRY_CHARS)
        if copy_of(text, [chunk[n - 1] for n in cited], chunk, earlier) is not None:
            continue  # served, the writer drops a copy: never teach one
        old = [i for i, m in enumerate(shown, 1) if g.replaces and m.turn_id == g.replaces]
        out.append({"text": text, "kind": g.kind, "turns": cited, "date": "",
                    "replaces": old[0] if old else 0})  # fmt: skip
    return out


def windows(
    sample: Conversation,
    gold: Sequence[Gold],
    where: tuple[int, str, str],
    *,
    only_with_gold: bool = False,
) -> list[WriterWindow]:
    """The writer's windows of ``sample`` with their ``gold`` facts; ``where``: the file
    position, the split and the category (``observations`` or ``update``)."""
    position, split, category = where
    order = {t.turn_id: i for i, t in enumerate(t for s in sample.sessions for t in s.turns)}
    stored: list[_Memory] = []
    out: list[WriterWindow] = []
    fallback = next((s.date for s in sample.sessions if s.date), datetime(2000, 1, 1, tzinfo=UTC))
    for session in sample.sessions:
        turns = _turns(session, fallback, sample.sample_id)
        fallback = (session.date or fallback) + timedelta(days=1)
        kept = split_small_talk(turns, []).kept
        kept_ids = {t.turn_id for t in kept}
        home: dict[str, list[Gold]] = {}  # a fact is written with its last kept source turn
        for g in gold:
            sources = [i for i in g.turn_ids if i in kept_ids]
            if sources:
                home.setdefault(max(sources, key=order.__getitem__), []).append(g)
        speakers = {t.speaker for t in turns}
        newest_first = stored[::-1]
        written: list[_Memory] = []
        for start in range(0, len(kept), WINDOW_TURNS):
            chunk = kept[start : start + WINDOW_TURNS]
            context = kept[max(0, start - CONTEXT_TURNS) : start]
            shown = related_to(newest_first, lambda m: m.text, chunk, fill=False)
            stored_turns = [writer.split_label(m.text, speakers)[1] for m in shown if m.verbatim]
            found = [g for t in chunk for g in home.get(t.turn_id, [])]
            if only_with_gold and not found:
                continue
            earlier = (*(t.content for t in context), *stored_turns)
            entries = _entries(found, chunk, earlier, shown)
            cut, entries = max(0, len(entries) - writer.MAX_ENTRIES), entries[: writer.MAX_ENTRIES]
            for e in entries:  # a written fact is stored with the turn it comes from
                source = chunk[cast(list[int], e["turns"])[-1] - 1]
                written.append(_memory(str(e["text"]), source.timestamp, source.turn_id,
                                       verbatim=False))  # fmt: skip
            meta = RoleMeta(
                "writer", split, sample.sample_id, position, len(out), category,
                tuple(t.turn_id for t in chunk), writer.VERSION,
            )  # fmt: skip
            out.append(
                WriterWindow(
                    tuple(chunk),
                    tuple(context),
                    tuple(m.shown for m in shown),
                    earlier,
                    tuple(entries),
                    cut,
                    meta,
                    tuple(m.turn_id for m in shown),
                    tuple(m.text for m in shown),
                    tuple((g.turn_ids[-1], g.replaces) for g in found if g.replaces),
                )
            )
        # what the store holds after this add(): the verbatim turns and the entries written
        stored += [_memory(f"{t.speaker}: {t.content}", t.timestamp, t.turn_id, verbatim=True)
                   for t in kept]  # fmt: skip
        stored += written
    return out


def observation_windows(
    conversations: Sequence[Conversation], positions: Sequence[int], split: str
) -> list[WriterWindow]:
    """The windows of the conversations at ``positions`` of a file, with their gold
    observations (conversations without observations give none)."""
    out = []
    for position, sample in zip(positions, conversations, strict=True):
        gold = [Gold(o.text, kind_of(o.text), o.turn_ids) for o in sample.observations]
        if gold:
            out += windows(sample, gold, (position, split, "observations"))
    return out


def writer_examples(
    conversations: Sequence[Conversation], positions: Sequence[int], split: str
) -> list[RoleExample]:
    return [w.example() for w in observation_windows(conversations, positions, split)]


def update_windows(made: Sequence[Scenario], split: str) -> list[WriterWindow]:
    """Every family's statements, each window holding one: what ``bench writer --updates``
    scores a writer's supersedes on (the benchmark's own users)."""
    out = []
    for position, scenario in enumerate(made):
        gold = [Gold(f.text, f.kind, (f.turn_id,), f.replaces) for f in scenario.facts]
        where = (position, split, "update")
        out += windows(scenario.conversation, gold, where, only_with_gold=True)
    return out


def update_examples(made: Sequence[Scenario], split: str) -> list[RoleExample]:
    """The scenario chunks that hold a statement of :data:`WRITER_FAMILIES` and none of
    another family, with what the writer should keep of each."""
    out = []
    for position, scenario in enumerate(made):
        facts = [f for f in scenario.facts if f.family in WRITER_FAMILIES]
        unseen = {f.turn_id for f in scenario.facts if f.family not in WRITER_FAMILIES}
        gold = [Gold(f.text, f.kind, (f.turn_id,), f.replaces) for f in facts]
        found = windows(
            scenario.conversation, gold, (position, split, "update"), only_with_gold=True
        )
        out += [w.example() for w in found if not unseen & set(w.meta.evidence)]
    return out


__all__ = [
    "UPDATE_FIRST_USER",
    "UPDATE_SEED",
    "UPDATE_USERS",
    "WINDOW_TURNS",
    "WRITER_FAMILIES",
    "Gold",
    "WriterWindow",
    "kind_of",
    "observation_windows",
    "update_examples",
    "update_windows",
    "windows",
    "writer_examples",
]
