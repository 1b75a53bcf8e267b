"""The base model a LoRA adapter is trained on, as a Hugging Face directory.

A base is named three ways: an alias of the model registry (``qwen0.5b``), a Hugging Face
directory (with ``config.json``), or a GGUF file. A GGUF (an alias is one) is dequantised
once by transformers into ``~/.cache/tiermem/hf/<file stem>-<sha256 prefix>/`` (weights in
float32, so the dequantised values are exact; the tokenizer and chat template come from the
GGUF's metadata), and that directory is reused after.

The adapter then serves on the GGUF itself: llama.cpp applies it on top of the quantised
weights it was trained against the dequantised copy of.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiermem.slm import models
from tiermem.training import TrainingInputError, train_dependency

DEFAULT_HF_CACHE = Path("~/.cache/tiermem/hf")
MARKER = "tiermem_base.json"  # written last: a directory without it is an interrupted export


@dataclass(frozen=True, slots=True)
class BaseModel:
    """``hf_dir`` is what transformers loads; ``gguf`` is the file llama.cpp serves (``None``
    for a base given as a Hugging Face directory)."""

    name: str
    hf_dir: Path
    gguf: Path | None


def resolve_base(name: str, hf_cache: Path = DEFAULT_HF_CACHE) -> BaseModel:
    """The base ``name`` stands for, dequantising a GGUF on first use."""
    path = Path(name).expanduser()
    if name not in models.MODELS and path.is_dir():
        if not (path / "config.json").is_file():
            raise TrainingInputError(f"{path} is not a Hugging Face model folder (no config.json)")
        return BaseModel(path.name, path, None)
    if name not in models.MODELS and path.suffix != ".gguf":
        raise TrainingInputError(
            f"base {name!r} is neither a known alias ({', '.join(models.MODELS)}), "
            "a Hugging Face model folder, nor a .gguf file"
        )
    gguf = models.resolve_model(name)
    return BaseModel(
        name if name in models.MODELS else gguf.stem, dequantised(gguf, hf_cache), gguf
    )


def dequantised(gguf: Path, hf_cache: Path = DEFAULT_HF_CACHE) -> Path:
    """The Hugging Face copy of ``gguf``, made on first call (keyed by the file's sha256)."""
    digest = models.sha256_of(gguf)
    target = hf_cache.expanduser() / f"{gguf.stem}-{digest[:12]}"
    if (target / MARKER).is_file():
        return target
    transformers = train_dependency("transformers")
    import torch

    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    _forget_quantisation(model)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    (partial / MARKER).write_text(json.dumps({"gguf": str(gguf), "sha256": digest}))
    shutil.rmtree(target, ignore_errors=True)
    partial.replace(target)
    return target


def _forget_quantisation(model: Any) -> None:
    """Transformers marks a model loaded from a GGUF as quantised and refuses to save it,
    though its weights are already dequantised floats; the mark is dropped."""
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


__all__ = ["DEFAULT_HF_CACHE", "BaseModel", "dequantised", "resolve_base"]
