"""``tiermem bench selector``: the selectors compared on held-out conversations, in one run.

Every variant sees the same questions and, per question, the same candidate pool: the one the
read path hands its selector (:func:`tiermem.training.dataset.candidate_pool`, ``2k``
candidates), taken from a model-free memory of the conversation ingested as ``tiermem bench
locomo`` ingests it. The variants:

- ``fusion``: rank fusion alone, the first ``k`` candidates (no model);
- ``listwise``: the base model names the supporting candidates in one call;
- ``pointwise``: the base model's P(yes) per candidate, fused with the first-stage rank;
- ``pointwise-lora``: the same with the LoRA adapter (``--adapter``, a GGUF LoRA);
- ``cross-encoder``: the fine-tuned MiniLM cross-encoder (``--cross-encoder DIR``) scores the
  pool in one batch, fused with the first-stage rank the same way, cut at the threshold it was
  calibrated with in training (rows ``cross-encoder@k``: the same scores cut at ``k``).

Per question and variant: precision, recall and F1 of the kept candidates against the gold
labels of the pool (a candidate is relevant when one of its source turns is gold evidence);
evidence recall of the kept candidates' own turns (at equal K) and of the context the builder
makes of them at each token budget (delivered tokens reported); the prompt tokens sent and
evaluated, and the selection's latency. With ``calibrate_questions``, each pointwise variant's
threshold (adaptive K) is calibrated on that many questions of the tune split first, and the
same scores are also cut at ``k`` (rows ``pointwise@k``, ``pointwise-lora@k``): equal K beside
adaptive K, for one scoring.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.bursty import burst
from tiermem.bench.datasets.conversation import Conversation, Question
from tiermem.bench.datasets.splits import check_split, split_items
from tiermem.bench.embed_cache import CachedEmbedder
from tiermem.bench.metrics import evidence_recall
from tiermem.bench.systems import ingested
from tiermem.components import Components
from tiermem.config import EmbedderConfig, TiermemConfig, backend_config
from tiermem.embedding import Embedder, build_embedder
from tiermem.pipeline.deliver import build_context
from tiermem.ranking import calibrate_threshold
from tiermem.roles.plan import Candidate, Selection, Selector
from tiermem.slm.meter import Meter
from tiermem.slm.registry import BackendPool
from tiermem.slm.roles.common import RoleRuntime
from tiermem.slm.roles.cross_encoder import CrossEncoderSelector
from tiermem.slm.roles.pointwise import FusedSelector, PointwiseSelector, PointwiseSettings
from tiermem.slm.roles.selectors import (
    CROSS_ENCODER,
    FUSION,
    build_selector,
    check_selector_backend,
)
from tiermem.training import TrainingInputError
from tiermem.training.dataset import candidate_pool, is_relevant
from tiermem.types import ScoreExplanation, SearchHit

VARIANTS = ("fusion", "listwise", "pointwise", "pointwise-lora", CROSS_ENCODER)
SELECT_TIMEOUT_S = 600.0  # per question: a slow CPU must not turn into fallbacks


@dataclass(frozen=True, slots=True)
class SelectorEvalConfig:
    data: Path
    out: Path
    model: str = "qwen0.5b"
    adapter: Path | None = None  # a GGUF LoRA on ``model``; without it no pointwise-lora
    backend_kind: str = "llamacpp"  # a registered backend kind that can score tokens
    split: str = "test"
    k: int = 10
    questions: int | None = None  # per conversation, evenly spaced over its questions
    budgets: tuple[int, ...] = (300, 600, 1200)
    calibrate_questions: int = 0  # tune-split questions per pointwise variant; 0: keep k
    weight: float = 0.3
    variants: tuple[str, ...] = VARIANTS
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    models_dir: Path = Path("~/.cache/tiermem/models")
    cross_encoder: Path | None = None  # a trained model directory; without it no cross-encoder
    cross_encoder_precision: str = "auto"  # the dtype it runs in (serving_precision)
    embed_cache: Path | None = None  # memoised vectors for the conversations' memories
    bursty: bool = False  # the file's bursty variant: every sentence its own message


@dataclass(frozen=True, slots=True)
class Row:
    """One question, one variant."""

    variant: str
    sample_id: str
    question_index: int
    category: str
    pool: int
    relevant_in_pool: int
    kept: int
    kept_relevant: int
    recall_at_k: float  # evidence recall of the kept candidates' own turns
    recall_at: dict[int, float]  # budget -> evidence recall of the built context
    tokens_at: dict[int, int]  # budget -> tokens delivered
    # The selection's cost; a ``name@k`` row repeats its variant's (one scoring, two cuts):
    # do not add the two.
    prompt_tokens: int
    evaluated_tokens: int
    latency_s: float
    source: str  # model, fallback, passthrough


def _variants(cfg: SelectorEvalConfig) -> tuple[str, ...]:
    unknown = [v for v in cfg.variants if v not in VARIANTS]
    if unknown:
        raise TrainingInputError(f"unknown variant {unknown[0]!r}; known: {', '.join(VARIANTS)}")
    names = cfg.variants
    if cfg.adapter is None:
        names = tuple(v for v in names if v != "pointwise-lora")
    elif not cfg.adapter.is_file():
        raise TrainingInputError(f"--adapter {cfg.adapter} is not a file")
    if cfg.cross_encoder is None:
        names = tuple(v for v in names if v != CROSS_ENCODER)
    return names


class _Variants:
    """Each variant's selector and its own meter, on backends loaded once."""

    def __init__(self, cfg: SelectorEvalConfig, names: Sequence[str]) -> None:
        self._cfg = cfg
        self._pool = BackendPool(cfg.models_dir)
        self.meters = {name: Meter() for name in names}
        self.selectors: dict[str, Selector] = {}
        for name in names:
            self.selectors[name] = self._selector(name, 0.0)

    def _runtime(self, name: str) -> RoleRuntime:
        lora = self._cfg.adapter if name == "pointwise-lora" else None
        adapter = {} if lora is None else {"lora_path": lora}  # llamacpp's field
        backend = self._pool.get(
            backend_config(kind=self._cfg.backend_kind, model=self._cfg.model, **adapter)
        )
        return RoleRuntime(backend, self.meters[name], timeout_s=SELECT_TIMEOUT_S)

    def _selector(self, name: str, threshold: float) -> Selector:
        kind = name.removesuffix("-lora")  # pointwise-lora: the pointwise selector, adapted
        runtime = None
        if kind not in (FUSION, CROSS_ENCODER):  # those need no small model
            check_selector_backend(kind, self._cfg.backend_kind)
            runtime = self._runtime(name)
        settings = PointwiseSettings(  # the cross-encoder: its calibrated cut, and k (@k)
            self._cfg.weight,
            threshold,
            cross_encoder=self._cfg.cross_encoder,
            cross_encoder_threshold=None,
            cross_encoder_precision=self._cfg.cross_encoder_precision,
        )
        return build_selector(kind, runtime, settings)

    def calibrate(self, name: str, pools: Sequence[tuple[str, list[Candidate], set[str]]]) -> float:
        """The pointwise variant's threshold from tune-split pools, then used for selection."""
        selector = self.selectors[name]
        assert isinstance(selector, PointwiseSelector)
        scores: list[float] = []
        labels: list[bool] = []
        for question, pool, evidence in pools:
            scores += [f.score for f in selector.score(question, pool)]
            labels += [is_relevant(c, evidence) for c in pool]
        self.meters[name].reset()
        choice = calibrate_threshold(scores, labels)
        self.selectors[name] = self._selector(name, choice.threshold)
        return choice.threshold

    def close(self) -> None:
        self._pool.close()


@contextmanager
def _memory(
    sample: Conversation, cfg: SelectorEvalConfig, embedder: Embedder | None
) -> Iterator[Components]:
    """The conversation in a fresh model-free memory, as the benchmark ingests it."""
    with ingested(sample, TiermemConfig(embedder=cfg.embedder), embedder) as memory:
        yield memory.components


def _questions(sample: Conversation, limit: int | None) -> list[tuple[int, Question]]:
    """The headline questions, or ``limit`` of them evenly spaced over the file's order.

    A prefix would not do: LoCoMo lists its questions roughly by category, and the first 60
    of the test conversations hold no single-hop question at all.

    >>> qs = tuple(Question(f"q{i}", "a", ("D1:1",), "temporal") for i in range(10))
    >>> s = Conversation("s", "A", "B", (), qs)
    >>> [i for i, _ in _questions(s, 4)]
    [0, 2, 5, 7]
    """
    usable = [(i, q) for i, q in enumerate(sample.questions) if q.headline]
    if not limit or limit >= len(usable):
        return usable
    return [usable[j * len(usable) // limit] for j in range(limit)]


FIXED_K = "@k"  # suffix of a calibrated pointwise variant's rows cut at k instead


def _selections(
    variants: _Variants, name: str, question: str, pool: list[Candidate], k: int
) -> list[tuple[str, Selection]]:
    """The variant's selection, and for a pointwise variant with a calibrated threshold also
    its equal-K cut (``name@k``) of the same scores."""
    selector = variants.selectors[name]
    if isinstance(selector, FusedSelector) and selector.threshold > 0:
        cuts = selector.select_cuts([question], pool, k, (selector.threshold, 0.0))
        return [(name, cuts[0]), (name + FIXED_K, cuts[1])]
    return [(name, selector.select([question], pool, k))]


def _rows(
    variants: _Variants,
    name: str,
    c: Components,
    sample: Conversation,
    index: int,
    question: Question,
    pool: list[Candidate],
    cfg: SelectorEvalConfig,
) -> list[Row]:
    meter = variants.meters[name]
    before = meter.totals()
    started = time.perf_counter()
    selections = _selections(variants, name, question.question, pool, cfg.k)
    latency = time.perf_counter() - started
    after = meter.totals()
    evidence = set(question.evidence)
    rows = []
    for variant, selection in selections:
        kept = [cand for cand, _ in selection.kept]
        hits = [
            SearchHit(cand.item, score, ScoreExplanation(dict(cand.components), variant))
            for cand, score in selection.kept
        ]
        recall_at, tokens_at = {}, {}
        for budget in cfg.budgets:
            expansion = c.policy.delivery.expansion
            ctx = build_context(c, sample.sample_id, hits, budget, expansion)
            recall_at[budget] = evidence_recall(question.evidence, set(ctx.turn_ids))
            tokens_at[budget] = ctx.tokens
        own = {t for cand in kept for t in cand.source_turn_ids}
        rows.append(
            Row(
                variant=variant,
                sample_id=sample.sample_id,
                question_index=index,
                category=question.category,
                pool=len(pool),
                relevant_in_pool=sum(is_relevant(cand, evidence) for cand in pool),
                kept=len(kept),
                kept_relevant=sum(is_relevant(cand, evidence) for cand in kept),
                recall_at_k=evidence_recall(question.evidence, own),
                recall_at=recall_at,
                tokens_at=tokens_at,
                prompt_tokens=after["prompt_tokens"] - before["prompt_tokens"],
                evaluated_tokens=after["evaluated_tokens"] - before["evaluated_tokens"],
                latency_s=latency,
                source=selection.source,
            )
        )
    return rows


def summarise(rows: Sequence[Row], budgets: Sequence[int]) -> dict[str, dict[str, float]]:
    """Per variant: micro precision/recall/F1 of the kept candidates, mean evidence recall
    at K and at each budget with the mean tokens delivered, tokens and latency per query.

    >>> r = Row("fusion", "s", 0, "temporal", 4, 2, 2, 1, 0.5, {300: 1.0}, {300: 200}, 0, 0, 0, "")
    >>> s = summarise([r], [300])["fusion"]
    >>> (s["precision"], s["recall"], s["recall_at_300"], s["tokens_at_300"])
    (0.5, 0.5, 1.0, 200.0)
    """
    out: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(r.variant for r in rows):
        mine = [r for r in rows if r.variant == name]
        kept = sum(r.kept for r in mine)
        hit = sum(r.kept_relevant for r in mine)
        gold = sum(r.relevant_in_pool for r in mine)
        precision = hit / kept if kept else 0.0
        recall = hit / gold if gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        s = {
            "questions": float(len(mine)),
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "mean_kept": statistics.fmean(r.kept for r in mine),
            "recall_at_k": statistics.fmean(r.recall_at_k for r in mine),
            "prompt_tokens": statistics.fmean(r.prompt_tokens for r in mine),
            "evaluated_tokens": statistics.fmean(r.evaluated_tokens for r in mine),
            "latency_p50_s": statistics.median(r.latency_s for r in mine),
            "latency_p95_s": _p95([r.latency_s for r in mine]),
            "fallbacks": float(sum(r.source == "fallback" for r in mine)),
        }
        for b in budgets:
            s[f"recall_at_{b}"] = statistics.fmean(r.recall_at[b] for r in mine)
            s[f"tokens_at_{b}"] = statistics.fmean(r.tokens_at[b] for r in mine)
        out[name] = s
    return out


def _p95(values: Sequence[float]) -> float:
    """The 95th percentile (nearest rank).

    >>> _p95([float(i) for i in range(1, 21)])
    19.0
    """
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


def _table(summary: dict[str, dict[str, float]], cfg: SelectorEvalConfig) -> Table:
    variant = " (bursty variant)" if cfg.bursty else ""
    table = Table(title=f"Selectors on the {cfg.split} split{variant}, k = {cfg.k}")
    cols = ["variant", "q", "P", "R", "F1", "kept", f"recall@{cfg.k}"]
    cols += [f"recall@{b} (tok)" for b in cfg.budgets]
    cols += ["prompt tok", "evaluated tok", "p50 s", "p95 s", "fallbacks"]
    for col in cols:
        table.add_column(col, justify="right")
    for name, s in summary.items():
        cells = [name, f"{s['questions']:.0f}", f"{s['precision']:.2f}", f"{s['recall']:.2f}"]
        cells += [f"{s['f1']:.2f}", f"{s['mean_kept']:.1f}", f"{100 * s['recall_at_k']:.1f} %"]
        cells += [
            f"{100 * s[f'recall_at_{b}']:.1f} % ({s[f'tokens_at_{b}']:.0f})" for b in cfg.budgets
        ]
        cells += [f"{s['prompt_tokens']:.0f}", f"{s['evaluated_tokens']:.0f}"]
        cells += [f"{s['latency_p50_s']:.3f}", f"{s['latency_p95_s']:.3f}"]
        cells += [f"{s['fallbacks']:.0f}"]
        table.add_row(*cells)
    return table


def _calibrate(
    cfg: SelectorEvalConfig,
    samples: Sequence[Conversation],
    variants: _Variants,
    embedder: Embedder | None,
) -> dict[str, float]:
    names = [n for n in variants.selectors if n.startswith("pointwise")]
    if not cfg.calibrate_questions or not names:
        return {}
    (_, tune), *_ = split_items(samples, "tune")
    with _memory(tune, cfg, embedder) as c:
        pools = [
            (q.question, candidate_pool(c, tune.sample_id, q.question, cfg.k), set(q.evidence))
            for _, q in _questions(tune, cfg.calibrate_questions)
        ]
    return {name: variants.calibrate(name, pools) for name in names}


def run(cfg: SelectorEvalConfig, console: Console) -> dict[str, Any]:
    """Every variant on every question of the split; rows, summary and report under ``out``."""
    check_split(cfg.split)
    if cfg.questions is not None and cfg.questions < 1:
        raise TrainingInputError("questions must be positive (or None for all)")
    names = _variants(cfg)
    samples, _ = load_dataset(cfg.data)
    if cfg.bursty:  # split by the same positions; evidence becomes every part of a gold turn
        samples = [burst(s) for s in samples]
    tests = split_items(samples, cfg.split)
    cfg.out.mkdir(parents=True, exist_ok=True)
    rows_path = cfg.out / "rows.jsonl"
    rows_path.write_text("", encoding="utf-8")
    variants = _Variants(cfg, names)
    cache = cfg.embed_cache
    embedder = CachedEmbedder(build_embedder(cfg.embedder), cache) if cache else None
    rows: list[Row] = []
    try:
        thresholds = _calibrate(cfg, samples, variants, embedder)
        for _, sample in tests:
            with _memory(sample, cfg, embedder) as c:
                for index, question in _questions(sample, cfg.questions):
                    pool = candidate_pool(c, sample.sample_id, question.question, cfg.k)
                    for name in names:
                        mine = _rows(variants, name, c, sample, index, question, pool, cfg)
                        rows += mine
                        with rows_path.open("a", encoding="utf-8") as f:  # kept if stopped
                            f.writelines(json.dumps(asdict(row)) + "\n" for row in mine)
                    console.print(f"{sample.sample_id} q{index}: {len(rows)} rows")
        ran_in = {  # the dtype each cross-encoder ran in ("auto" resolved)
            name: s.precision
            for name, s in variants.selectors.items()
            if isinstance(s, CrossEncoderSelector)
        }
    finally:
        variants.close()
        if embedder is not None:
            embedder.close()
    summary = summarise(rows, cfg.budgets)
    result = {
        "config": {k: str(v) for k, v in asdict(cfg).items()},
        "thresholds": thresholds,
        "precision": ran_in,
        "summary": summary,
    }
    (cfg.out / "summary.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    console.print(_table(summary, cfg))
    if thresholds:
        console.print(f"calibrated thresholds (tune split): {thresholds}")
    for name, dtype in ran_in.items():
        console.print(f"{name} ran in {dtype}")
    return result


__all__ = ["FIXED_K", "VARIANTS", "Row", "SelectorEvalConfig", "run", "summarise"]
