"""The cross-encoder selector: a fine-tuned MiniLM reads the question and one candidate
together and gives P(relevant), for the whole pool in one call (small batches on a CPU).

The model directory comes from ``tiermem train selector --arch cross-encoder``: the weights
(a sentence-transformers ``CrossEncoder``) and :data:`RECORD`, the training record, which holds
the input version the model was trained on, the longest input in tokens, and the threshold
calibrated on the tune split. A missing directory, one without a record, or one trained on
another input version is a ``ConfigError`` naming what to do.

Probabilities are fused with the first-stage rank exactly as the pointwise selector's are
(:class:`~tiermem.slm.roles.pointwise.FusedSelector`): the safe weight bound holds, and the
kept candidates are those reaching the threshold (an adaptive K), at most ``k``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiermem.errors import ConfigError
from tiermem.render import render_memory
from tiermem.roles.plan import Candidate
from tiermem.slm.cpu import computes_bfloat16
from tiermem.slm.roles.pointwise import FusedSelector, PointwiseSettings

# What the model reads: (question, render_memory(candidate)). A change to either side of the
# pair is a new version, and a model trained on the old one is refused.
INPUT_VERSION = "pair-v1"
RECORD = "tiermem-selector.json"  # the training record, beside the weights
# Pairs a forward pass in float32 on a CPU. sentence-transformers sorts a pool by length before
# it batches it, and a batch is padded to its longest pair, so small batches compute fewer
# tokens. Measured on a 2-core AVX2 CPU, 20-pair pools of LoCoMo candidates (78 tokens a pair on
# average, 128 at most), p50 a pool: batches of 20 1,037 ms (6 layers) / 354 ms (2 layers); of
# 10 813 / 280; of 5 735 / 261; of 2 798 / 280. In bfloat16 (a CPU with AMX) and on a GPU the
# whole pool goes in one batch (WHOLE): on a 2-core AVX-512/AMX CPU, 2 layers, bfloat16, p50 of
# LoCoMo / LongMemEval-S pools: batches of 5 73 / 81 ms, of 10 61 / 74, of 20 59 / 61.
BATCH = 5
WHOLE = 64
FORMAT = "tiermem-cross-encoder-v1"
PRECISIONS = ("auto", "float32", "bfloat16")


@dataclass(frozen=True, slots=True)
class CrossEncoderRecord:
    """What serving needs of the training record."""

    input_version: str
    max_length: int
    threshold: float  # calibrated on the tune split; 0 keeps k


def pair(question: str, candidate: Candidate) -> tuple[str, str]:
    """What the cross-encoder reads of one candidate, in training and in serving."""
    return question, render_memory(candidate.item)


def serving_precision(setting: str, device: str, flags: frozenset[str] | None = None) -> str:
    """The dtype the model runs in. ``auto``: bfloat16 on a CPU that computes it in hardware
    (:func:`~tiermem.slm.cpu.computes_bfloat16`), float32 elsewhere and on a GPU (not
    measured there). A CPU without it emulates bfloat16, slower than float32.

    >>> serving_precision("auto", "cpu", frozenset({"avx2"})), serving_precision("auto", "cuda")
    ('float32', 'float32')
    >>> serving_precision("auto", "cpu", frozenset({"avx512_bf16"}))
    'bfloat16'
    """
    if setting != "auto":
        return setting
    return "bfloat16" if device == "cpu" and computes_bfloat16(flags) else "float32"


def one_blas_thread() -> None:
    """Give numpy's BLAS (OpenBLAS, MKL) one thread, process-wide; torch keeps its own threads.
    After a multi-threaded BLAS call OpenBLAS's workers spin for a while, and the first
    stage's vector search (numpy, in qdrant-client's local mode) leaves them spinning when the
    cross-encoder starts: on two cores that doubled its time. Measured in ``bench selector``
    on LoCoMo's test pools (2 layers, bfloat16, 2-core AVX-512 CPU): 136 ms p50 a pool, 74 ms
    with one BLAS thread. Other numpy code in the process gets one BLAS thread too."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


def read_record(directory: Path) -> CrossEncoderRecord:
    """The training record of a cross-encoder directory, checked; ``ConfigError`` otherwise."""
    directory = directory.expanduser()
    train = "train one with `tiermem train selector --arch cross-encoder`"
    if not directory.is_dir():
        raise ConfigError(f"no cross-encoder model at {directory}: {train}")
    try:
        raw = json.loads((directory / RECORD).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{directory} has no {RECORD}: not a tiermem cross-encoder") from exc
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {directory / RECORD}: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ConfigError(f"{directory / RECORD} is not a {FORMAT} record")
    version = raw.get("input_version")
    if version != INPUT_VERSION:
        raise ConfigError(
            f"the cross-encoder at {directory} was trained on input {version!r}, this tiermem "
            f"serves {INPUT_VERSION!r}: retrain it ({train})"
        )
    try:
        return CrossEncoderRecord(version, int(raw["max_length"]), float(raw["threshold"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{directory / RECORD} lacks {exc}") from exc


class CrossEncoderSelector(FusedSelector):
    """Scores the pool with the cross-encoder at ``settings.cross_encoder``. The model loads
    on first use (the record is checked at once); its threshold is the calibrated one unless
    ``settings.cross_encoder_threshold`` sets another."""

    name = "cross-encoder-selector"

    def __init__(self, settings: PointwiseSettings, batch_size: int = BATCH) -> None:
        super().__init__(settings)
        if settings.cross_encoder is None:
            raise ConfigError(
                "selector_mode 'cross-encoder' needs slm.cross_encoder, the model directory"
            )
        self._dir = settings.cross_encoder.expanduser()
        self._record = read_record(self._dir)
        self._batch_size = batch_size
        self._model: Any = None
        if settings.cross_encoder_precision not in PRECISIONS:
            raise ConfigError(
                f"unknown cross-encoder precision {settings.cross_encoder_precision!r}; "
                f"known: {', '.join(PRECISIONS)}"
            )
        self._precision = ""  # decided on load, by the device
        self._lock = threading.Lock()

    @property
    def record(self) -> CrossEncoderRecord:
        return self._record

    @property
    def threshold(self) -> float:
        chosen = self._settings.cross_encoder_threshold
        return self._record.threshold if chosen is None else chosen

    @property
    def precision(self) -> str:
        """The dtype the model runs in (decided when it loads, by its device)."""
        self._loaded()
        return self._precision

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                from sentence_transformers import CrossEncoder

                model = CrossEncoder(
                    str(self._dir),
                    max_length=self._record.max_length,
                    local_files_only=True,
                )
                setting = self._settings.cross_encoder_precision
                self._precision = serving_precision(setting, model.device.type)
                if model.device.type == "cpu":
                    one_blas_thread()
                if self._precision == "bfloat16":
                    import torch

                    model.model.to(torch.bfloat16)
                self._model = model
            return self._model

    def probabilities(self, question: str, candidates: Sequence[Candidate]) -> list[float]:
        model = self._loaded()
        small = model.device.type == "cpu" and self._precision == "float32"
        batch = self._batch_size if small else WHOLE
        pairs = [pair(question, c) for c in candidates]
        scores = model.predict(
            pairs, batch_size=batch, show_progress_bar=False, convert_to_numpy=True
        )
        return [float(s) for s in scores]


__all__ = [
    "FORMAT",
    "INPUT_VERSION",
    "PRECISIONS",
    "RECORD",
    "CrossEncoderRecord",
    "CrossEncoderSelector",
    "one_blas_thread",
    "pair",
    "read_record",
    "serving_precision",
]
