"""Sentence entries: a short turn of several sentences is indexed as its sentences too, and a
sentence's hit delivers its whole turn."""

from __future__ import annotations

from tiermem import Memory, MemoryKind
from tiermem.roles.extract import split_sentences

from tests.conftest import chat

SAID_IN_PASSING = (
    "I need new running socks for the winter, any brand you like. "
    "By the way, my sister Lena moved to Porto last week."
)


def test_a_fact_said_in_passing_gets_an_entry_of_its_own_on_its_turn(memory: Memory) -> None:
    result = memory.add(chat(("user", SAID_IN_PASSING)), user_id="ana")
    (turn,) = result.turns
    on_turn = [e for e in result.entries if e.kind is MemoryKind.TURN]
    assert [e.text for e in on_turn] == [
        f"Ana: {SAID_IN_PASSING}",
        "Ana: I need new running socks for the winter, any brand you like.",
        "Ana: By the way, my sister Lena moved to Porto last week.",
    ]
    assert {e.source_turn_ids for e in on_turn} == {(turn.turn_id,)}
    # adding the same message again proposes the same entries: nothing new
    again = memory.add(chat(("user", SAID_IN_PASSING)), user_id="ana")
    assert again.entries == ()
    assert len(memory.get_all("ana")) == 3


def test_a_sentences_hit_delivers_its_whole_turn_once(memory: Memory) -> None:
    memory.add(chat(("user", SAID_IN_PASSING), ("assistant", "Good to know.")), user_id="ana")
    ctx = memory.context("Where does my sister Lena live?", "ana", budget_tokens=300)
    user_turns = [line for line in ctx.text.splitlines() if line.startswith("Ana:")]
    assert user_turns == [f"Ana: {SAID_IN_PASSING}"]


def test_a_turn_of_one_real_sentence_gets_no_sentence_entries(memory: Memory) -> None:
    result = memory.add(chat(("user", "Yes! We moved to Porto last week.")), user_id="ana")
    assert [e.text for e in result.entries if e.kind is MemoryKind.TURN] == [
        "Ana: Yes! We moved to Porto last week."
    ]


def test_a_sentence_may_end_in_a_typographic_quote() -> None:
    # the plain cases are in tests/engine/test_bursty.py, which uses the same splitter
    assert split_sentences("Done. \u201cReally?\u201d Yes.") == [
        "Done.",
        "\u201cReally?\u201d",
        "Yes.",
    ]
