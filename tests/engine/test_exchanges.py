"""Exchange entries: a turn and the reply to it, indexed beside the single turns."""

from __future__ import annotations

from datetime import timedelta

from tiermem import AuditOp, Memory, MemoryKind
from tiermem.roles.extract import exchange_candidates
from tiermem.validation import normalize_messages

from tests.conftest import T0, chat


def test_each_burst_pairs_with_the_burst_that_answers_it(memory: Memory) -> None:
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
    # The assistant's two messages are one burst: it pairs with the question before it and
    # with the question after it; each message keeps its own entry too.
    assert [e.source_turn_ids for e in exchanges] == [tuple(turns[:3]), tuple(turns[1:])]
    assert exchanges[0].text == (
        "Ana: Where did you travel in May?\nAssistant: To Lisbon, for the jazz festival.\n"
        "Assistant: The trams there are yellow."
    )
    assert [e.kind for e in result.entries].count(MemoryKind.TURN) == 4


def test_an_exchange_forms_when_messages_come_one_add_at_a_time(memory: Memory) -> None:
    said = chat(
        ("user", "Which colour should the new sofa be?"),
        ("assistant", "The blue one!"),
        ("assistant", "It matches the rug in the hall."),
    )
    first = memory.add(said[0], "ana", "s1")
    assert [e.kind for e in first.entries] == [MemoryKind.TURN]
    second = memory.add(said[1], "ana", "s1")
    pair = next(e for e in second.entries if e.kind is MemoryKind.EXCHANGE)
    assert pair.source_turn_ids == (first.turns[0].turn_id, second.turns[0].turn_id)
    # The answer goes on in a third message: the same exchange grows, it is not repeated.
    third = memory.add(said[2], "ana", "s1")
    assert [e.kind for e in third.entries] == [MemoryKind.TURN]
    assert [e.id for e in third.merged] == [pair.id]
    stored = memory.get(pair.id, "ana")
    assert stored.source_turn_ids == tuple(
        t.turn_id for t in (*first.turns, *second.turns, *third.turns)
    )
    assert stored.text.endswith("Assistant: It matches the rug in the hall.")
    assert [e.op for e in memory.history(pair.id, "ana")] == [AuditOp.ADD, AuditOp.MERGE]
    exchanges = [e for e in memory.get_all("ana") if e.kind is MemoryKind.EXCHANGE]
    assert [e.id for e in exchanges] == [pair.id]
    # Another session's messages are never paired with this one's.
    other = memory.add(chat(("assistant", "Noted, I will order it in blue.")), "ana", "s2")
    assert all(e.kind is MemoryKind.TURN for e in other.entries)


def test_a_short_answer_to_a_question_pairs_with_it(memory: Memory) -> None:
    said = chat(("user", "Did you pass the driving test?"), ("assistant", "Yes!"))
    result = memory.add(said, "ana")
    assert [e.kind for e in result.entries] == [MemoryKind.TURN, MemoryKind.EXCHANGE]


def test_an_exchange_takes_the_words_nearest_the_other_side() -> None:
    long_burst = [("assistant", f"part {i} " + "word " * 30) for i in range(5)]
    turns = normalize_messages(
        chat(("user", "What did the plumber say?"), *long_burst), "ana", "s1", T0
    ).turns
    (pair,) = exchange_candidates(turns, turns, side_words=60)
    # The question, then the answer's first 60 words: two whole messages and no more.
    assert pair.source_turn_ids == tuple(t.turn_id for t in turns[:3])
    question = "Ana: What did the plumber say?"
    assert len(pair.text.split()) <= 60 + len(question.split()) + 2


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


def test_a_deleted_exchange_does_not_come_back_when_its_answer_goes_on(memory: Memory) -> None:
    said = chat(
        ("user", "Where did you travel in May?"),
        ("assistant", "To Lisbon, for the jazz festival."),
        ("assistant", "The trams there are yellow."),
    )
    first = memory.add(said[:2], "ana", "s1")
    pair = next(e for e in first.entries if e.kind is MemoryKind.EXCHANGE)
    memory.delete(pair.id, "ana")
    # The user asked for this memory to be gone; a later message must not bring it back
    # (same id, the deleted words in it).
    memory.add(said[2], "ana", "s1")
    assert pair.id not in {e.id for e in memory.get_all("ana")}


def test_an_exchange_that_grows_keeps_the_users_correction(memory: Memory) -> None:
    said = chat(
        ("user", "Where did you travel in May?"),
        ("assistant", "To Lisbon, for the jazz festival."),
        ("assistant", "The trams there are yellow."),
    )
    first = memory.add(said[:2], "ana", "s1")
    pair = next(e for e in first.entries if e.kind is MemoryKind.EXCHANGE)
    memory.update(pair.id, "Ana travelled to Porto (not Lisbon) in May.", "ana")
    memory.add(said[2], "ana", "s1")
    # The user's update is not silently replaced by the regenerated exchange text.
    assert "Porto (not Lisbon)" in memory.get(pair.id, "ana").text


def test_a_message_stamped_before_the_stored_ones_is_not_taken_as_their_answer(
    memory: Memory,
) -> None:
    later = chat(
        ("user", "Where did you travel in May?"),
        ("assistant", "To Lisbon, for the jazz festival."),
        start=T0 + timedelta(days=1),
    )
    memory.add(later, "ana", "s1")
    # An importer back-fills a message said a day earlier, in the same session.
    earlier = memory.add(chat(("user", "My sister Carla moves to Berlin in spring.")), "ana", "s1")
    stored = memory.components.journal.session_tail("ana", "s1", 100)
    when = {t.turn_id: t.timestamp for t in stored}
    for e in memory.get_all("ana"):
        if e.kind is MemoryKind.EXCHANGE:
            times = [when[t] for t in e.source_turn_ids]
            # an exchange reads in the order things were said
            assert times == sorted(times), e.text
    assert earlier.turns[0].timestamp < later[0]["timestamp"]  # type: ignore[operator]


def test_a_long_burst_answered_one_message_at_a_time_is_one_exchange(memory: Memory) -> None:
    items = "milk eggs flour butter sugar salt pepper rice beans lentils apples pears plums"
    items += " grapes lemons limes onions"
    said = chat(
        *[("user", f"shopping item {w}") for w in items.split()],  # 17 short messages
        ("assistant", "Got it, I will buy everything on the list tomorrow."),
        ("assistant", "The limes may be sold out at the market."),
    )
    for message in said:  # an agent adding each message as it comes
        memory.add(message, "ana", "s1")
    exchanges = [e for e in memory.get_all("ana") if e.kind is MemoryKind.EXCHANGE]
    # All in one add() this is one exchange; one at a time it must not fork into two
    # overlapping ones (the second keyed by another first turn).
    assert len(exchanges) == 1, [len(e.source_turn_ids) for e in exchanges]


def test_a_turn_found_again_in_its_exchange_takes_no_second_place(memory: Memory) -> None:
    """A turn is stored alone and in its exchange. Found twice, it took two of a search's
    ``k`` places: ``search(k=3)`` returned the exchange, its question and its answer, one
    memory three times over. Repeats now come after the other candidates."""
    memory.add(
        chat(
            ("user", "What is the name of your new dog?"),
            ("assistant", "Pixel, a rescued greyhound."),
        ),
        "ana",
        "s0",
    )
    for i, pet in enumerate(["parrot", "tortoise", "hamster", "beagle", "ferret"]):
        day = T0 + timedelta(days=i + 1)
        said = chat(("user", f"My neighbour's new {pet} has a name tag."), start=day)
        memory.add(said, "ana", f"s{i + 1}")
    hits = memory.search("new dog name greyhound", "ana", k=3)
    assert hits[0].entry.kind is MemoryKind.EXCHANGE
    assert len(hits) == 3
    found: set[str] = set()
    for hit in hits:
        assert not found.issuperset(hit.source_turn_ids)  # each adds turns of its own
        found.update(hit.source_turn_ids)
    assert len(memory.search("new dog name greyhound", "ana", k=8)) == 8  # all 8: repeats fill up
