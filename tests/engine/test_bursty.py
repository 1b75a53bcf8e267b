"""The bursty variant: each turn's sentences become consecutive messages of the same speaker,
and a question's evidence becomes every part of its gold turns."""

from __future__ import annotations

from datetime import UTC, datetime

from tiermem.bench.datasets.bursty import burst, split_sentences, split_turns
from tiermem.bench.datasets.conversation import (
    Conversation,
    DialogueTurn,
    Question,
    Session,
    session_messages,
)

TURNS = (
    DialogueTurn("D1:1", "Ana", "Guess what! I adopted a cat. She is called Tofu."),
    DialogueTurn("D1:2", "Ben", "Lovely, how old is she?"),
    DialogueTurn("D1:3", "Ana", "Two. Dr. Lee said so...  She's healthy!"),
)
CONVERSATION = Conversation(
    "c1",
    "Ana",
    "Ben",
    (Session(1, datetime(2024, 6, 3, 9, 5, tzinfo=UTC), TURNS),),
    (
        Question("What is the cat called?", "Tofu", ("D1:1",), "single-hop"),
        Question("How old?", "two", ("D1:2", "D1:3"), "multi-hop", "multi-session"),
        Question("Dog?", "", ("D9:9",), "adversarial"),
    ),
)


def test_every_sentence_is_a_message_of_the_same_speaker_in_order() -> None:
    (session,) = burst(CONVERSATION).sessions
    assert [(t.turn_id, t.speaker, t.text) for t in session.turns] == [
        ("D1:1.1", "Ana", "Guess what!"),
        ("D1:1.2", "Ana", "I adopted a cat."),
        ("D1:1.3", "Ana", "She is called Tofu."),
        ("D1:2", "Ben", "Lovely, how old is she?"),  # one sentence keeps its id
        ("D1:3.1", "Ana", "Two."),
        ("D1:3.2", "Ana", "Dr."),  # the simple splitter's known limit, accepted
        ("D1:3.3", "Ana", "Lee said so..."),
        ("D1:3.4", "Ana", "She's healthy!"),
    ]
    messages = session_messages(session, datetime(2000, 1, 1, tzinfo=UTC))
    assert [m["turn_id"] for m in messages] == [t.turn_id for t in session.turns]
    assert messages[1]["timestamp"] > messages[0]["timestamp"]  # consecutive messages
    assert split_turns(CONVERSATION) == 2


def test_evidence_maps_onto_every_part_of_the_gold_turns() -> None:
    cat, age, dog = burst(CONVERSATION).questions
    assert cat.evidence == ("D1:1.1", "D1:1.2", "D1:1.3")
    assert age.evidence == ("D1:2", "D1:3.1", "D1:3.2", "D1:3.3", "D1:3.4")
    assert dog.evidence == ("D9:9",)  # names no turn: left as it is
    assert (age.question, age.answer, age.group) == ("How old?", "two", "multi-session")
    parts = {t.turn_id for s in burst(CONVERSATION).sessions for t in s.turns}
    assert set(cat.evidence) | set(age.evidence) <= parts


def test_the_transform_is_deterministic_and_leaves_its_input_alone() -> None:
    assert burst(CONVERSATION) == burst(CONVERSATION)
    assert CONVERSATION.sessions[0].turns == TURNS
    assert burst(burst(CONVERSATION)) == burst(CONVERSATION)  # sentences do not split again


def test_text_without_a_sentence_break_stays_whole() -> None:
    assert split_sentences("version 1.2.3 is out, see e.g.this") == [
        "version 1.2.3 is out, see e.g.this"
    ]
    assert split_sentences('He said "stop." Then left.') == ['He said "stop."', "Then left."]
    assert split_sentences("   ") == ["   "]
