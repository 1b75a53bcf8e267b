"""``tiermem bench updates --generator MODEL``: what a model generator *answers* on the update
scenarios, not only what its context holds.

The first ``users`` scenarios are ingested model-free, and every question is asked through
``answer()`` with ``generator.kind = "model"`` on ``MODEL`` (and, with ``--generator-adapter``,
again with that GGUF LoRA on it, in the same run, on the same memories). An answer *names* a
value when the value (its leading article dropped) occurs in it as whole words, any case.
Reported per generator:

- ``new``: update questions whose answer names the current value (also by family,
  ``new/<family>``, and ``new/correction`` for a corrected plan);
- ``stale``: update questions whose answer names the old value and not the current one (a
  corrected plan has no old value asked about, so it counts only towards ``new``);
- ``before``: questions about the earlier value answered with it;
- ``unchanged``: facts only a look-alike touched, answered with their value;
- ``refused``: questions about facts the user never mentioned answered ``NOTHING_IN_MEMORY``,
  and ``refused wrongly``, answerable ones answered so.

>>> names("It is 9 April; it was 3 March before.", "9 April"), names("9 April", "19 April")
(True, False)
>>> names("Robin", "a data analyst"), names("I work as a data analyst.", "a data analyst")
(False, True)
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tiermem.bench.datasets.conversation import Conversation
from tiermem.bench.systems import Tiermem
from tiermem.bench.update_scenarios import FAMILIES
from tiermem.config import GeneratorConfig, LlamaCppConfig, TiermemConfig
from tiermem.embedding import Embedder
from tiermem.generator import NOTHING_IN_MEMORY

_ARTICLE = re.compile(r"^(a|an|the)\s+", re.IGNORECASE)


def names(answer: str, value: str) -> bool:
    """Whether ``answer`` holds ``value`` (its leading article dropped) as whole words."""
    core = _ARTICLE.sub("", value.strip())
    if not core:
        return False
    return re.search(rf"(?<!\w){re.escape(core)}(?!\w)", answer, re.IGNORECASE) is not None


@dataclass
class AnswerTally:
    """One generator's answers, by question group."""

    counts: dict[str, list[int]] = field(default_factory=dict)  # name -> [hits, asked]
    seconds: list[float] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)  # a few stale or wrong answers

    def count(self, name: str, hit: bool) -> None:
        tally = self.counts.setdefault(name, [0, 0])
        tally[0] += hit
        tally[1] += 1

    def row(self) -> dict[str, float]:
        out = {k: 100.0 * h / n if n else float("nan") for k, (h, n) in self.counts.items()}
        out.update({f"{k}_asked": float(n) for k, (_, n) in self.counts.items()})
        ordered = sorted(self.seconds)
        out["p50_s"] = ordered[len(ordered) // 2] if ordered else float("nan")
        return out


def score(tally: AnswerTally, conv: Conversation, text: str, question_index: int | None) -> None:
    """Count one answer: to the conversation's question at ``question_index``, or to a
    question about a fact never mentioned (``None``)."""
    refused = text.strip() == NOTHING_IN_MEMORY
    if question_index is None:
        tally.count("refused", refused)
        return
    q = conv.questions[question_index]
    tally.count("refused_wrongly", refused)
    if q.group == "update":
        before = {b.evidence: b.answer for b in conv.questions if b.group == "before"}
        old = before.get(q.evidence[:1])
        new = names(text, q.answer)
        tally.count("new", new)
        family = next((f.name for f in FAMILIES if f.current == q.question), "correction")
        tally.count(f"new/{family}", new)  # a tuned generator learned some families only
        if old is not None:
            stale = names(text, old) and not new
            tally.count("stale", stale)
            if stale and len(tally.examples) < 8:
                tally.examples.append(f"{q.question} -> {text!r} (now {q.answer}, was {old})")
    elif q.group in ("before", "unchanged"):
        tally.count(q.group, names(text, q.answer))


def generator_config(model: str, adapter: Path | None) -> GeneratorConfig:
    return GeneratorConfig(kind="model", backend=LlamaCppConfig(model=model, lora_path=adapter))


def ask(
    conv: Conversation,
    questions: Sequence[str],
    config: TiermemConfig,
    state: Path,
    embedder: Embedder | None,
) -> list[tuple[str, float]]:
    """``conv`` ingested under ``config`` (its generator answers), then each question asked
    through ``answer()``: the text and the seconds it took."""
    system = Tiermem(config, state, 10, embedder)
    out = []
    try:
        system.build(conv)
        memory = system.memory
        assert memory is not None
        for question in questions:
            started = time.perf_counter()
            text = memory.answer(question, conv.sample_id).text
            out.append((text, time.perf_counter() - started))
    finally:
        system.close()
    return out


def answer_sample(
    convs: Sequence[Conversation],
    absent: Sequence[Sequence[str]],
    base: TiermemConfig,
    generators: dict[str, GeneratorConfig],
    state: Path,
    embedder: Embedder,
) -> dict[str, AnswerTally]:
    """Every question of ``convs`` (and their never-mentioned ones, ``absent``) answered by
    each generator, on memories ingested once per conversation and generator."""
    tallies = {name: AnswerTally() for name in generators}
    for name, generator in generators.items():
        config = base.model_copy(update={"generator": generator})
        for conv, never in zip(convs, absent, strict=True):
            asks: list[tuple[str, int | None]] = [
                (q.question, i) for i, q in enumerate(conv.questions)
            ]
            asks += [(question, None) for question in never]
            answered = ask(conv, [q for q, _ in asks], config, state / name, embedder)
            for (_, index), (text, seconds) in zip(asks, answered, strict=True):
                tallies[name].seconds.append(seconds)
                score(tallies[name], conv, text, index)
    return tallies


def print_answers(result: dict[str, Any], users: int, console: Console) -> None:
    table = Table(title=f"answers through the model generator (first {users} users), %")
    cols = (
        "generator",
        "new",
        "stale",
        "before",
        "unchanged",
        "refused",
        "refused wrongly",
        "p50 s",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "generator" else "right")
    for name, r in result.items():
        table.add_row(
            name,
            *(
                f"{r.get(k, float('nan')):.1f}"
                for k in ("new", "stale", "before", "unchanged", "refused", "refused_wrongly")
            ),
            f"{r['p50_s']:.1f}",
        )
    console.print(table)
    for name, r in result.items():
        parts = [
            f"{key[4:]} {r[key]:.0f} % of {r[key + '_asked']:.0f}"
            for key in sorted(r)
            if key.startswith("new/") and not key.endswith("_asked")
        ]
        console.print(f"{name}: the new value, by family: " + ", ".join(parts), highlight=False)


__all__ = [
    "AnswerTally",
    "answer_sample",
    "ask",
    "generator_config",
    "names",
    "print_answers",
    "score",
]
