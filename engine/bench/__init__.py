"""Benchmarks: each prints tiermem's figure beside a baseline measured in the same run.

Benchmarks, their data sets, the demo's data and the judge prompt are not part of the core
library: their own dependencies (nltk, matplotlib) come with the ``bench`` extra,
``pip install 'tiermem[bench]'``. A plain ``pip install tiermem`` stays lean.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tiermem.errors import ConfigError, InvalidInputError


class BenchInputError(InvalidInputError):
    """A benchmark argument that names nothing usable (a conversation, a system, a budget)."""


def bench_dependency(module: str) -> ModuleType:
    """Import a dependency of the ``bench`` extra, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"this benchmark needs {module.split('.')[0]!r}, from the bench extra: "
            "pip install 'tiermem[bench]'"
        ) from exc
