"""The settings of a LoRA run, apart from the training code so that the CLI reads its
defaults without importing torch.

The defaults are sized for qwen0.5b on a 2-core CPU, under an hour: 1,500 examples (about
240 questions, one step each).

- Measured with these defaults on this machine, idle: 239 steps on 1,505 examples in 674 s
  (11.4 min with loading and export). The mean loss went from 0.67 over the first 20 steps to
  0.45-0.49 over the last 60 (the label prior's entropy is 0.65), and the adapter beat rank
  fusion on the held-out conversations (docs/decisions.md, "Selector").
- Measured earlier while other agents kept it busy (load average 3.5-7 on 2 cores): a step
  took 2.8 s in a profile and 4.7-19 s in a run of six steps, so 1,500 examples take up to
  50 minutes there.
- The earlier path (bfloat16 autocast, whole examples in batches of 4) took 20-36 s a step
  there; at a learning rate of 2e-4 its mean loss had only gone from 0.69 to 0.60 after 400
  examples, hence 5e-4.

>>> LoraSettings().rank, LoraSettings().target_modules
(8, ('q_proj', 'k_proj', 'v_proj', 'o_proj'))
"""

from __future__ import annotations

from dataclasses import dataclass

from tiermem.training import TrainingInputError

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
PRECISIONS = ("auto", "float32", "bfloat16")


@dataclass(frozen=True, slots=True)
class LoraSettings:
    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.05
    target_modules: tuple[str, ...] = DEFAULT_TARGETS
    learning_rate: float = 5e-4
    epochs: int = 1
    batch_size: int = 1  # questions per step (each with all its candidates, ~6 in train)
    max_examples: int | None = 1500  # whole questions drawn by the seed; None: all of it
    seed: int = 0
    device: str = "auto"  # auto: cuda when there is one, else cpu
    precision: str = "auto"  # the frozen base's dtype; auto: bfloat16 where computed natively
    checkpoint_every: int = 50  # steps
    warmup_ratio: float = 0.05

    def check(self) -> None:
        if self.rank < 1 or self.alpha <= 0 or not 0 <= self.dropout < 1:
            raise TrainingInputError("rank must be >= 1, alpha > 0 and dropout in [0, 1)")
        if self.learning_rate <= 0 or self.epochs < 1 or self.batch_size < 1:
            raise TrainingInputError("learning rate, epochs and batch size must be positive")
        if self.max_examples is not None and self.max_examples < 1:
            raise TrainingInputError("max examples must be positive")
        if not self.target_modules:
            raise TrainingInputError("name at least one target module")
        if self.precision not in PRECISIONS:
            raise TrainingInputError(f"precision is one of {', '.join(PRECISIONS)}")
        if self.checkpoint_every < 1:
            raise TrainingInputError("checkpoint every must be >= 1 step")


@dataclass(frozen=True, slots=True)
class CrossEncoderSettings:
    """A cross-encoder run (``tiermem train selector --arch cross-encoder``): MiniLM's weights
    with a fresh one-logit head, binary cross-entropy on (question, candidate) pairs.
    ``weight``: the rank-fusion weight its threshold is calibrated for (the selector's
    ``pointwise_weight``)."""

    learning_rate: float = 5e-5
    epochs: int = 1
    batch_size: int = 16  # pairs per step
    max_length: int = 256  # tokens of question and candidate together
    # the base's first N transformer layers (None: all six of MiniLM's); a CPU pays for each
    layers: int | None = None
    max_examples: int | None = None  # a seeded sample; None: all of it
    seed: int = 0
    weight: float = 0.3
    warmup_ratio: float = 0.1
    device: str = "auto"  # auto: cuda when there is one, else cpu

    def check(self) -> None:
        if self.learning_rate <= 0 or self.epochs < 1 or self.batch_size < 1:
            raise TrainingInputError("learning rate, epochs and batch size must be positive")
        if self.max_length < 16:
            raise TrainingInputError("max length must be at least 16 tokens")
        if self.max_examples is not None and self.max_examples < 1:
            raise TrainingInputError("max examples must be positive")
        if self.layers is not None and self.layers < 1:
            raise TrainingInputError("layers must be at least 1")
        if not 0 <= self.weight <= 1:
            raise TrainingInputError("weight must be in [0, 1]")


__all__ = ["DEFAULT_TARGETS", "PRECISIONS", "CrossEncoderSettings", "LoraSettings"]
