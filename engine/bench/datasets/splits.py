"""The one split of a data file's conversations, for the benchmarks and training alike.

A conversation's fold is fixed by its position in the file modulo ten, never by what it holds,
so every file splits the same way (LoCoMo's ten as 0-6, 7, 8-9; LongMemEval-S's 119
interleaved: 84 train, 12 tune, 23 test) and a held-out conversation never reaches a training
set. Each ``--split`` flag names one or more folds, in one vocabulary:

=============  =======  ========================  ========================================
position % 10  fold     ``bench locomo --split``  ``train dataset``, ``bench selector``
=============  =======  ========================  ========================================
0-6            train    ``choose``                ``train``
7              tune     ``report``                ``tune``
8-9            test     ``report``                ``test``
=============  =======  ========================  ========================================

The read path's settings are chosen on ``choose`` and reported on ``report``; a trained
selector learns on ``train``, is calibrated on ``tune`` and reported on ``test``; ``all`` is
every conversation. Every name works wherever a split is taken (the CLI offers each command's
own).

>>> [fold_of(i) for i in (0, 6, 7, 8, 9, 10, 17, 118)]
['train', 'train', 'tune', 'test', 'test', 'train', 'tune', 'test']
>>> SPLITS["report"], in_split(7, "report"), in_split(7, "choose")
(('tune', 'test'), True, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar

from tiermem.bench import BenchInputError

Fold = Literal["train", "tune", "test"]
_T = TypeVar("_T")

# position in the file modulo ten -> fold
FOLDS: dict[Fold, tuple[int, ...]] = {"train": tuple(range(7)), "tune": (7,), "test": (8, 9)}
# every name a --split takes -> the folds it joins
SPLITS: dict[str, tuple[Fold, ...]] = {
    "train": ("train",),
    "tune": ("tune",),
    "test": ("test",),
    "choose": ("train",),
    "report": ("tune", "test"),
    "all": ("train", "tune", "test"),
}


def fold_of(position: int) -> Fold:
    """The fold of the conversation at ``position`` (0-based) in its file."""
    return next(fold for fold, rests in FOLDS.items() if position % 10 in rests)


def check_split(split: str) -> tuple[Fold, ...]:
    """The folds ``split`` names; an unknown name is a ``BenchInputError``."""
    if split not in SPLITS:
        raise BenchInputError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    return SPLITS[split]


def in_split(position: int, split: str) -> bool:
    """Whether the conversation at ``position`` belongs to ``split``."""
    return fold_of(position) in check_split(split)


def split_items(items: Sequence[_T], split: str) -> list[tuple[int, _T]]:
    """``(position, item)`` of the file's items (conversations) in ``split``, in file order;
    a split the file has no conversation of is a ``BenchInputError``.

    >>> split_items("abcdefghijkl", "tune")
    [(7, 'h')]
    """
    chosen = [(i, item) for i, item in enumerate(items) if in_split(i, split)]
    if not chosen:
        rests = sorted(r for fold in check_split(split) for r in FOLDS[fold])
        raise BenchInputError(
            f"split {split!r} takes the conversations at positions {rests[0]}-{rests[-1]} "
            f"modulo 10, the file has {len(items)}"
        )
    return chosen


__all__ = ["FOLDS", "SPLITS", "Fold", "check_split", "fold_of", "in_split", "split_items"]
