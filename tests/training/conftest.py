"""A tiny, randomly initialised Llama (2 layers, hidden 64) with SmolLM2's tokenizer taken out
of its GGUF, so nothing is downloaded: the base every LoRA test trains on."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tiermem.slm import models


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tiny base's folder (``base``), its tokenizer and a folder to work in (``root``)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    gguf = models.cache_path("smollm2")
    if not gguf.is_file():
        pytest.fail("this test takes SmolLM2's tokenizer: tiermem models install smollm2")
    root = tmp_path_factory.mktemp("tiny")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    base = root / "base"
    LlamaForCausalLM(config).save_pretrained(base)
    tokenizer.save_pretrained(base)
    return {"root": root, "base": base, "tokenizer": tokenizer}
