"""``tiermem bench updates --generator MODEL``: what a model generator *answers* on the update
scenarios, not only what its context holds.

The first ``users`` scenarios are ingested model-free, and every question is asked through
``answer()`` with ``generator.kind = "model"`` on ``MODEL`` (and, with ``--generator-adapter``,
again with that GGUF LoRA on it, in the same run, on the same memories). An answer *names* a
value when the value (its leading article dropped) occurs in it as whole words, any case.
Reported per generator:

- ``new``: update questions whose answer gives the current value: names it, before the old
  one where it names both (also by family, ``new/<family>``, and ``new/correction`` for a
  corrected plan);
- ``stale``: update questions whose answer gives the old value: names it, and not the
  current one before it (a corrected plan has no old value asked about, so it counts only
  towards ``new``);
- ``before``: questions about the earlier value answered with it;
- ``unchanged``: facts only a look-alike touched, answered with their value;
- ``refused``: questions about facts the user never mentioned answered ``NOTHING_IN_MEMORY``
  (also by family, ``refused/<family>``), and ``refused wrongly``, answerable ones answered so;
- ``fell back``: calls that failed (a timeout, output cut at the token budget) and fell back
  to the extractive answer, which quotes the whole context: each is scored a miss, never new.

>>> names("It is 9 April; it was 3 March before.", "9 April"), names("9 April", "19 April")
(True, False)
>>> names("Robin", "a data analyst"), names("I work as a data analyst.", "a data analyst")
(False, True)
"""

from __future__ import annotations

import re
import shutil
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tiermem.bench import BenchInputError
from tiermem.bench.datasets.conversation import Conversation
from tiermem.bench.systems import Tiermem
from tiermem.bench.update_scenarios import FAMILIES
from tiermem.config import GeneratorConfig, LlamaCppConfig, TiermemConfig
from tiermem.embedding import Embedder
from tiermem.errors import InvalidInputError
from tiermem.generator import NOTHING_IN_MEMORY

_ARTICLE = re.compile(r"^(a|an|the)\s+", re.IGNORECASE)


def where(answer: str, value: str) -> int | None:
    """Where ``value`` (its leading article dropped) first occurs in ``answer`` as whole
    words, any case; ``None`` if it does not."""
    core = _ARTICLE.sub("", value.strip())
    if not core:
        return None
    found = re.search(rf"(?<!\w){re.escape(core)}(?!\w)", answer, re.IGNORECASE)
    return found.start() if found else None


def names(answer: str, value: str) -> bool:
    """Whether ``answer`` holds ``value`` (its leading article dropped) as whole words."""
    return where(answer, value) is not None


def answers_with(answer: str, new: str, old: str | None) -> bool:
    """Whether ``answer`` gives ``new`` as the value: it names it, before ``old`` where it
    names both ("Cork; it was Graz before" gives Cork).

    >>> answers_with("Graz; it was Cork before.", "Graz", "Cork")
    True
    >>> answers_with("Cork; it was Graz before.", "Graz", "Cork")
    False
    """
    at_new = where(answer, new)
    at_old = where(answer, old) if old else None
    return at_new is not None and (at_old is None or at_new < at_old)


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
        out["p50_s"] = statistics.median(self.seconds) if self.seconds else float("nan")
        return out


def _family(question: str) -> str:
    return next((f.name for f in FAMILIES if f.current == question), "correction")


def score(
    tally: AnswerTally,
    conv: Conversation,
    asked: tuple[str, int | None],
    text: str,
    fell_back: bool = False,
) -> None:
    """Count one answer to ``asked``: (question, its index in the conversation), or (a
    question about a fact never mentioned, ``None``). An answer that fell back to the
    extractive one is a miss."""
    question, index = asked
    tally.count("fell_back", fell_back)
    if fell_back:
        text = ""
    refused = text.strip() == NOTHING_IN_MEMORY
    if index is None:
        tally.count("refused", refused)
        tally.count(f"refused/{_family(question)}", refused)
        return
    q = conv.questions[index]
    tally.count("refused_wrongly", refused)
    if q.group == "update":
        before = {b.evidence: b.answer for b in conv.questions if b.group == "before"}
        old = before.get(q.evidence[:1])
        new = answers_with(text, q.answer, old)
        tally.count("new", new)
        tally.count(f"new/{_family(q.question)}", new)  # a tuned generator learned some only
        if old is not None:
            stale = answers_with(text, old, q.answer)
            tally.count("stale", stale)
            if stale and len(tally.examples) < 8:
                tally.examples.append(f"{q.question} -> {text!r} (now {q.answer}, was {old})")
    elif q.group in ("before", "unchanged"):
        tally.count(q.group, names(text, q.answer))


def generator_config(
    model: str, adapter: Path | None, base: GeneratorConfig | None = None
) -> GeneratorConfig:
    """``base`` (its memories, support floor, timeout) answering on ``model`` in-process,
    with the GGUF LoRA ``adapter`` if given."""
    backend = LlamaCppConfig(model=model, lora_path=adapter)
    return (base or GeneratorConfig()).model_copy(update={"kind": "model", "backend": backend})


def check_adapter(adapter: Path | None) -> None:
    """A named adapter must be a file, said before any ingestion."""
    if adapter is not None and not adapter.expanduser().is_file():
        raise InvalidInputError(f"the generator's adapter {adapter} is not a file")


@dataclass(frozen=True, slots=True)
class Answered:
    text: str
    seconds: float
    fell_back: bool  # the model call failed: the text is the extractive answer


def ask(
    conv: Conversation,
    questions: Sequence[str],
    config: TiermemConfig,
    state: Path,
    embedder: Embedder | None,
) -> list[Answered]:
    """``conv`` ingested under ``config`` (its generator answers) in a fresh ``state``, then
    each question asked through ``answer()``."""
    shutil.rmtree(state / conv.sample_id, ignore_errors=True)  # the same memories every run
    system = Tiermem(config, state, 10, embedder)
    out = []
    try:
        system.build(conv)
        memory = system.memory
        if memory is None:
            raise BenchInputError(f"{conv.sample_id}: no memory was built")
        meter = memory.components.meter
        for question in questions:
            fallbacks = meter.totals()["fallbacks"]
            started = time.perf_counter()
            text = memory.answer(question, conv.sample_id).text
            seconds = time.perf_counter() - started
            out.append(Answered(text, seconds, meter.totals()["fallbacks"] > fallbacks))
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
    for number, (name, generator) in enumerate(generators.items()):
        config = base.model_copy(update={"generator": generator})
        for conv, never in zip(convs, absent, strict=True):
            asks: list[tuple[str, int | None]] = [
                (q.question, i) for i, q in enumerate(conv.questions)
            ]
            asks += [(question, None) for question in never]
            # a folder by number: a model may be named by an absolute GGUF path
            answered = ask(conv, [q for q, _ in asks], config, state / f"g{number}", embedder)
            for asked, got in zip(asks, answered, strict=True):
                tallies[name].seconds.append(got.seconds)
                score(tallies[name], conv, asked, got.text, got.fell_back)
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
        "fell back",
        "p50 s",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "generator" else "right")
    for name, r in result.items():
        table.add_row(
            name,
            *(
                f"{r.get(k, float('nan')):.1f}"
                for k in (
                    "new",
                    "stale",
                    "before",
                    "unchanged",
                    "refused",
                    "refused_wrongly",
                    "fell_back",
                )
            ),
            f"{r['p50_s']:.1f}",
        )
    console.print(table)
    for name, r in result.items():
        for what, prefix in (("the new value", "new/"), ("refused", "refused/")):
            parts = [
                f"{key[len(prefix) :]} {r[key]:.0f} % of {r[key + '_asked']:.0f}"
                for key in sorted(r)
                if key.startswith(prefix) and not key.endswith("_asked")
            ]
            console.print(f"{name}: {what}, by family: " + ", ".join(parts), highlight=False)


__all__ = [
    "AnswerTally",
    "Answered",
    "answer_sample",
    "answers_with",
    "ask",
    "check_adapter",
    "generator_config",
    "names",
    "print_answers",
    "score",
]
