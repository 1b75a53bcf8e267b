"""Selector dataset building and LoRA fine-tuning.

The pointwise selector (``tiermem.slm.prompts.relevance``) asks a small model, for one
question and one candidate memory, whether the memory is evidence; the score is P("yes").
This package teaches a base model that one answer:

1. ``tiermem train dataset`` (:mod:`tiermem.training.dataset`): every LoCoMo question's
   first-stage candidates, from the real read path at the pool size the selector sees, rendered
   through the same prompt module the selector serves, labelled against the gold evidence.
   Fixed split by conversation position: train 0-6, tune 7, test 8-9.
2. ``tiermem train selector`` (:mod:`tiermem.training.lora`): LoRA through peft on an alias
   (``qwen0.5b``), a Hugging Face directory or a GGUF file (dequantised once into
   ``~/.cache/tiermem/hf``), the loss on the answer token only; checkpoints and ``--resume``.
3. Export (:mod:`tiermem.training.export`): the adapter as a GGUF LoRA (llama.cpp's
   ``convert_lora_to_gguf.py`` from the llama-cpp-python sdist) and an Ollama Modelfile.

Serving the adapter:

- llama.cpp (the ``llamacpp`` backend): ``Llama(model_path=base.gguf, lora_path=adapter.gguf)``,
  the base being the GGUF the adapter was trained on.
- Ollama: ``ollama create tiermem-selector -f Modelfile`` with ``FROM`` the base and
  ``ADAPTER`` the GGUF LoRA (``deploy/ollama/Modelfile.selector``).
- vLLM (OpenAI-compatible): start the server with the Hugging Face base and the PEFT adapter
  directory, ``vllm serve BASE --enable-lora --lora-modules tiermem-selector=ADAPTER_DIR
  --max-lora-rank 16``, then request ``model="tiermem-selector"`` (with ``logprobs`` for the
  pointwise score). Other OpenAI-compatible servers that take adapters (llama.cpp's
  ``llama-server --lora adapter.gguf``) load the GGUF file instead.

The dependencies (transformers, peft, gguf) come with the ``train`` extra,
``pip install 'tiermem[train]'``.
"""

from __future__ import annotations

from types import ModuleType

from tiermem.errors import InvalidInputError, TiermemError
from tiermem.extras import extra_dependency


class TrainingInputError(InvalidInputError):
    """A training argument that names nothing usable (a split, a base model, a dataset)."""


class ConversionError(TiermemError):
    """A llama.cpp converter failed; ``tool`` names it and ``detail`` holds its last words."""

    def __init__(self, tool: str, detail: str) -> None:
        self.tool = tool
        self.detail = detail
        super().__init__(f"{tool} failed: {detail}")


def train_dependency(module: str) -> ModuleType:
    """Import a dependency of the ``train`` extra, or say how to install it."""
    return extra_dependency(module, "train", "training")


__all__ = ["ConversionError", "TrainingInputError", "train_dependency"]
