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
from tiermem.slm.roles.pointwise import FusedSelector, PointwiseSettings

# What the model reads: (question, render_memory(candidate)). A change to either side of the
# pair is a new version, and a model trained on the old one is refused.
INPUT_VERSION = "pair-v1"
RECORD = "tiermem-selector.json"  # the training record, beside the weights
# Pairs a forward pass on a CPU. sentence-transformers sorts a pool by length before it
# batches it, and a batch is padded to its longest pair, so small batches compute fewer tokens.
# Measured on a 2-core AVX2 CPU, 20-pair pools of LoCoMo candidates (78 tokens a pair on
# average, 128 at most), p50 a pool: batches of 20 1,037 ms (6 layers) / 354 ms (2 layers); of
# 10 813 / 280; of 5 735 / 261; of 2 798 / 280. On a GPU one batch of 64 does better.
BATCH = 5
FORMAT = "tiermem-cross-encoder-v1"


@dataclass(frozen=True, slots=True)
class CrossEncoderRecord:
    """What serving needs of the training record."""

    input_version: str
    max_length: int
    threshold: float  # calibrated on the tune split; 0 keeps k


def pair(question: str, candidate: Candidate) -> tuple[str, str]:
    """What the cross-encoder reads of one candidate, in training and in serving."""
    return question, render_memory(candidate.item)


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
        self._lock = threading.Lock()

    @property
    def record(self) -> CrossEncoderRecord:
        return self._record

    @property
    def threshold(self) -> float:
        chosen = self._settings.cross_encoder_threshold
        return self._record.threshold if chosen is None else chosen

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                from sentence_transformers import CrossEncoder

                self._model = CrossEncoder(
                    str(self._dir),
                    max_length=self._record.max_length,
                    local_files_only=True,
                )
            return self._model

    def probabilities(self, question: str, candidates: Sequence[Candidate]) -> list[float]:
        model = self._loaded()
        batch = self._batch_size if model.device.type == "cpu" else 64
        pairs = [pair(question, c) for c in candidates]
        scores = model.predict(
            pairs, batch_size=batch, show_progress_bar=False, convert_to_numpy=True
        )
        return [float(s) for s in scores]


__all__ = [
    "FORMAT",
    "INPUT_VERSION",
    "RECORD",
    "CrossEncoderRecord",
    "CrossEncoderSelector",
    "pair",
    "read_record",
]
