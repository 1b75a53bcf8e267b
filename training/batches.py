"""Examples as the model sees them in training: tokens through the base's chat template, and
one question's candidates evaluated together on their shared prompt.

Every candidate of a question shares the prompt up to its memory (the system text, the task,
the question: about two thirds of its ~170 tokens on Qwen2.5). A step therefore runs that
prefix once, repeats its key/value cache over the candidates and runs only their remainders,
about half the tokens of evaluating each example whole, the gradient flowing back through the
shared prefix. :func:`answer_logits` evaluates examples whole; it is the reference the shared
path is tested against, and what scoring one example uses.

>>> common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]])
2
>>> group_order(5, 2, seed=0, epoch=0) == group_order(5, 2, seed=0, epoch=0)
True
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tiermem.training import TrainingInputError
from tiermem.training.dataset import Example


@dataclass(frozen=True, slots=True)
class Encoded:
    input_ids: list[int]
    label: int  # the answer's first token


@dataclass(frozen=True, slots=True)
class Group:
    """One question's examples: the tokens they share, each one's remainder (at least its
    last token) and each one's label."""

    prefix: list[int]
    suffixes: list[list[int]]
    labels: list[int]

    @property
    def size(self) -> int:
        return len(self.labels)


def question_groups(examples: Sequence[Example]) -> list[list[Example]]:
    """The examples by question (sample id and question index), in first-seen order."""
    groups: dict[tuple[str, int], list[Example]] = {}
    for e in examples:
        groups.setdefault((e.meta.sample_id, e.meta.question_index), []).append(e)
    return list(groups.values())


def sample_groups(
    groups: Sequence[list[Example]], limit: int | None, seed: int
) -> list[list[Example]]:
    """Whole questions drawn by the seed until they hold ``limit`` examples (all when
    ``limit`` is ``None``), kept in dataset order."""
    if limit is None:
        return list(groups)
    order = list(range(len(groups)))
    random.Random(seed).shuffle(order)
    picked, count = [], 0
    for i in order:
        if count >= limit:
            break
        picked.append(i)
        count += len(groups[i])
    return [groups[i] for i in sorted(picked)]


def prompt_text(tokenizer: Any, example: Example) -> str:
    """The example's messages in the base's chat template, the assistant turn opened."""
    messages = [{"role": m.role, "content": m.content} for m in example.messages]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return str(text)


def answer_token(tokenizer: Any, answer: str) -> int:
    ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    if not ids:
        raise TrainingInputError(f"the tokenizer turns the answer {answer!r} into no token")
    return int(ids[0])


def encode(tokenizer: Any, example: Example) -> Encoded:
    ids = tokenizer(prompt_text(tokenizer, example), add_special_tokens=False)["input_ids"]
    return Encoded(list(ids), answer_token(tokenizer, example.target))


def common_prefix(sequences: Sequence[Sequence[int]]) -> int:
    """The length of the longest prefix all ``sequences`` share."""
    first = sequences[0]
    n = min(len(s) for s in sequences)
    for i in range(n):
        if any(s[i] != first[i] for s in sequences):
            return i
    return n


def encode_group(tokenizer: Any, examples: Sequence[Example]) -> Group:
    encoded = [encode(tokenizer, e) for e in examples]
    ids = [e.input_ids for e in encoded]
    # each remainder keeps at least its last token: its logits are the answer's
    shared = min(common_prefix(ids), min(len(x) for x in ids) - 1)
    return Group(ids[0][:shared], [x[shared:] for x in ids], [e.label for e in encoded])


def group_order(n: int, per_step: int, seed: int, epoch: int) -> list[list[int]]:
    """Group positions per step, shuffled per epoch by the seed alone (a resumed run sees the
    same steps)."""
    order = list(range(n))
    random.Random(f"{seed}/{epoch}").shuffle(order)
    return [order[i : i + per_step] for i in range(0, n, per_step)]


def decoder_and_head(model: Any) -> tuple[Any, Any]:
    """The decoder stack and the output head, under peft's wrapper or without it."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inner.get_decoder(), inner.get_output_embeddings()


def group_logits(model: Any, group: Group, pad_id: int, device: str) -> torch.Tensor:
    """The answer position's logits of each of the group's examples (float32), the shared
    prefix evaluated once."""
    decoder, head = decoder_and_head(model)
    n, shared = group.size, len(group.prefix)
    width = max(len(s) for s in group.suffixes)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, shared + width), dtype=torch.long)
    mask[:, :shared] = 1
    for row, suffix in enumerate(group.suffixes):
        ids[row, : len(suffix)] = torch.tensor(suffix)
        mask[row, shared : shared + len(suffix)] = 1
    # transformers 5 renames past_key_values to cache (the old name is refused from 5.40)
    name = "cache" if "cache" in inspect.signature(decoder.forward).parameters else None
    cache = None
    if shared:
        prefix = decoder(input_ids=torch.tensor([group.prefix], device=device), use_cache=True)
        cache = prefix["cache"] if name else prefix["past_key_values"]
        cache.batch_repeat_interleave(n)
    positions = torch.arange(shared, shared + width, device=device).expand(n, width)
    hidden = decoder(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        position_ids=positions,
        use_cache=cache is not None,
        **{name or "past_key_values": cache},
    ).last_hidden_state
    last = torch.tensor([len(s) - 1 for s in group.suffixes], device=device)
    logits: torch.Tensor = head(hidden[torch.arange(n, device=device), last])
    return logits.float()


def answer_logits(model: Any, tokenizer: Any, examples: Sequence[Example]) -> torch.Tensor:
    """The answer position's logits of each example evaluated whole (float32)."""
    decoder, head = decoder_and_head(model)
    device = next(model.parameters()).device
    rows = []
    for e in examples:
        ids = torch.tensor([encode(tokenizer, e).input_ids], device=device)
        rows.append(head(decoder(input_ids=ids).last_hidden_state[:, -1]))
    return torch.cat(rows).float()


__all__ = [
    "Encoded",
    "Group",
    "answer_logits",
    "answer_token",
    "common_prefix",
    "decoder_and_head",
    "encode",
    "encode_group",
    "group_logits",
    "group_order",
    "prompt_text",
    "question_groups",
    "sample_groups",
]
