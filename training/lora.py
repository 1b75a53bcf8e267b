"""LoRA fine-tuning of the pointwise selector through peft, the loss on the answer token only.

Each example is the selector's prompt (:mod:`tiermem.slm.prompts.relevance`) in the base's own
chat template with the assistant turn opened, exactly what a backend sends; the model is taught
the first token of ``yes`` or ``no`` there, which is where the serving side reads P("yes").
Only that position's logits are computed (the decoder's last hidden state of each sequence
through the output head), so a 150k-token vocabulary costs one row per example.

Defaults (measured on this 2-core machine, Qwen2.5-Coder-0.5B dequantised, prompts of ~150
tokens, another process busy beside it): about 0.6-0.9 s per example in bfloat16 autocast and
1.2 s in float32; 2,000 examples in batches of 4 (500 steps) take 25-35 minutes.

>>> order = batch_order([9, 3, 8, 2, 7], 2, seed=0, epoch=0)
>>> sorted(i for batch in order for i in batch), sorted(len(b) for b in order)
([0, 1, 2, 3, 4], [1, 2, 2])
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tiermem.slm.cpu import cpu_flags
from tiermem.slm.prompts import relevance
from tiermem.training import TrainingInputError, checkpoint, train_dependency
from tiermem.training.base import BaseModel, resolve_base
from tiermem.training.dataset import Example, read_examples
from tiermem.training.settings import DEFAULT_TARGETS, LoraSettings

logger = logging.getLogger(__name__)

DEFAULT_ADAPTERS = Path("~/.cache/tiermem/adapters")
BUCKET = 16  # batches per window of length grouping


@dataclass(frozen=True, slots=True)
class TrainConfig:
    dataset: Path
    base: str  # an alias, a Hugging Face folder or a GGUF file
    out: Path
    settings: LoraSettings = field(default_factory=LoraSettings)
    resume: bool = False


@dataclass(frozen=True, slots=True)
class TrainResult:
    """``adapter``: the peft adapter folder; ``model``: the trained model, still in memory,
    for a caller that scores with it at once."""

    out: Path
    adapter: Path
    base: BaseModel
    examples: int
    steps: int
    resumed_from: int
    seconds: float  # wall time of the steps run here
    cpu_seconds: float  # CPU time of this process over those steps (all threads)
    losses: list[float]
    device: str
    precision: str
    model: Any = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Encoded:
    input_ids: list[int]
    label: int  # the answer's first token


def default_out(base: str) -> Path:
    """``~/.cache/tiermem/adapters/selector-<base>-<prompt version>``."""
    name = Path(base).stem if base.endswith(".gguf") else Path(base).name
    return DEFAULT_ADAPTERS.expanduser() / f"selector-{name}-{relevance.VERSION}"


def pick_device(name: str) -> str:
    if name != "auto":
        return name
    return "cuda" if torch.cuda.is_available() else "cpu"


def pick_precision(precision: str, device: str) -> str:
    """``auto``: bfloat16 autocast where the hardware has it (a recent GPU; a CPU with
    AVX-512 BF16 or AMX), float32 elsewhere."""
    if precision != "auto":
        return precision
    if device.startswith("cuda"):
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    native = {"avx512_bf16", "amx_bf16"} & cpu_flags()
    return "bfloat16" if device == "cpu" and native else "float32"


def sample_examples(examples: Sequence[Example], limit: int | None, seed: int) -> list[Example]:
    """A seeded sample of ``limit`` examples (all when ``limit`` is ``None`` or larger)."""
    if limit is None or limit >= len(examples):
        return list(examples)
    picked = sorted(random.Random(seed).sample(range(len(examples)), limit))
    return [examples[i] for i in picked]


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


def batch_order(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """Example positions in batches, shuffled per epoch by the seed alone (a resumed run sees
    the same batches). Within each window of ``BUCKET`` batches the examples are grouped by
    length, so a batch pads little; the batches are then shuffled."""
    order = list(range(len(lengths)))
    rng = random.Random(f"{seed}/{epoch}")
    rng.shuffle(order)
    window = batch_size * BUCKET
    batches = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def collate(batch: Sequence[Encoded], pad_id: int, device: str) -> dict[str, torch.Tensor]:
    """Right-padded ids, their mask, each sequence's last position and the labels."""
    width = max(len(e.input_ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, e in enumerate(batch):
        ids[row, : len(e.input_ids)] = torch.tensor(e.input_ids)
        mask[row, : len(e.input_ids)] = 1
    last = torch.tensor([len(e.input_ids) - 1 for e in batch])
    labels = torch.tensor([e.label for e in batch])
    out = {"input_ids": ids, "attention_mask": mask, "last": last, "labels": labels}
    return {k: v.to(device) for k, v in out.items()}


def answer_logits(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The next-token logits at each sequence's last position, in float32."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = inner.get_decoder()(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
    ).last_hidden_state
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    logits: torch.Tensor = inner.get_output_embeddings()(hidden[rows, batch["last"]])
    return logits.float()


def load_base(base: BaseModel, device: str) -> tuple[Any, Any]:
    """The base model (float32, on ``device``) and its tokenizer."""
    transformers = train_dependency("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(base.hf_dir)
    if not getattr(tokenizer, "chat_template", None):
        raise TrainingInputError(f"the tokenizer of {base.hf_dir} has no chat template")
    model = transformers.AutoModelForCausalLM.from_pretrained(base.hf_dir, dtype=torch.float32)
    return model.to(device), tokenizer


def with_lora(model: Any, settings: LoraSettings) -> Any:
    peft = train_dependency("peft")
    config = peft.LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
        task_type="CAUSAL_LM",
    )
    try:
        return peft.get_peft_model(model, config)
    except ValueError as exc:  # a target module the base does not have
        raise TrainingInputError(f"cannot put LoRA on this base: {exc}") from exc


def load_adapter(adapter: Path, base: str | None = None, device: str = "auto") -> tuple[Any, Any]:
    """A trained selector for scoring in Python: the base (from ``train.json`` beside the
    adapter unless given) with the adapter on it, in eval mode, and its tokenizer."""
    peft = train_dependency("peft")
    if base is None:
        summary = adapter.parent / "train.json"
        if not summary.is_file():
            raise TrainingInputError(f"no train.json beside {adapter}; name the base")
        base = str(json.loads(summary.read_text())["base"]["hf_dir"])
    model, tokenizer = load_base(resolve_base(base), pick_device(device))
    return peft.PeftModel.from_pretrained(model, adapter).eval(), tokenizer


def yes_probability(model: Any, tokenizer: Any, examples: Sequence[Example]) -> list[float]:
    """P("yes") of each example, from the answer position's softmax over the vocabulary."""
    yes = answer_token(tokenizer, relevance.YES)
    device = next(model.parameters()).device.type
    out = []
    with torch.no_grad():
        for e in examples:
            logits = answer_logits(model, collate([encode(tokenizer, e)], 0, device))
            out.append(float(torch.softmax(logits, dim=-1)[0, yes]))
    return out


ProgressCallback = Callable[[int, int, float], None]  # step, total steps, loss


def train_selector(config: TrainConfig, progress: ProgressCallback | None = None) -> TrainResult:
    """Train (or, with ``resume``, continue) a LoRA adapter; write ``adapter/``, the
    checkpoints and ``train.json`` under ``config.out``."""
    settings = config.settings
    settings.check()
    examples = sample_examples(read_examples(config.dataset), settings.max_examples, settings.seed)
    if not examples:
        raise TrainingInputError(f"dataset {config.dataset} holds no example")
    base = resolve_base(config.base)
    device = pick_device(settings.device)
    precision = pick_precision(settings.precision, device)
    torch.manual_seed(settings.seed)
    model, tokenizer = load_base(base, device)
    model = with_lora(model, settings)
    encoded = [encode(tokenizer, e) for e in examples]
    lengths = [len(e.input_ids) for e in encoded]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    per_epoch = math.ceil(len(encoded) / settings.batch_size)
    total = per_epoch * settings.epochs
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.learning_rate)
    schedule = warmup_then_linear(optimizer, total, settings.warmup_ratio)
    fingerprint = {"settings": asdict(settings), "base": str(base.hf_dir), "n": len(encoded)}
    start, losses = resume_point(config, model, optimizer, schedule, fingerprint)
    started, cpu_started = time.perf_counter(), time.process_time()
    model.train()
    autocast = (
        torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16)
        if precision == "bfloat16"
        else nullcontext()
    )
    for step in range(start, total):
        epoch, index = divmod(step, per_epoch)
        positions = batch_order(lengths, settings.batch_size, settings.seed, epoch)[index]
        batch = collate([encoded[i] for i in positions], pad_id, device)
        with autocast:
            logits = answer_logits(model, batch)
        loss = torch.nn.functional.cross_entropy(logits, batch["labels"])
        torch.autograd.backward(loss)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        if (step + 1) % settings.checkpoint_every == 0 or step + 1 == total:
            checkpoint.save(config.out, step + 1, model, optimizer, schedule, losses, fingerprint)
        if progress is not None:
            progress(step + 1, total, losses[-1])
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    adapter = config.out / "adapter"
    model.save_pretrained(adapter)
    model.eval()
    result = TrainResult(
        config.out, adapter, base, len(encoded), total, start, seconds, cpu_seconds, losses,
        device, precision,
        model,
    )  # fmt: skip
    write_summary(config, result)
    return result


def warmup_then_linear(
    optimizer: torch.optim.Optimizer, total: int, warmup_ratio: float
) -> torch.optim.lr_scheduler.LambdaLR:
    warmup = max(1, round(total * warmup_ratio))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def resume_point(
    config: TrainConfig,
    model: Any,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    fingerprint: dict[str, object],
) -> tuple[int, list[float]]:
    """Where to start: the last checkpoint's step when resuming (a run with other settings,
    base or examples is refused), else 0 with the old checkpoints cleared."""
    if not config.resume:
        checkpoint.clear(config.out)
        return 0, []
    found = checkpoint.checkpoints(config.out)
    if not found:
        logger.info("no checkpoint under %s: starting from step 0", config.out)
        return 0, []
    theirs = checkpoint.fingerprint_of(found[-1])
    if json.dumps(theirs, sort_keys=True) != json.dumps(fingerprint, sort_keys=True):
        raise TrainingInputError(
            f"the checkpoint {found[-1]} was made with other settings, base or dataset; "
            "run without --resume to start afresh"
        )
    restored = checkpoint.restore(found[-1], model, optimizer, schedule)
    return restored.step, restored.losses


def write_summary(config: TrainConfig, result: TrainResult) -> Path:
    path = config.out / "train.json"
    summary = {
        "dataset": str(config.dataset),
        "base": {"name": result.base.name, "hf_dir": str(result.base.hf_dir),
                 "gguf": str(result.base.gguf) if result.base.gguf else None},
        "prompt_version": relevance.VERSION,
        "settings": asdict(config.settings),
        "device": result.device,
        "precision": result.precision,
        "examples": result.examples,
        "steps": result.steps,
        "resumed_from": result.resumed_from,
        "seconds": round(result.seconds, 1),
        "cpu_seconds": round(result.cpu_seconds, 1),
        "losses": [round(x, 5) for x in result.losses],
    }  # fmt: skip
    path.write_text(json.dumps(summary, indent=2))
    return path


__all__ = [
    "DEFAULT_TARGETS",
    "LoraSettings",
    "TrainConfig",
    "TrainResult",
    "answer_logits",
    "default_out",
    "load_adapter",
    "train_selector",
    "yes_probability",
]
