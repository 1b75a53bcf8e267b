"""Dependencies that come with an extra (``pip install 'tiermem[bench]'``), imported when a
command first needs one, with an error that says how to install it.

>>> extra_dependency("json", "bench", "this benchmark").__name__
'json'
>>> extra_dependency("no_such_module_here", "train", "training")  # doctest: +ELLIPSIS
Traceback (most recent call last):
tiermem.errors.ConfigError: training needs 'no_such_module_here', ...: pip install 'tiermem[train]'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tiermem.errors import ConfigError


def extra_dependency(module: str, extra: str, needed_by: str) -> ModuleType:
    """Import ``module``, a dependency of ``extra``, or raise ``ConfigError`` saying that
    ``needed_by`` needs it and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"{needed_by} needs {module.split('.')[0]!r}, from the {extra} extra: "
            f"pip install 'tiermem[{extra}]'"
        ) from exc
