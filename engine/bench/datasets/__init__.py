"""Dataset loaders shared by the benchmarks and training.

Every loader returns the dataset-neutral types of :mod:`tiermem.bench.datasets.conversation`;
:func:`load_dataset` is the one entry point (LoCoMo format, which LongMemEval S is converted
to, is the one format read today). :mod:`tiermem.bench.datasets.splits` is the one split of a
file's conversations, and ``conversation_adds`` the one way a conversation is ingested.
"""

from __future__ import annotations

from pathlib import Path

from tiermem.bench import BenchInputError
from tiermem.bench.datasets.conversation import Conversation, Quirks


def load_dataset(path: Path) -> tuple[list[Conversation], Quirks]:
    """Every conversation of the file at ``path`` and the quirks met reading it; a file that
    is missing or not in a known format is a :class:`~tiermem.bench.BenchInputError`."""
    from tiermem.bench.datasets.locomo import load_locomo

    if not path.is_file():
        raise BenchInputError(f"no data file at {path}")
    try:
        return load_locomo(path)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # JSON and shape errors
        raise BenchInputError(
            f"{path} is not a LoCoMo-format JSON file ({type(exc).__name__}: {exc})"
        ) from exc


__all__ = ["load_dataset"]
