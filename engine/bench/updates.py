"""``tiermem bench updates``: does the current value of a changed fact reach the context?

On the scenarios of ``tiermem.bench.update_scenarios`` (seeded, written for tiermem), each
system builds every user's memory and delivers a context per question and budget, as
``bench locomo`` does. Per path and budget it reports:

- ``latest``: the share of ``update`` questions whose newest statement was delivered;
- ``stale-only``: the share of ``update`` questions whose context holds the old statement but
  not the new one (what makes an answer wrong with confidence);
- ``before`` and ``unchanged``: the share whose one evidence turn was delivered (the old value
  asked for itself; a fact that only a distractor seemed to change);
- ``refused`` / ``refused-wrongly``: of ``answer()`` on questions about what was never said
  (``absent``), the share answered ``NOTHING_IN_MEMORY``; and of the answerable ones;
- ``answer()``: the same ``latest`` / ``stale-only`` / ``before`` / ``unchanged`` shares for
  the context ``answer()`` hands its generator (``generator.max_memories`` hits within
  ``delivery.answer_budget_tokens``): what a generator can answer from.

Paths: ``tiermem`` as configured (``context()`` offers later statements at a small share),
``tiermem+later`` at the share ``answer()`` offers them, in ``context()`` too. Where
the writer runs (``--model``, ``tiermem+writer``, its [slm] settings from ``--config``) with
``slm.writer_supersedes`` on, its supersede decisions are scored against the labelled
changes: precision (a supersede that hides a fact still true is the costly error) and
recall. With it off (the default) none is applied, and the bench counts the decisions that
were not (``unapplied``; ``supersedes_applied`` in the JSON says which).
naive-rag and bm25 are measured in the same run on the same contexts' budget.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tiermem.bench.datasets.conversation import Conversation, Question
from tiermem.bench.systems import BM25, NaiveRAG, System, Tiermem
from tiermem.bench.update_scenarios import FAMILIES, Update, update_scenarios
from tiermem.config import EmbedderConfig, LlamaCppConfig, RoleConfig, TiermemConfig
from tiermem.embedding import Embedder, build_embedder
from tiermem.generator import NOTHING_IN_MEMORY
from tiermem.memory import Memory
from tiermem.types import SearchFilters

# tiermem as configured; with the later statements that answer() offers, in context() too; and
# with the writer on --model
TIERMEM, LATER, WRITER = "tiermem", "tiermem+later", "tiermem+writer"


@dataclass(frozen=True)
class UpdatesConfig:
    out: Path
    budgets: tuple[int, ...] = (300, 600, 1200, 2400)
    users: int = 24
    seed: int = 7
    model: str | None = None  # the writer's model (llama.cpp alias or GGUF): adds that path
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    tiermem: TiermemConfig = field(default_factory=TiermemConfig)  # its [delivery], [slm], ...


@dataclass
class Tally:
    """Counts for one system at one budget."""

    update: int = 0
    latest: int = 0
    stale_only: int = 0
    before: int = 0
    before_hit: int = 0
    unchanged: int = 0
    unchanged_hit: int = 0
    tokens: int = 0
    questions: int = 0

    def add(self, q: Question, delivered: set[str], tokens: int) -> None:
        self.questions += 1
        self.tokens += tokens
        if q.question_type == "update":
            *old, new = q.evidence
            self.update += 1
            self.latest += new in delivered
            self.stale_only += new not in delivered and bool(delivered.intersection(old))
        elif q.question_type == "before":
            self.before += 1
            self.before_hit += q.evidence[-1] in delivered
        elif q.question_type == "unchanged":
            self.unchanged += 1
            self.unchanged_hit += q.evidence[-1] in delivered

    def row(self) -> dict[str, float]:
        def pct(a: int, b: int) -> float:
            return 100.0 * a / b if b else float("nan")

        return {
            "latest": pct(self.latest, self.update),
            "stale_only": pct(self.stale_only, self.update),
            "before": pct(self.before_hit, self.before),
            "unchanged": pct(self.unchanged_hit, self.unchanged),
            "tokens": self.tokens / self.questions if self.questions else 0.0,
            "questions": float(self.questions),
        }


@dataclass
class Supersedes:
    """A writer's supersede decisions against the labelled changes."""

    right: int = 0
    wrong: int = 0
    changes: int = 0
    found: int = 0
    unapplied: int = 0  # update decisions made with ``slm.writer_supersedes`` off
    wrong_examples: list[str] = field(default_factory=list)
    families: dict[str, list[int]] = field(default_factory=dict)  # family -> [found, changes]

    def score(self, memory: Memory, user: str, updates: Sequence[Update]) -> None:
        self.unapplied += memory.meter.event_count("writer", "replaces_off")
        entries = memory.get_all(user, SearchFilters(include_superseded=True))
        by_id = {e.id: e for e in entries}
        pairs = {(u.old_turn, u.new_turn) for u in updates}
        hit: set[tuple[str, str]] = set()
        for old in entries:
            if old.superseded_by is None or old.superseded_by not in by_id:
                continue
            new = by_id[old.superseded_by]
            matched = {
                (o, n) for o, n in pairs if o in old.source_turn_ids and n in new.source_turn_ids
            }
            if matched:
                self.right += 1
                hit |= matched
            else:
                self.wrong += 1
                self.wrong_examples.append(f"{user}: {old.text!r} -> {new.text!r}")
        self.changes += len(pairs)
        self.found += len(hit)
        for u in updates:
            tally = self.families.setdefault(u.family, [0, 0])
            tally[0] += (u.old_turn, u.new_turn) in hit
            tally[1] += 1

    def row(self) -> dict[str, float]:
        made = self.right + self.wrong
        return {
            "supersedes": float(made),
            "precision": 100.0 * self.right / made if made else float("nan"),
            "recall": 100.0 * self.found / self.changes if self.changes else float("nan"),
            "unapplied": float(self.unapplied),
        }


def absent_questions(conv: Conversation) -> list[str]:
    """Questions about facts this user never mentioned (the families their scenario left
    out), for ``answer()`` to decline."""
    said = " ".join(t.text for s in conv.sessions for t in s.turns)
    return [f.current for f in FAMILIES if not any(v in said for v in f.values)][:2]


def _tiermem_config(cfg: UpdatesConfig, path: str) -> TiermemConfig:
    """The model-free path, the same with ``answer()``'s later statements in ``context()``,
    or the writer on ``cfg.model`` (the other roles model-free)."""
    base = cfg.tiermem.model_copy(update={"embedder": cfg.embedder})
    if path == LATER:
        delivery = base.delivery
        later = delivery.model_copy(update={"later": delivery.answer_later})
        return base.model_copy(update={"delivery": later})
    if path != WRITER or cfg.model is None:
        return base
    off = RoleConfig(enabled=False)
    backend = LlamaCppConfig(model=cfg.model)
    writer = base.slm.writer.model_copy(update={"enabled": True, "backend": None})
    roles = {"backend": backend, "controller": off, "selector": off, "writer": writer}
    return base.model_copy(update={"slm": base.slm.model_copy(update=roles)})


def run_updates(cfg: UpdatesConfig, console: Console) -> dict[str, Any]:
    """Every path on every scenario; the figures, also written to ``OUT/updates.json``."""
    convs, labels = update_scenarios(cfg.seed, cfg.users)
    embedder = build_embedder(cfg.embedder)
    paths = [TIERMEM, LATER, *([WRITER] if cfg.model else []), "naive-rag", "bm25"]
    tallies = {p: {b: Tally() for b in cfg.budgets} for p in paths}
    supersedes = {p: Supersedes() for p in paths if p.startswith(TIERMEM)}
    refusals = {p: [0, 0, 0, 0] for p in supersedes}  # absent refused/asked, answerable same
    answers = {p: Tally() for p in supersedes}  # what answer() hands its generator
    cfg.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(cfg.out / "state", ignore_errors=True)  # a run builds its memories anew
    for path in paths:
        for conv in convs:
            system = _system(path, cfg, embedder)
            system.build(conv)
            for q in conv.questions:
                for budget, got in zip(
                    cfg.budgets, system.deliver(q.question, cfg.budgets), strict=True
                ):
                    tallies[path][budget].add(q, set(got.turn_ids), got.tokens)
            if isinstance(system, Tiermem) and system.memory is not None:
                memory = system.memory
                supersedes[path].score(memory, conv.sample_id, labels[conv.sample_id])
                counts = refusals[path]
                for question in absent_questions(conv):
                    counts[0] += memory.answer(question, conv.sample_id).text == NOTHING_IN_MEMORY
                    counts[1] += 1
                for q in conv.questions:
                    answered = memory.answer(q.question, conv.sample_id)
                    answers[path].add(q, set(answered.source_turns), answered.context_tokens)
                    counts[2] += answered.text == NOTHING_IN_MEMORY
                    counts[3] += 1
            system.close()
    result: dict[str, Any] = {
        "scenarios": {"users": cfg.users, "seed": cfg.seed, "questions": _counts(convs)},
        "curve": {p: {str(b): t.row() for b, t in by.items()} for p, by in tallies.items()},
        "answer": {p: t.row() for p, t in answers.items()},
        "supersede": {p: s.row() for p, s in supersedes.items() if p == WRITER},
        "supersedes_applied": cfg.tiermem.slm.writer_supersedes,
        "wrong_supersedes": {p: s.wrong_examples[:10] for p, s in supersedes.items()},
        # per family, [labelled changes found, labelled changes]
        "supersede_families": {p: s.families for p, s in supersedes.items() if p == WRITER},
        "refusal": {
            p: {"refused": 100.0 * c[0] / max(c[1], 1), "refused_wrongly": 100.0 * c[2] / c[3]}
            for p, c in refusals.items()
        },
    }
    (cfg.out / "updates.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    _print(result, cfg, console)
    return result


def _system(path: str, cfg: UpdatesConfig, embedder: Embedder) -> System:
    if path == "naive-rag":
        return NaiveRAG(embedder, 10)
    if path == "bm25":
        return BM25(10)
    return Tiermem(_tiermem_config(cfg, path), cfg.out / "state" / path, 10, embedder)


def _counts(convs: Sequence[Conversation]) -> dict[str, int]:
    out: dict[str, int] = {}
    for conv in convs:
        for q in conv.questions:
            out[q.group] = out.get(q.group, 0) + 1
    return out


def _print(result: dict[str, Any], cfg: UpdatesConfig, console: Console) -> None:
    counts = result["scenarios"]["questions"]
    console.print(
        f"update scenarios: {cfg.users} users, seed {cfg.seed}; questions: "
        + ", ".join(f"{n} {g}" for g, n in sorted(counts.items()))
    )
    table = Table(title="the newest statement in the context (%), by budget")
    for col in ("path", "budget", "latest", "stale-only", "before", "unchanged", "tokens"):
        table.add_column(col, justify="left" if col == "path" else "right")
    for path, by in result["curve"].items():
        for budget, r in by.items():
            table.add_row(
                path,
                budget,
                f"{r['latest']:.1f}",
                f"{r['stale_only']:.1f}",
                f"{r['before']:.1f}",
                f"{r['unchanged']:.1f}",
                f"{r['tokens']:.0f}",
            )
    console.print(table)
    for path, r in result["answer"].items():
        console.print(
            f"{path}: answer()'s context holds the newest statement for {r['latest']:.1f} % of "
            f"update questions, only the old one for {r['stale_only']:.1f} %, the earlier value "
            f"for {r['before']:.1f} % of before questions ({r['tokens']:.0f} tokens)"
        )
    for path, r in result["refusal"].items():
        console.print(
            f"{path}: answer() says memory holds nothing for {r['refused']:.1f} % of questions "
            f"about what was never said, and for {r['refused_wrongly']:.1f} % of answerable ones"
        )
    for path, r in result["supersede"].items():
        if not result["supersedes_applied"]:
            console.print(
                f"{path}: the writer's supersedes are off (slm.writer_supersedes); "
                f"{r['unapplied']:.0f} of its update decisions were not applied"
            )
            continue
        console.print(
            f"{path}: {r['supersedes']:.0f} supersedes, precision {r['precision']:.1f} %, "
            f"recall {r['recall']:.1f} % of the labelled changes"
        )
