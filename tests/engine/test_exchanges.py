"""Exchange entries: a turn and the reply to it, indexed beside the single turns."""

from __future__ import annotations

from tiermem import Memory, MemoryKind

from tests.conftest import chat


def test_each_reply_pairs_with_the_turn_it_answers(memory: Memory) -> None:
    result = memory.add(
        chat(
            ("user", "Where did you travel in May?"),
            ("assistant", "To Lisbon, for the jazz festival."),
            ("assistant", "The trams there are yellow."),
            ("user", "Which hotel did you stay in?"),
        ),
        user_id="ana",
    )
    turns = [t.turn_id for t in result.turns]
    exchanges = [e for e in result.entries if e.kind is MemoryKind.EXCHANGE]
    # Two turns by one speaker in a row are no exchange; each turn keeps its own entry.
    assert [e.source_turn_ids for e in exchanges] == [(turns[0], turns[1]), (turns[2], turns[3])]
    assert exchanges[0].text == (
        "Ana: Where did you travel in May?\nAssistant: To Lisbon, for the jazz festival."
    )
    assert [e.kind for e in result.entries].count(MemoryKind.TURN) == 4


def test_small_talk_breaks_an_exchange(memory: Memory) -> None:
    result = memory.add(
        chat(("user", "I adopted a greyhound called Pixel."), ("assistant", "Thanks!")),
        user_id="ana",
    )
    assert [e.kind for e in result.entries] == [MemoryKind.TURN]


def test_a_question_answered_in_the_reply_delivers_both_turns(memory: Memory) -> None:
    memory.add(
        chat(
            ("user", "What is the name of your new dog?"),
            ("assistant", "Pixel, a rescued greyhound."),
        ),
        user_id="ana",
    )
    for i in range(12):  # unrelated turns, each about one word of the question
        memory.add(chat(("user", f"My neighbour's cat number {i} has a new name tag.")), "ana")
    top = memory.search("new dog name greyhound", "ana", k=1)[0]
    assert top.entry.kind is MemoryKind.EXCHANGE
    ctx = memory.context("new dog name greyhound", "ana", budget_tokens=60)
    assert "Pixel, a rescued greyhound." in ctx.text
    assert "What is the name of your new dog?" in ctx.text


def test_deleting_an_exchange_keeps_its_turns(memory: Memory) -> None:
    result = memory.add(chat(("user", "I sing in a choir."), ("assistant", "Which one?")), "ana")
    pair = next(e for e in result.entries if e.kind is MemoryKind.EXCHANGE)
    memory.delete(pair.id, "ana")
    left = memory.get_all("ana")
    assert sorted(e.text for e in left) == ["Ana: I sing in a choir.", "Assistant: Which one?"]
