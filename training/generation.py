"""LoRA for a role that writes its answer (the controller's JSON plan): teacher-forced
cross-entropy over the answer's tokens only, the prompt masked out.

An example is tokenised as llama.cpp serves it: the prompt through the base's chat template
with the assistant turn opened (:func:`tiermem.training.batches.prompt_text`, the selector's
own rendering), then the target and the template's end of turn, cut from the template's
rendering of the whole exchange, so the model learns to stop where serving stops. Everything
else (base loading, peft, precision, checkpoints and resume, the schedule, the summary, the
GGUF export) is the selector's (:mod:`tiermem.training.lora`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from tiermem.training import TrainingInputError
from tiermem.training.batches import decoder_and_head, prompt_text
from tiermem.training.lora import (
    DEFAULT_ADAPTERS,
    ProgressCallback,
    Run,
    TrainConfig,
    TrainResult,
    prepare,
    run_steps,
)
from tiermem.training.role_example import RoleExample, read_role_examples

IGNORED = -100  # the label cross-entropy skips: the prompt's tokens
# every answer token weighs the same in a run (``batch_loss``); a checkpoint of another loss
# is not resumed
LOSS = "answer-token-sum-v2"


def default_out(role: str, base: str, version: str) -> Path:
    """``~/.cache/tiermem/adapters/<role>-<base>-<prompt version>``."""
    name = Path(base).stem if base.endswith(".gguf") else Path(base).name
    return DEFAULT_ADAPTERS.expanduser() / f"{role}-{name}-{version}"


def encode_answer(tokenizer: Any, example: RoleExample) -> tuple[list[int], list[int]]:
    """(input ids, labels): the prompt as served, then the target and the end of turn; the
    labels are the ids with the prompt's masked."""
    prompt = prompt_text(tokenizer, example)
    messages = [{"role": m.role, "content": m.content} for m in example.messages]
    messages.append({"role": "assistant", "content": example.target})
    whole = str(tokenizer.apply_chat_template(messages, tokenize=False))
    if not whole.startswith(prompt):
        raise TrainingInputError("the base's chat template renders the prompt differently alone")
    answer = whole[len(prompt) :].rstrip("\n")
    prompt_ids = list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    answer_ids = list(tokenizer(answer, add_special_tokens=False)["input_ids"])
    return prompt_ids + answer_ids, [IGNORED] * len(prompt_ids) + answer_ids


def answer_tokens(row: tuple[list[int], list[int]]) -> int:
    """How many of an encoded example's tokens are the answer's (the loss's)."""
    return sum(1 for label in row[1] if label != IGNORED)


def batch_loss(
    model: Any,
    rows: Sequence[tuple[list[int], list[int]]],
    pad_id: int,
    device: str,
    tokens_per_example: float,
) -> torch.Tensor:
    """The summed cross-entropy of the answers' tokens over ``rows`` (right-padded), over
    ``tokens_per_example`` tokens a row: given the run's mean answer length, every answer
    token weighs the same in the run whatever its example's length. With the batch's own
    mean instead (the batch's answer tokens as the count), a batch of one short
    answer weighs each of its tokens many times more than a long one does: the first token of
    a writer's empty list (7 tokens) weighed about 20 times that of a list of facts (137).
    Over a run, the sum's mean is the mean per-token loss."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORED, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, (tokens, targets) in enumerate(rows):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        labels[row, : len(targets)] = torch.tensor(targets)
        mask[row, : len(tokens)] = 1
    decoder, head = decoder_and_head(model)
    hidden = decoder(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state
    # position t predicts token t + 1; the head (a vocabulary wide) runs on the answer's only
    following = labels[:, 1:].to(hidden.device)
    answered = following != IGNORED
    logits = head(hidden[:, :-1][answered]).float()
    summed = torch.nn.functional.cross_entropy(logits, following[answered], reduction="sum")
    return summed / (tokens_per_example * len(rows))


def _picked(examples: list[RoleExample], limit: int | None, seed: int) -> list[RoleExample]:
    if limit is None or limit >= len(examples):
        return examples
    order = sorted(random.Random(seed).sample(range(len(examples)), limit))
    return [examples[i] for i in order]


def train_role(
    role: str, config: TrainConfig, progress: ProgressCallback | None = None
) -> TrainResult:
    """Train (or, with ``resume``, continue) ``role``'s LoRA adapter on the role examples
    of ``config.dataset``; write ``adapter/``, the checkpoints and ``train.json``."""
    settings = config.settings
    settings.check()
    examples = [e for e in read_role_examples(config.dataset) if e.meta.role == role]
    picked = _picked(examples, settings.max_examples, settings.seed)
    if not picked:
        raise TrainingInputError(f"dataset {config.dataset} holds no {role} example")
    base, device, precision, model, tokenizer = prepare(config)
    rows = [encode_answer(tokenizer, e) for e in picked]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    per_epoch = math.ceil(len(rows) / settings.batch_size)
    per_example = sum(answer_tokens(row) for row in rows) / len(rows)
    fingerprint: dict[str, object] = {
        "role": role,
        "settings": asdict(settings),
        "base": str(base.hf_dir),
        "n": len(rows),
        "loss": LOSS,
    }

    def loss_at(step: int) -> torch.Tensor:
        epoch, index = divmod(step, per_epoch)
        order = list(range(len(rows)))
        random.Random(f"{settings.seed}/{epoch}").shuffle(order)
        batch = order[index * settings.batch_size : (index + 1) * settings.batch_size]
        return batch_loss(model, [rows[i] for i in batch], pad_id, device, per_example)

    run = Run(config, base, device, precision, len(rows), per_epoch * settings.epochs)
    return run_steps(run, model, loss_at, fingerprint, picked[0].meta.prompt_version, progress)


__all__ = ["answer_tokens", "batch_loss", "default_out", "encode_answer", "train_role"]
