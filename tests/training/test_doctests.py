"""The docstring examples of tiermem.training run (the package-wide doctest test walks only the
engine's folder: setuptools maps training/ beside it, where pkgutil does not look)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest
import tiermem.training


def _modules() -> list[str]:
    found = pkgutil.walk_packages(tiermem.training.__path__, "tiermem.training.")
    return ["tiermem.training", *(m.name for m in found)]


def test_every_module_is_found() -> None:
    assert {"tiermem.training.dataset", "tiermem.training.lora"} <= set(_modules())


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name: str) -> None:
    failures, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0
