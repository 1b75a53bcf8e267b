"""LoRA fine-tuning of the pointwise selector through peft, the loss on the answer token only.

Each example is the selector's prompt (:mod:`tiermem.slm.prompts.relevance`) in the base's own
chat template with the assistant turn opened, exactly what a backend sends; the model is taught
the first token of ``yes`` or ``no`` there, which is where the serving side reads P("yes").
Only that position's logits are computed (the decoder's last hidden state of each sequence
through the output head), so a 150k-token vocabulary costs one row per example. A step is one
question's candidates (``batch_size`` questions), their shared prompt evaluated once
(:mod:`tiermem.training.batches`).

>>> warmup_then_linear(torch.optim.SGD([torch.zeros(1)], lr=1.0), 10, 0.2).get_last_lr()
[0.5]
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tiermem.slm.cpu import computes_bfloat16
from tiermem.slm.prompts import relevance
from tiermem.training import TrainingInputError, checkpoint, train_dependency
from tiermem.training.base import BaseModel, resolve_base
from tiermem.training.batches import (
    Group,
    answer_logits,
    answer_token,
    encode_group,
    group_logits,
    group_order,
    question_groups,
    sample_groups,
)
from tiermem.training.dataset import Example, read_examples
from tiermem.training.settings import DEFAULT_TARGETS, LoraSettings

logger = logging.getLogger(__name__)

DEFAULT_ADAPTERS = Path("~/.cache/tiermem/adapters")


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


def default_out(base: str) -> Path:
    """``~/.cache/tiermem/adapters/selector-<base>-<prompt version>``."""
    name = Path(base).stem if base.endswith(".gguf") else Path(base).name
    return DEFAULT_ADAPTERS.expanduser() / f"selector-{name}-{relevance.VERSION}"


def pick_device(name: str) -> str:
    if name != "auto":
        return name
    return "cuda" if torch.cuda.is_available() else "cpu"


def pick_precision(precision: str, device: str) -> str:
    """The dtype the base's frozen weights are held in (the adapter's stay float32).
    ``auto``: bfloat16 where the hardware computes it (a recent GPU; a CPU with AVX-512 BF16
    or AMX), float32 elsewhere. Held, not autocast: autocast casts every frozen weight again at
    each use: profiled on one question of qwen0.5b on this (busy) 2-core machine, a step took
    44.9 s autocast and 2.8 s held."""
    if precision != "auto":
        return precision
    if device.startswith("cuda"):
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if device == "cpu" and computes_bfloat16() else "float32"


def load_base(base: BaseModel, device: str, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """The base model (in ``dtype``, on ``device``) and its tokenizer."""
    transformers = train_dependency("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(base.hf_dir)
    if not getattr(tokenizer, "chat_template", None):
        raise TrainingInputError(f"the tokenizer of {base.hf_dir} has no chat template")
    model = transformers.AutoModelForCausalLM.from_pretrained(base.hf_dir, dtype=dtype)
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
    with torch.no_grad():
        logits = answer_logits(model, tokenizer, examples)
    return [float(p) for p in torch.softmax(logits, dim=-1)[:, yes]]


ProgressCallback = Callable[[int, int, float], None]  # step, total steps, loss


def step_loss(model: Any, groups: Sequence[Group], pad_id: int, device: str) -> torch.Tensor:
    """The mean cross-entropy of the answer token over the examples of ``groups``."""
    logits = torch.cat([group_logits(model, g, pad_id, device) for g in groups])
    labels = torch.tensor([label for g in groups for label in g.labels], device=logits.device)
    return torch.nn.functional.cross_entropy(logits, labels)


def train_selector(config: TrainConfig, progress: ProgressCallback | None = None) -> TrainResult:
    """Train (or, with ``resume``, continue) a LoRA adapter; write ``adapter/``, the
    checkpoints and ``train.json`` under ``config.out``."""
    settings = config.settings
    settings.check()
    questions = question_groups(read_examples(config.dataset))
    picked = sample_groups(questions, settings.max_examples, settings.seed)
    if not picked:
        raise TrainingInputError(f"dataset {config.dataset} holds no example")
    base, device, precision, model, tokenizer = prepare(config)
    groups = [encode_group(tokenizer, g) for g in picked]
    examples = sum(g.size for g in groups)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    per_epoch = math.ceil(len(groups) / settings.batch_size)
    fingerprint = {"settings": asdict(settings), "base": str(base.hf_dir), "n": examples}

    def loss_at(step: int) -> torch.Tensor:
        epoch, index = divmod(step, per_epoch)
        positions = group_order(len(groups), settings.batch_size, settings.seed, epoch)[index]
        return step_loss(model, [groups[i] for i in positions], pad_id, device)

    run = Run(config, base, device, precision, examples, per_epoch * settings.epochs)
    return run_steps(run, model, loss_at, fingerprint, relevance.VERSION, progress)


def prepare(config: TrainConfig) -> tuple[BaseModel, str, str, Any, Any]:
    """The base, device and precision of a run, and the base with fresh LoRA layers on it
    (seeded) and its tokenizer."""
    settings = config.settings
    base = resolve_base(config.base)
    device = pick_device(settings.device)
    precision = pick_precision(settings.precision, device)
    torch.manual_seed(settings.seed)
    dtype = torch.bfloat16 if precision == "bfloat16" else torch.float32
    model, tokenizer = load_base(base, device, dtype)
    return base, device, precision, with_lora(model, settings), tokenizer


@dataclass(frozen=True, slots=True)
class Run:
    """What a LoRA run is, once its base is loaded and its examples encoded."""

    config: TrainConfig
    base: BaseModel
    device: str
    precision: str
    examples: int
    total: int  # steps


def run_steps(
    run: Run,
    model: Any,
    loss_at: Callable[[int], torch.Tensor],
    fingerprint: dict[str, object],
    prompt_version: str,
    progress: ProgressCallback | None = None,
) -> TrainResult:
    """The optimiser's steps over ``loss_at(step)`` from where a resumed run left off, with
    checkpoints; then the adapter and ``train.json`` under ``run.config.out``."""
    config, settings = run.config, run.config.settings
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.learning_rate)
    schedule = warmup_then_linear(optimizer, run.total, settings.warmup_ratio)
    start, losses = resume_point(config, model, optimizer, schedule, fingerprint)
    started, cpu_started = time.perf_counter(), time.process_time()
    model.train()
    for step in range(start, run.total):
        loss = loss_at(step)
        torch.autograd.backward(loss)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        if (step + 1) % settings.checkpoint_every == 0 or step + 1 == run.total:
            checkpoint.save(config.out, step + 1, model, optimizer, schedule, losses, fingerprint)
        if progress is not None:
            progress(step + 1, run.total, losses[-1])
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    adapter = config.out / "adapter"
    model.save_pretrained(adapter)
    model.eval()
    result = TrainResult(
        config.out, adapter, run.base, run.examples, run.total, start, seconds, cpu_seconds,
        losses, run.device, run.precision, model,
    )  # fmt: skip
    write_summary(config, result, prompt_version)
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


def write_summary(
    config: TrainConfig, result: TrainResult, prompt_version: str = relevance.VERSION
) -> Path:
    path = config.out / "train.json"
    summary = {
        "dataset": str(config.dataset),
        "base": {"name": result.base.name, "hf_dir": str(result.base.hf_dir),
                 "gguf": str(result.base.gguf) if result.base.gguf else None},
        "prompt_version": prompt_version,
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
