"""Answer and retrieval metrics on cases with known values, including the official LoCoMo F1
behaviour (normalisation, stemming, multi-hop splitting, open-domain and adversarial rules)."""

from __future__ import annotations

import pytest
from tiermem.bench.metrics import (
    answer_f1,
    bleu1,
    evidence_recall,
    multi_answer_f1,
    normalize_answer,
    token_f1,
)


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("The cat, and the hat!", "cat hat"),
        ("7 May 2023", "7 may 2023"),
        ("An apple a day", "apple day"),
        ("  Mixed   CASE ", "mixed case"),
        ("band", "band"),
    ],
)
def test_normalisation(raw: str, normal: str) -> None:
    assert normalize_answer(raw) == normal


def test_exact_and_stemmed_matches_score_one() -> None:
    assert token_f1("7 May 2023", "7 May 2023") == 1.0
    assert token_f1("She was running marathons", "she was run marathon") == 1.0


def test_partial_overlap_f1() -> None:
    # prediction: lisbon, portug(al) -> 2 tokens; gold: lisbon -> 1 token; 1 shared
    assert token_f1("Lisbon, Portugal", "Lisbon") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert token_f1("Porto", "Lisbon") == 0.0
    assert token_f1("", "Lisbon") == 0.0


def test_multi_hop_answers_split_on_commas() -> None:
    assert multi_answer_f1("painting, pottery", "pottery, painting") == 1.0
    assert multi_answer_f1("painting", "pottery, painting") == 0.5
    assert answer_f1("painting", "pottery, painting", category="multi-hop") == 0.5
    # the same strings as single-hop: commas are dropped, one bag of tokens
    assert answer_f1("painting", "pottery, painting", category="single-hop") == pytest.approx(2 / 3)


def test_open_domain_answer_is_cut_at_semicolon() -> None:
    assert (
        answer_f1("psychology", "psychology; counseling certification", category="open-domain")
        == 1.0
    )


def test_adversarial_scores_abstention() -> None:
    assert answer_f1("No information available.", "Tofu", category="adversarial") == 1.0
    assert answer_f1("That was not mentioned.", "Tofu", category="adversarial") == 1.0
    assert answer_f1("Tofu", "Tofu", category="adversarial") == 0.0


def test_bleu1() -> None:
    assert bleu1("the cat sat", "cat sat") == 1.0  # articles dropped: identical
    assert bleu1("cat", "cat sat on mat") == pytest.approx(1.0 * 2.718281828 ** (1 - 4))
    assert bleu1("dog dog dog", "dog") == pytest.approx(1 / 3)
    assert bleu1("", "cat") == 0.0


def test_evidence_recall_counts_each_gold_turn_once() -> None:
    assert evidence_recall(["D1:1", "D1:1", "D2:3"], {"D1:1"}) == 0.5
    assert evidence_recall([], {"D1:1"}) == 0.0
