"""The bursty variant of a data set: every turn sent as its sentences, one message each.

Chat users often type a thought as several short messages in a row. The variant is made from
any conversation deterministically: each turn is split into its sentences
(:func:`split_sentences`) sent as consecutive messages by the same speaker; part ``i`` of turn
``D1:3`` is turn ``D1:3.i`` (a turn of one sentence keeps its id), and a question's evidence
becomes every part of its gold turns.

>>> from tiermem.bench.datasets.conversation import Conversation, DialogueTurn, Question, Session
>>> turns = (DialogueTurn("D1:1", "Ana", "Hi Ben! I adopted a cat. Her name is Tofu."),
...          DialogueTurn("D1:2", "Ben", "Lovely."))
>>> c = Conversation("c", "Ana", "Ben", (Session(1, None, turns),),
...                  (Question("Cat's name?", "Tofu", ("D1:1",), "single-hop"),))
>>> b = burst(c)
>>> [(t.turn_id, t.text) for t in b.sessions[0].turns]  # doctest: +NORMALIZE_WHITESPACE
[('D1:1.1', 'Hi Ben!'), ('D1:1.2', 'I adopted a cat.'), ('D1:1.3', 'Her name is Tofu.'),
 ('D1:2', 'Lovely.')]
>>> b.questions[0].evidence
('D1:1.1', 'D1:1.2', 'D1:1.3')
"""

from __future__ import annotations

from dataclasses import replace

from tiermem.bench.datasets.conversation import Conversation, DialogueTurn, Session
from tiermem.roles.extract import split_sentences


def burst_turn(turn: DialogueTurn) -> tuple[DialogueTurn, ...]:
    """``turn`` as its sentences, ids ``<id>.1``, ``<id>.2``, ...; one sentence: unchanged."""
    parts = split_sentences(turn.text)
    if len(parts) == 1:
        return (turn,)
    return tuple(
        DialogueTurn(f"{turn.turn_id}.{i}", turn.speaker, part)
        for i, part in enumerate(parts, start=1)
    )


def burst(conversation: Conversation) -> Conversation:
    """The bursty variant of ``conversation`` (see the module's doc)."""
    parts: dict[str, tuple[str, ...]] = {}
    sessions = []
    for session in conversation.sessions:
        turns: list[DialogueTurn] = []
        for turn in session.turns:
            split = burst_turn(turn)
            parts[turn.turn_id] = tuple(t.turn_id for t in split)
            turns.extend(split)
        sessions.append(Session(session.index, session.date, tuple(turns)))
    questions = tuple(
        replace(
            q,
            evidence=tuple(dict.fromkeys(p for e in q.evidence for p in parts.get(e, (e,)))),
        )
        for q in conversation.questions
    )
    return replace(conversation, sessions=tuple(sessions), questions=questions)


def split_turns(conversation: Conversation) -> int:
    """How many of ``conversation``'s turns the bursty variant splits."""
    return sum(len(burst_turn(t)) > 1 for s in conversation.sessions for t in s.turns)


__all__ = ["burst", "burst_turn", "split_sentences", "split_turns"]
