"""What BM25 matches of a question: content words, and a first-person question's own words."""

from __future__ import annotations

import pytest
from tiermem.lexical import lexical_query, search_terms


@pytest.mark.parametrize(
    ("question", "terms"),
    [
        ("What did Caroline adopt?", "Caroline adopt"),  # third person: content words only
        ("How often do I play tennis?", "often do I play tennis"),
        ("Where did my sister move?", "did my sister move"),
        ("What was I'm told?", "was I'm told"),
        ("Can you remind me what you recommended?", "remind me recommended"),
        ("What is the capital of France?", "capital France"),
        ("Where did I’m told my sister’s car is?", "did I'm told my sister car is"),
        ("Who am I?", ""),  # no content word: nothing for BM25 to find
        ("", ""),
    ],
)
def test_a_first_person_question_keeps_its_pronouns_and_auxiliaries(
    question: str, terms: str
) -> None:
    assert search_terms(question) == terms


def test_third_person_questions_are_searched_as_before() -> None:
    for q in ("What did Melanie paint?", "When is John's flight?", "Who won?"):
        assert search_terms(q) == lexical_query(q)
