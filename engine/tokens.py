"""Token counting for budgets (STM window, context handed to the generator).

The default counter approximates a BPE tokenizer from words and punctuation; a generator with
its own tokenizer reports real counts through the same interface. Reports name the counter.
"""

from __future__ import annotations

import re
from typing import Protocol

_PIECE = re.compile(r"[A-Za-z]+|\d|[^\sA-Za-z\d]")


class TokenCounter(Protocol):
    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


class ApproxTokenCounter:
    """Words (long words count as several pieces), digits and punctuation marks.

    >>> ApproxTokenCounter().count("I moved to Porto on 3 May.")
    8
    """

    name = "approx-bpe-v1"

    def count(self, text: str) -> int:
        total = 0
        for piece in _PIECE.findall(text):
            total += 1 + (len(piece) - 1) // 8 if piece.isalpha() else 1
        return total
