"""Fusion and budget arithmetic, and the hybrid first stage that uses them."""

from __future__ import annotations

import pytest
from tiermem import Memory
from tiermem.ranking import (
    fuse_relevance,
    keep_adaptive,
    rank_scale,
    reciprocal_rank_fusion,
    safe_relevance_weight,
    scaled,
    split_budget,
)

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


def test_rank_scale_spreads_crowded_scores_and_keeps_their_order() -> None:
    crowded = [0.61, 0.58, 0.64, 0.58, 0.60]  # a weak model: all within 0.06
    places = rank_scale(crowded)
    assert places == [0.75, 0.125, 1.0, 0.125, 0.5]  # the two 0.58s share their mean place
    assert sorted(range(5), key=lambda i: -places[i]) == sorted(range(5), key=lambda i: -crowded[i])
    assert scaled(crowded, "probability") == crowded
    assert rank_scale([]) == []
    with pytest.raises(ValueError, match="unknown scale"):
        scaled(crowded, "softmax")


@pytest.mark.parametrize(("k", "multiplier"), [(1, 2), (3, 2), (10, 2), (4, 3), (5, 4)])
def test_under_the_rank_scale_an_inverted_model_still_keeps_the_first_stage_top(
    k: int, multiplier: int
) -> None:
    """The safe weight bound holds for places as it does for probabilities: the model puts the
    first-stage top last and the rest in any order, and the top stays in the best k."""
    import random

    pool = k * multiplier
    for seed in range(20):
        rest = [random.Random(seed * 100 + i).random() for i in range(pool - 1)]
        places = rank_scale([-1.0, *rest])  # the top is the model's last
        fused = fuse_relevance(places, safe_relevance_weight(pool, k))
        assert 0 in keep_adaptive(fused, k, threshold=0.0)


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
