"""Benchmarks: each prints tiermem's figure beside a baseline measured in the same run.

Benchmarks, their data sets, the demo's data and the judge prompt are not part of the core
library: their own dependencies (nltk, matplotlib) come with the ``bench`` extra,
``pip install 'tiermem[bench]'``. A plain ``pip install tiermem`` stays lean.
"""

from __future__ import annotations

from types import ModuleType

from tiermem.errors import InvalidInputError
from tiermem.extras import extra_dependency

SYSTEMS = ("tiermem", "naive-rag", "bm25", "hybrid", "full-context")
"""What ``tiermem bench locomo`` compares by default."""


class BenchInputError(InvalidInputError):
    """A benchmark argument that names nothing usable (a conversation, a system, a budget)."""


def bench_dependency(module: str) -> ModuleType:
    """Import a dependency of the ``bench`` extra, or say how to install it."""
    return extra_dependency(module, "bench", "this benchmark")
