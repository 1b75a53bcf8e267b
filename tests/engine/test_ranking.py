"""Fusion and budget arithmetic, and the hybrid first stage that uses them."""

from __future__ import annotations

import pytest
from tiermem import Memory
from tiermem.ranking import reciprocal_rank_fusion, split_budget

from tests.conftest import chat


def test_rrf_scores_and_explains_ranks() -> None:
    fused = reciprocal_rank_fusion({"dense": ["a", "b", "c"], "bm25": ["c", "a"]}, k=60)
    assert [f.key for f in fused] == ["a", "c", "b"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 62)
    assert dict(fused[1].ranks) == {"dense": 3, "bm25": 1}


def test_rrf_weights_and_duplicate_keys() -> None:
    fused = reciprocal_rank_fusion(
        {"q0": ["x", "y"], "q1": ["y", "y", "z"]}, weights={"q0": 3.0, "q1": 1.0}
    )
    assert [f.key for f in fused] == ["y", "x", "z"]
    assert fused[0].score == pytest.approx(3 / 62 + 1 / 61)  # "y" counted once in q1
    assert dict(fused[2].ranks) == {"q1": 3}


@pytest.mark.parametrize(
    ("total", "weights", "expected"),
    [
        (10, [1, 1], [5, 5]),
        (10, [1, 1, 1], [4, 3, 3]),
        (5, [2, 1, 1], [3, 1, 1]),
        (4, [10, 1, 1], [2, 1, 1]),
        (2, [1, 1, 1], [1, 1, 0]),
        (6, [1, 0], [6, 0]),
        (0, [1, 2], [0, 0]),
        (7, [0, 0], [0, 0]),
    ],
)
def test_split_budget(total: int, weights: list[float], expected: list[int]) -> None:
    shares = split_budget(total, weights)
    assert shares == expected
    assert sum(shares) == (total if any(weights) else 0)


def test_split_budget_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        split_budget(3, [1, -1])


def test_lexical_match_is_found_when_dense_alone_would_miss_it(memory: Memory) -> None:
    """BM25 finds an exact rare token (a flight number) among many lexically similar turns."""
    filler = [
        ("user", f"I talked about flights and trips with my friend number {i}.") for i in range(30)
    ]
    memory.add(chat(*filler, ("user", "My booking reference is QX7TZ9.")), user_id="ana")
    hits = memory.search("QX7TZ9", "ana", k=3)
    assert "QX7TZ9" in hits[0].entry.text
    assert hits[0].explanation.components["bm25"] > 0
    assert "rrf" in hits[0].explanation.components


def test_stop_words_do_not_outvote_the_meaning(memory: Memory) -> None:
    """Without stop-word removal BM25 scores "My brother works as a pilot." for "What is my
    dog's name?" (it shares "my"), and rank fusion can let that beat the dense match."""
    memory.add(
        chat(
            ("user", "I adopted a greyhound called Comet."),
            ("user", "My brother works as a pilot."),
        ),
        user_id="ana",
    )
    hits = memory.search("What is my dog's name?", "ana", k=2)
    pilot = next(h for h in hits if "pilot" in h.entry.text)
    assert "bm25" not in pilot.explanation.components  # only "dog name" went to BM25


def test_a_first_person_question_weighs_the_askers_own_words(memory: Memory) -> None:
    """ "have I ... my" goes to BM25 beside the content words: the asker's own statement
    outscores an answer about the same sneakers that repeats their words (``search_terms``);
    an entry sharing only "I" / "have" is no BM25 hit at all (``on_topic``)."""
    filler = [("user", f"I have a question about item {i}, can you help me?") for i in range(20)]
    memory.add(
        chat(
            ("user", "I have worn my black sneakers twice since I bought them."),
            (
                "assistant",
                "Black sneakers are worn everywhere: black sneakers worn with jeans, "
                "and worn sneakers need a wash.",
            ),
            *filler,
        ),
        user_id="ana",
    )
    hits = memory.search("How many times have I worn my black sneakers?", "ana", k=40)
    turns = [h for h in hits if len(h.source_turn_ids) == 1]  # not the exchanges

    def bm25(word: str) -> float:
        return next(h for h in turns if word in h.entry.text).explanation.components["bm25"]

    assert bm25("twice") > bm25("jeans")
    off_topic = [h for h in turns if "item" in h.entry.text]
    assert off_topic
    assert all("bm25" not in h.explanation.components for h in off_topic)


def test_a_query_of_stop_words_only_runs_dense_alone(memory: Memory) -> None:
    memory.add(chat(("user", "I adopted a greyhound called Comet.")), user_id="ana")
    hits = memory.search("what is it?", "ana", k=1)
    assert hits
    assert "bm25" not in hits[0].explanation.components
