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
import importlib.util
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


EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "llamacpp": (
        ("llama_cpp",),
        "in-process GGUF models (llama.cpp): small-model roles, consolidation, nomic-embed",
    ),
    "service": (("fastapi", "uvicorn", "prometheus_client"), "tiermem serve, the REST service"),
    "mcp": (("mcp",), "tiermem mcp, the Model Context Protocol server"),
    "langgraph": (("langgraph",), "tiermem.integrations.langgraph.TiermemStore"),
    "train": (("transformers", "peft", "gguf"), "tiermem train: the LoRA and cross-encoder"),
    "bench": (("nltk", "matplotlib"), "tiermem bench: LoCoMo's F1 and the plots"),
}
"""Each extra: the modules it installs and what it enables (``tiermem doctor`` lists them)."""


def extra_installed(extra: str) -> bool:
    """Whether every module of ``extra`` can be imported (found, not imported)."""
    return all(importlib.util.find_spec(module) is not None for module in EXTRAS[extra][0])
