"""``tiermem bench generator``: the answer generator, base model and LoRA, on a data set's
held-out split, through ``answer()`` as a user asks.

Each conversation of the split is ingested model-free once per generator, and its questions
(all, or a seeded sample of ``questions`` per conversation) are asked through ``answer()`` with
``generator.kind = "model"`` on ``model``, and again with the GGUF LoRA ``adapter`` on it:
the same memories, the same contexts, so answers differ only by the generator. Per variant
and question group (``question_type``, else category), reported:

- ``f1``: the official per-category score (:func:`tiermem.bench.metrics.answer_f1`; for an
  adversarial question, 1 for an abstention, ``NOTHING_IN_MEMORY`` included);
- ``gold in``: answerable questions whose answer holds every gold token (an answer that adds
  "; it was ... before" keeps it, where F1 drops);
- ``refused``: answered ``NOTHING_IN_MEMORY`` (right for adversarial questions, wrong for
  the rest);
- ``fell back``: model calls that failed and fell back to the extractive answer (which
  quotes the whole context), each scored a miss;
- p50 seconds a question.

Rows go to ``OUT/answers.jsonl``, the summary to ``OUT/generator.json``.
"""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.conversation import ADVERSARIAL, Question
from tiermem.bench.embed_cache import CachedEmbedder
from tiermem.bench.metrics import answer_f1, normalize_answer
from tiermem.bench.update_answers import ask, check_adapter, generator_config
from tiermem.config import EmbedderConfig, GeneratorConfig, TiermemConfig
from tiermem.embedding import Embedder, build_embedder
from tiermem.generator import NOTHING_IN_MEMORY
from tiermem.training.dataset import split_samples
from tiermem.training.generator_data import in_scope


@dataclass(frozen=True)
class GeneratorEvalConfig:
    data: Path
    out: Path
    model: str = "qwen0.5b"
    adapter: Path | None = None
    split: str = "test"
    questions: int | None = None  # a seeded sample per conversation; None: all
    seed: int = 0
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    embed_cache: Path | None = None


def gold_in(answer: str, gold: str) -> bool:
    """Every normalised gold token occurs in the answer.

    >>> gold_in("Graz; it was Cork before.", "Graz"), gold_in("Cork", "Graz")
    (True, False)
    """
    words = set(normalize_answer(answer).split())
    return all(w in words for w in normalize_answer(gold).split())


def _sample(
    questions: list[tuple[int, Question]], n: int | None, rng: random.Random
) -> list[tuple[int, Question]]:
    if n is None or len(questions) <= n:
        return questions
    return sorted(rng.sample(questions, n))


def variants_of(cfg: GeneratorEvalConfig) -> dict[str, GeneratorConfig]:
    """The base model, and the LoRA on it where one is given."""
    out = {cfg.model: generator_config(cfg.model, None)}
    if cfg.adapter is not None:
        out[f"{cfg.model}+lora"] = generator_config(cfg.model, cfg.adapter)
    return out


def run(
    cfg: GeneratorEvalConfig,
    console: Console,
    variants: dict[str, GeneratorConfig] | None = None,
) -> dict[str, Any]:
    """Every variant (default: :func:`variants_of`) on the split's questions; the summary."""
    check_adapter(cfg.adapter)
    samples, _quirks = load_dataset(cfg.data)
    chosen = split_samples(samples, cfg.split)
    variants = variants or variants_of(cfg)
    embedder: Embedder = build_embedder(cfg.embedder)
    if cfg.embed_cache:
        embedder = CachedEmbedder(embedder, cfg.embed_cache)
    cfg.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    rng = random.Random(cfg.seed)
    asked = {
        s.sample_id: _sample(
            [(i, q) for i, q in enumerate(s.questions) if in_scope(q)],
            cfg.questions,
            rng,
        )
        for _, s in chosen
    }
    try:
        for number, (name, generator) in enumerate(variants.items()):
            config = TiermemConfig(embedder=cfg.embedder, generator=generator)
            for _, sample in chosen:
                picked = asked[sample.sample_id]
                state = cfg.out / "state" / f"g{number}"  # a model may be an absolute path
                answered = ask(sample, [q.question for _, q in picked], config, state, embedder)
                for (index, q), got in zip(picked, answered, strict=True):
                    text = "" if got.fell_back else got.text  # the extractive quote: a miss
                    rows.append(
                        {
                            "variant": name,
                            "sample": sample.sample_id,
                            "index": index,
                            "group": q.group,
                            "adversarial": q.category == ADVERSARIAL,
                            "gold": q.answer,
                            "answer": text,
                            "f1": answer_f1(text, q.answer, q.category),
                            "gold_in": q.category != ADVERSARIAL and gold_in(text, q.answer),
                            "refused": text.strip() == NOTHING_IN_MEMORY,
                            "fell_back": got.fell_back,
                            "seconds": got.seconds,
                        }
                    )
    finally:
        close = getattr(embedder, "close", None)
        if close is not None:
            close()
    with (cfg.out / "answers.jsonl").open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    summary = summarise(rows)
    (cfg.out / "generator.json").write_text(json.dumps(summary, indent=2) + "\n")
    _print(summary, cfg, console)
    return summary


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per variant: per group and overall (answerable, adversarial), the figures above."""
    out: dict[str, Any] = {}
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in mine:
            groups.setdefault(r["group"], []).append(r)
        groups["all answerable"] = [r for r in mine if not r["adversarial"]]
        groups["all adversarial"] = [r for r in mine if r["adversarial"]]
        out[variant] = {
            g: {
                "n": len(rs),
                "f1": 100 * statistics.fmean(r["f1"] for r in rs),
                "gold_in": 100 * statistics.fmean(r["gold_in"] for r in rs),
                "refused": 100 * statistics.fmean(r["refused"] for r in rs),
                "fell_back": 100 * statistics.fmean(r["fell_back"] for r in rs),
                "p50_s": statistics.median(r["seconds"] for r in rs),
            }
            for g, rs in groups.items()
            if rs
        }
    return out


def _print(summary: dict[str, Any], cfg: GeneratorEvalConfig, console: Console) -> None:
    table = Table(title=f"answer() with a model generator: {cfg.data.name}, {cfg.split} split")
    for col in ("variant", "group", "n", "F1", "gold in", "refused", "fell back", "p50 s"):
        table.add_column(col, justify="left" if col in ("variant", "group") else "right")
    for variant, groups in summary.items():
        for group, r in groups.items():
            table.add_row(
                variant,
                group,
                str(r["n"]),
                f"{r['f1']:.1f}",
                f"{r['gold_in']:.1f}",
                f"{r['refused']:.1f}",
                f"{r['fell_back']:.1f}",
                f"{r['p50_s']:.1f}",
            )
    console.print(table)


__all__ = ["GeneratorEvalConfig", "gold_in", "run", "summarise", "variants_of"]
