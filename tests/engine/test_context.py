"""The context builder: what a generator reads, within a token budget, grouped by session."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from tiermem import Memory
from tiermem.config.tuning import Expansion
from tiermem.context import NEAR_DUPLICATE, ContextTurn, Unit, _Repeats, pack
from tiermem.errors import InvalidLimitError
from tiermem.pipeline.deliver import hit_units
from tiermem.policy import NO_EXPANSION
from tiermem.tokens import ApproxTokenCounter

from tests.conftest import T0, MemoryFactory, chat

DAY1 = datetime(2024, 6, 3, 9, tzinfo=UTC)
DAY2 = datetime(2024, 6, 20, 18, tzinfo=UTC)


def _turns() -> dict[str, ContextTurn]:
    rows = [
        ("s2", DAY2, ["Ben: The orchestra plays Mahler on Friday.", "Ana: Which symphony?"]),
        ("s1", DAY1, ["Ana: I adopted a cat.", "Ben: Name?", "Ana: Tofu.", "Ben: Cute!"]),
    ]
    out = {}
    for session, day, lines in rows:
        for i, line in enumerate(lines):
            speaker, text = line.split(": ", 1)
            tid = f"{session}:{i}"
            out[tid] = ContextTurn(tid, session, i, speaker, text, day + timedelta(minutes=i))
    return out


def test_turns_are_grouped_by_session_oldest_first_with_one_date_each() -> None:
    turns = _turns()
    units = [Unit(("s2:0",), 1.0), Unit(("s1:3",), 0.9), Unit(("s1:0", "s1:1"), 0.8)]
    ctx = pack(units, turns, 1000)
    assert ctx.text.splitlines() == [
        "[3 June 2024]",
        "Ana: I adopted a cat.",
        "Ben: Name?",
        "…",
        "Ben: Cute!",
        "[20 June 2024]",
        "Ben: The orchestra plays Mahler on Friday.",
    ]
    assert [s.turn_ids for s in ctx.snippets] == [("s1:0", "s1:1"), ("s1:3",), ("s2:0",)]
    assert ctx.turn_ids == ("s1:0", "s1:1", "s1:3", "s2:0")
    assert ctx.tokens == ApproxTokenCounter().count(ctx.text)


def test_a_turn_named_by_many_units_is_delivered_and_counted_once() -> None:
    turns = _turns()
    once = pack([Unit(("s1:2",), 1.0)], turns, 1000)
    thrice = pack([Unit(("s1:2",), 1.0), Unit(("s1:2",), 0.5), Unit(("s1:2",), 0.2)], turns, 1000)
    assert thrice.text == once.text
    assert thrice.tokens == once.tokens
    # A budget that holds it once takes it, though three units name it.
    assert pack([Unit(("s1:2",), 1.0)] * 3, turns, once.tokens).turn_ids == ("s1:2",)


def test_the_budget_is_a_ceiling_and_a_unit_too_big_is_passed_over() -> None:
    turns = _turns()
    small = pack([Unit(("s1:1",), 1.0)], turns, 1000).tokens
    big = Unit(("s2:0", "s2:1"), 1.0)
    ctx = pack([big, Unit(("s1:1",), 0.5)], turns, small)
    assert ctx.turn_ids == ("s1:1",)  # the smaller unit after it still fits
    assert ctx.tokens <= small
    assert pack([big], turns, 3).text == ""
    # A unit naming a turn nobody stored is not delivered, and nothing breaks.
    assert pack([Unit(("gone",), 1.0)], turns, 1000).turn_ids == ()


def test_a_hit_is_offered_alone_at_its_rank_not_with_the_turns_beside_it() -> None:
    turns = _turns()
    hits = _hits([("s1:1",), ("s2:1",)])
    units = hit_units(hits, turns, Expansion())
    assert [(u.turn_ids, round(u.value, 3)) for u in units] == [(("s1:1",), 1.0), (("s2:1",), 0.5)]


def test_a_piece_of_a_long_turn_is_worth_its_rank_and_falls_back_to_the_piece() -> None:
    from tiermem.types import MemoryEntry, MemoryKind, ScoreExplanation, SearchHit

    turns = _turns()
    # s2:0 made long enough to be indexed in pieces (more than 120 words)
    text = "The orchestra plays Mahler on Friday. " + "It is a long evening. " * 30
    turns["s2:0"] = replace(turns["s2:0"], text=text)
    long_answer = "Ben: The orchestra plays Mahler"  # what a piece of s2:0 would hold
    piece = MemoryEntry("p", "u", long_answer, MemoryKind.TURN, T0, T0, source_turn_ids=("s2:0",))
    hits = [SearchHit(piece, 1.0, ScoreExplanation({}, "")), *_hits([("s1:2",)])]
    plain = Expansion(member=0, later=0, long_tokens=0, long_share=0)
    units = hit_units(hits, turns, plain)
    # the whole turn at the piece's rank; the piece is delivered when the whole does not fit
    assert [(u.turn_ids, u.value) for u in units] == [(("s2:0",), 1.0), (("s1:2",), 0.5)]
    fallback = units[0].fallback
    assert fallback is not None
    assert fallback.endswith(long_answer)
    counter = ApproxTokenCounter()
    room = counter.count(turns["s2:0"].line) // 2  # the piece fits, the whole turn does not
    assert long_answer.split(": ", 1)[1] in pack(units[:1], turns, room, counter).text
    whole_hit = replace(piece, text=turns["s2:0"].line)
    hits_whole = [SearchHit(whole_hit, 1.0, ScoreExplanation({}, "")), *_hits([("s1:2",)])]
    assert hit_units(hits_whole, turns, plain)[0].fallback is None  # the turn itself: no piece


def test_a_sentence_of_a_short_turn_stands_for_the_whole_turn() -> None:
    from tiermem.types import MemoryEntry, MemoryKind, ScoreExplanation, SearchHit

    turns = _turns()  # s2:0 is one short turn: its sentence is indexed beside it
    said = "Ben: The orchestra plays Mahler"
    sentence = MemoryEntry("p", "u", said, MemoryKind.TURN, T0, T0, source_turn_ids=("s2:0",))
    hits = [SearchHit(sentence, 1.0, ScoreExplanation({}, "")), *_hits([("s1:2",)])]
    units = hit_units(hits, turns, Expansion(member=0))
    # worth its rank, no fallback line: the whole turn costs little more than the sentence
    assert [(u.turn_ids, u.value, u.fallback) for u in units] == [
        (("s2:0",), 1.0, None),
        (("s1:2",), 0.5, None),
    ]


def _answered(
    question: str, repeats: int, *others: ContextTurn
) -> tuple[dict[str, ContextTurn], ApproxTokenCounter, dict[str, int]]:
    """A user's short turn ``a:0``, the assistant's answer ``a:1`` (a sentence said
    ``repeats`` times), ``others``, and each turn's tokens."""
    answer = " ".join(["Here is a long list of suggestions with many words."] * repeats)
    turns = {
        "a:0": ContextTurn("a:0", "a", 0, "User", question, DAY1),
        "a:1": ContextTurn("a:1", "a", 1, "Assistant", answer, DAY1),
        **{t.turn_id: t for t in others},
    }
    counter = ApproxTokenCounter()
    return turns, counter, {t: counter.count(turn.line) for t, turn in turns.items()}


def test_a_long_hit_is_worth_less_than_a_short_one_when_lengths_count() -> None:
    # An assistant's long answer ranked first, a user's short turn second: a budget that
    # holds the long answer, but not the short turn as well.
    turns, counter, tokens = _answered(
        "I keep my sneakers under the bed.",
        30,
        ContextTurn("b:0", "b", 0, "User", "I moved them to the closet.", DAY2),
    )
    assert tokens["a:1"] > 200 > 20 > tokens["b:0"]
    hits = _hits([("a:1",), ("b:0",)])
    budget = pack([Unit(("a:1",), 1.0)], turns, 10**6, counter).tokens

    def valued(expansion: Expansion) -> dict[tuple[str, ...], float]:
        units = hit_units(hits, turns, expansion, tokens=lambda t: tokens[t.turn_id])
        return {u.turn_ids: u.value for u in units}

    def delivered(expansion: Expansion) -> tuple[str, ...]:
        units = hit_units(hits, turns, expansion, tokens=lambda t: tokens[t.turn_id])
        return pack(units, turns, budget, counter).turn_ids

    plain = Expansion(later=0, long_tokens=0, long_share=0)
    # by rank alone the long answer is packed first and takes the budget
    assert valued(plain)[("a:1",)] == pytest.approx(1.0)
    assert delivered(plain) == ("a:1",)
    # past long_tokens it keeps long_tokens / its tokens of its worth: the short hit first
    discounted = valued(plain.model_copy(update={"long_tokens": 100}))
    assert discounted[("a:1",)] == pytest.approx(100 / tokens["a:1"])
    assert discounted[("b:0",)] == pytest.approx(0.5)  # a short hit keeps its worth
    assert delivered(plain.model_copy(update={"long_tokens": 100}))[0] == "b:0"
    # a reference above every length changes nothing
    assert valued(plain.model_copy(update={"long_tokens": 10**4})) == valued(plain)


def test_at_a_small_budget_a_unit_past_a_quarter_of_it_goes_after_short_hits() -> None:
    # LongMemEval-S at 300 tokens: the first hit, an assistant's answer of some 250 tokens
    # (under long_tokens), took the room of the user's short turns ranked next, the evidence.
    said = "On the way back I drove for six hours straight and stopped twice for coffee."
    turns, counter, tokens = _answered(
        "Can you help me plan the route for my next road trip?",
        20,
        ContextTurn("b:0", "b", 0, "User", said, DAY1),
        ContextTurn("c:0", "c", 0, "User", said.replace("six", "five"), DAY2),
    )
    assert 200 < tokens["a:1"] < 400
    assert tokens["b:0"] > 15
    hits = _hits([("a:1",), ("b:0",), ("c:0",)])

    def units(expansion: Expansion, budget: int) -> list[Unit]:
        return hit_units(
            hits, turns, expansion, tokens=lambda t: tokens[t.turn_id], budget_tokens=budget
        )

    def delivered(expansion: Expansion, budget: int) -> tuple[str, ...]:
        return pack(units(expansion, budget), turns, budget, counter).turn_ids

    assert Expansion().long_reference(300) == 75
    assert Expansion(long_tokens=0).long_reference(300) == 75  # 0 drops one limit
    assert Expansion().long_reference(None) == 200  # no budget: long_tokens alone
    assert NO_EXPANSION.long_reference(300) == 0  # expand=False: no length rule
    assert {"b:0", "c:0"} <= set(delivered(Expansion(), 300))
    assert "a:1" not in delivered(Expansion(), 300)
    # without the share the long first hit is packed first and leaves room for one more
    assert "c:0" not in delivered(Expansion().model_copy(update={"long_share": 0}), 300)
    # at a budget over four times its length it keeps its whole worth: the best unit again
    # (this guards against discounting it there; it holds at any share over about 0.2)
    assert units(Expansion(), 1200)[0].turn_ids == ("a:1",)


def test_an_edited_turn_entry_is_not_a_piece_of_its_turn() -> None:
    from tiermem.types import MemoryEntry, MemoryKind, ScoreExplanation, SearchHit

    turns = _turns()
    plain = Expansion(member=0)
    # ``update`` gave the entry new words: it is the turn's memory, with no piece to fall back on
    edited = "Ben: The orchestra plays Bruckner on Friday."
    entry = MemoryEntry("e", "u", edited, MemoryKind.TURN, T0, T0, source_turn_ids=("s2:0",))
    hits = [SearchHit(entry, 1.0, ScoreExplanation({}, "")), *_hits([("s1:2",)])]
    units = hit_units(hits, turns, plain)
    assert [(u.turn_ids, u.value, u.fallback) for u in units] == [
        (("s2:0",), 1.0, None),
        (("s1:2",), 0.5, None),
    ]


def _burst_turns() -> dict[str, ContextTurn]:
    said = [
        ("Ana", "Which colour did you pick for the sofa?"),
        ("Ben", "the blue one!"),
        ("Ben", "it matches the rug"),
        ("Ben", "and the curtains"),
        ("Ana", "Lovely."),
    ]
    return {
        f"b{i}": ContextTurn(f"b{i}", "s3", i, who, text, DAY2 + timedelta(minutes=i))
        for i, (who, text) in enumerate(said)
    }


def test_an_exchange_too_long_for_the_budget_still_delivers_its_turns() -> None:
    turns = _burst_turns()
    long_answer = replace(turns["b1"], text="the blue one " * 60)
    turns = {**turns, "b1": long_answer}
    units = hit_units(_hits([("b0", "b1")]), turns, Expansion(member=0.9))
    assert [u.turn_ids for u in units] == [("b0", "b1"), ("b0",), ("b1",)]
    ctx = pack(units, turns, 40)
    assert ctx.turn_ids == ("b0",)  # the question fits; the exchange and its answer do not
    assert pack(units, turns, 1000).turn_ids == ("b0", "b1")


def _hits(turn_sets: list[tuple[str, ...]]) -> list:  # type: ignore[type-arg]
    from tiermem.types import MemoryEntry, MemoryKind, ScoreExplanation, SearchHit

    lines = {t.turn_id: t.line for t in (*_turns().values(), *_burst_turns().values())}
    return [  # a hit of one turn holds the turn's own line (a piece of it holds less)
        SearchHit(
            MemoryEntry(
                f"m{i}", "u", lines.get(ids[0], "x"), MemoryKind.TURN, T0, T0, source_turn_ids=ids
            ),
            1.0 / (i + 1),
            ScoreExplanation({}, ""),
        )
        for i, ids in enumerate(turn_sets)
    ]


def _ingest(memory: Memory) -> None:
    memory.add(
        chat(
            ("user", "Where should I take Maya for her birthday dinner?"),
            ("assistant", "Try Casa Alfama, the fado place near the river."),
            ("user", "My brother Leo repairs old bicycles in his garage."),
        ),
        "ana",
        "s1",
    )
    later = T0 + timedelta(days=30)
    memory.add(chat(("user", "I booked a violin lesson."), start=later), "ana", "s2")


def test_context_delivers_the_answer_to_the_matching_turn_through_its_exchange(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory()
    _ingest(memory)
    query = "Maya birthday dinner"
    ctx = memory.context(query, "ana", budget_tokens=400, k=2)
    # the question alone, then the exchange it opens (question and answer, one entry): the
    # answer is delivered next to its question, in one snippet
    assert [len(h.entry.source_turn_ids) for h in ctx.hits] == [1, 2]
    assert "Casa Alfama" in ctx.text
    assert len(ctx.snippets) == 1
    assert ctx.text.splitlines()[0] == "[2 March 2026]"
    assert ctx.tokens <= 400
    alone = memory.context(query, "ana", budget_tokens=400, k=1)
    assert "Casa Alfama" not in alone.text  # no turn beside a hit is offered on its own
    assert [h.entry.source_turn_ids for h in alone.hits] == [(alone.turn_ids[0],)]


def test_context_respects_small_budgets_and_refuses_bad_ones(make_memory: MemoryFactory) -> None:
    memory = make_memory()
    _ingest(memory)
    big = memory.context("Leo bicycles violin Maya", "ana", budget_tokens=2000, expand=False)
    assert len(big.turn_ids) == 4
    assert big.text.count("[") == 2  # two sessions, one date header each
    small = memory.context("Leo bicycles violin Maya", "ana", budget_tokens=20)
    assert 0 < small.tokens <= 20
    assert len(small.turn_ids) < 4
    for bad in (0, -5, 1.5, True):
        with pytest.raises(InvalidLimitError):
            memory.context("Leo", "ana", budget_tokens=bad)  # type: ignore[arg-type]


def test_answer_reads_the_built_context(make_memory: MemoryFactory) -> None:
    memory = make_memory()
    _ingest(memory)
    answer = memory.answer("Maya birthday dinner", "ana")
    context = memory.context("Maya birthday dinner", "ana", k=memory.config.generator.max_memories)
    assert answer.text == "From memory (oldest first; the latest statement holds):\n" + context.text
    assert answer.context_tokens == context.tokens
    assert set(answer.source_turns) == set(context.turn_ids)


def test_only_the_hits_delivered_count_as_accessed(make_memory: MemoryFactory) -> None:
    memory = make_memory()
    _ingest(memory)
    small = memory.context("Leo bicycles violin Maya", "ana", budget_tokens=20, k=3, expand=False)
    assert len(small.hits) == len(small.turn_ids) == 1
    counts = {e.source_turn_ids[0]: e.access_count for e in memory.get_all("ana")}
    assert counts[small.turn_ids[0]] == 1
    assert sum(counts.values()) == 1  # the two hits that did not fit were not used


def test_a_turn_that_repeats_one_delivered_is_passed_over() -> None:
    turns = _turns()
    said_again = ContextTurn(
        "s2:9", "s2", 9, "Ana", "I adopted a cat!", DAY2 + timedelta(minutes=9)
    )
    other = ContextTurn("s2:7", "s2", 7, "Ana", "I adopted a dog.", DAY2 + timedelta(minutes=7))
    turns = {**turns, "s1:0": replace(turns["s1:0"], text="I adopted a cat."), "s2:9": said_again}
    turns["s2:7"] = other
    units = [Unit(("s1:0",), 1.0), Unit(("s2:9",), 0.9), Unit(("s2:7",), 0.8)]
    ctx = pack(units, turns, 1000)
    assert ctx.turn_ids == ("s1:0", "s2:7")  # the same words said again are not delivered
    # Short turns are never called repeats ("ok", "Name?"), nor is a unit with new content.
    assert pack([Unit(("s1:1",), 1.0), Unit(("s1:1", "s1:2"), 0.5)], turns, 1000).turn_ids == (
        "s1:1",
        "s1:2",
    )


def test_a_repeat_is_a_word_set_jaccard_of_at_least_nine_tenths() -> None:
    """At the boundary (9 words of 10 shared) a turn repeats; at 8 of 10 it does not; and on
    random word sets the check is Jaccard's definition, however far apart their sizes."""
    words = [f"w{i}" for i in range(12)]
    delivered = ContextTurn("a", "s", 0, "Ana", " ".join(words[:10]), DAY1)

    def passed_over(text: str) -> bool:
        turns = {"a": delivered, "b": ContextTurn("b", "s", 1, "Ana", text, DAY1)}
        return pack([Unit(("a",), 1.0), Unit(("b",), 0.5)], turns, 1000).turn_ids == ("a",)

    assert passed_over(" ".join(words[:9]))  # 9 / 10
    assert passed_over(" ".join(words[:10] + words[10:11]))  # 10 / 11 > 0.9
    assert not passed_over(" ".join(words[:8]))  # 8 / 10
    assert not passed_over(" ".join(words[:9] + words[10:11]))  # 9 / 11
    rng = random.Random(7)
    vocabulary = [f"v{i}" for i in range(14)]
    for _ in range(300):
        seen = frozenset(rng.sample(vocabulary, rng.randint(4, 14)))
        new = frozenset(rng.sample(vocabulary, rng.randint(4, 14)))
        repeats = _Repeats({})
        repeats._seen["x"] = seen
        jaccard = len(seen & new) / len(seen | new)
        assert repeats._repeats(new) == (jaccard >= NEAR_DUPLICATE - 1e-12), (seen, new)


def test_a_turn_found_again_takes_no_second_rank() -> None:
    turns = _turns()
    # the turn alone, then the exchange holding it, then another find
    hits = _hits([("s1:1",), ("s1:0", "s1:1"), ("s2:0",)])
    plain = Expansion(member=0, distinct=False)
    assert [(u.turn_ids, round(u.value, 2)) for u in hit_units(hits, turns, plain)][-1] == (
        ("s2:0",),
        0.33,
    )
    distinct = plain.model_copy(update={"distinct": True})
    # the exchange adds a turn (s1:0): it keeps its rank; a hit adding nothing takes none
    again = _hits([("s1:1",), ("s1:1",), ("s2:0",)])
    assert [(u.turn_ids, round(u.value, 2)) for u in hit_units(again, turns, distinct)] == [
        (("s1:1",), 1.0),
        (("s2:0",), 0.5),
    ]
