"""The pure planning of a batched scoring call: the prefix a query's prompts share, and the
rounds their remainders are decoded in. (The decoding itself runs on a real model:
``test_real_scoring.py``.)"""

from __future__ import annotations

import pytest
from tiermem.slm.llamacpp_batch import rounds, shared_prefix


def test_the_shared_prefix_leaves_every_prompt_a_token_of_its_own() -> None:
    assert shared_prefix([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9]]) == 2
    assert shared_prefix([[1, 2, 3], [1, 2, 3]]) == 2  # identical: the last token is run again
    assert shared_prefix([[1, 2, 3]]) == 2
    assert shared_prefix([[7], [8]]) == 0
    assert shared_prefix([]) == 0


def test_rounds_fill_the_context_and_the_sequences_in_order() -> None:
    assert rounds([3, 3, 3], capacity=10, sequences=5) == [range(0, 3)]
    assert rounds([4, 4, 4, 4], capacity=10, sequences=5) == [range(0, 2), range(2, 4)]
    assert rounds([1] * 7, capacity=100, sequences=3) == [range(0, 3), range(3, 6), range(6, 7)]
    assert rounds([10, 1], capacity=10, sequences=5) == [range(0, 1), range(1, 2)]
    assert rounds([], capacity=10, sequences=5) == []
    with pytest.raises(ValueError, match="exceed"):
        rounds([3, 11], capacity=10, sequences=5)
