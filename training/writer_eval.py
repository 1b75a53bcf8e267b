"""``tiermem bench writer``: the writer's facts against the gold observations, base beside LoRA.

The windows are the writer's training windows of held-out conversations
(:func:`tiermem.training.writer_data.observation_windows`: a session is one ``add()``, small
talk dropped by the write path's rules, chunks of kept turns, the related earlier turns and
gold facts shown), so each is the prompt the served writer sends, and its gold is the
observations whose last source turn falls in it. Each variant (``base``: the model as
prompted; ``lora``: with ``--adapter``) writes every window once, through the role's runtime
and its schema; the same windows for each, in one run.

What is scored is what the write path would store (:class:`tiermem.slm.roles.writer.SLMWriter`):
an output naming a turn or memory that was not shown is thrown away whole (``invalid``, as
an output that does not parse); a written speaker label is split off, the cited turns are
corrected to the user's turn where it cites only another's echo, and an entry that copies a
turn of the window, of its context or a stored turn shown is dropped (``copies``). A kept
fact matches a gold one when it cites one of the same turns and says the same thing (the
embedder's cosine at least ``MATCH_COSINE``), one to one, best first. Reported per variant:
precision and recall of the facts, the share that name the speaker of a turn they cite
(``speaker``), copies, invalid outputs, calls per kept turn, tokens per call, and latency
p50 / p95.

Supersedes are scored on ``tiermem bench updates``' own users (``updates`` of them, seed 7),
on the windows that state a labelled change, built the same way (the memories shown hold the
earlier statements' turns and their gold facts; supersedes made in other windows are not
counted). A supersede counts where the writer's own checks keep it (in range, not a copy,
grounded in the turn it cites; the resolver's similarity check is not applied), as if
``slm.writer_supersedes`` were on (by default the write path applies none); it is right
when the memory it replaces comes from the older statement and it cites the new one.
Reported: supersedes made, precision, recall of the labelled changes, and how many of them had
the older statement among the memories shown (no writer can replace what it is not shown).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from tiermem.bench.datasets import load_dataset
from tiermem.bench.stats import percentile
from tiermem.bench.update_scenarios import scenarios
from tiermem.bench.updates import UpdatesConfig
from tiermem.config import EmbedderConfig, backend_config
from tiermem.embedding import Embedder, EmbedMode, build_embedder
from tiermem.errors import SLMError
from tiermem.slm.meter import Meter
from tiermem.slm.prompts import writer
from tiermem.slm.registry import BackendPool
from tiermem.slm.roles.common import RoleRuntime
from tiermem.slm.roles.writer import cited_speaker, copy_of, grounded
from tiermem.training import TrainingInputError
from tiermem.training.dataset import SPLITS
from tiermem.training.writer_data import WriterWindow, observation_windows, update_windows
from tiermem.types import Turn

VARIANTS = ("base", "lora")
MATCH_COSINE = 0.6  # a paraphrase of the same fact; checked on LoCoMo's observations
WRITE_TIMEOUT_S = 600.0  # per window: a slow CPU must not turn into fallbacks


@dataclass(frozen=True, slots=True)
class WriterEvalConfig:
    data: Path
    out: Path
    model: str = "qwen0.5b"
    adapter: Path | None = None  # a GGUF LoRA on ``model``; without it no ``lora``
    backend_kind: str = "llamacpp"  # a registered backend kind (llamacpp takes the adapter)
    splits: tuple[str, ...] = ("tune", "test")  # LoCoMo 7-9: the report split
    windows: int | None = 30  # a seeded sample of the split's windows; None: all
    seed: int = 0
    variants: tuple[str, ...] = VARIANTS
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    models_dir: Path = Path("~/.cache/tiermem/models")
    updates: int = 4  # bench updates' users (seed 7) whose changes score the supersedes


@dataclass
class Supersedes:
    """A variant's supersede decisions on the update windows, as the write path would keep
    them (in range, not a copy, grounded in the turn it cites)."""

    made: int = 0
    right: int = 0  # the memory of the older statement, replaced from the new one
    changes: int = 0  # labelled changes in the windows
    shown: int = 0  # of them, with the older statement among the memories shown
    found: set[tuple[str, str, str]] = field(default_factory=set)

    def row(self) -> dict[str, float]:
        return {
            "supersedes": float(self.made),
            "supersede_precision": 100.0 * self.right / self.made if self.made else float("nan"),
            "supersede_recall": 100.0 * len(self.found) / self.changes
            if self.changes
            else float("nan"),
            "changes": float(self.changes),
            "changes_shown": float(self.shown),
        }


@dataclass
class Tally:
    """One variant's counts over the windows."""

    windows: int = 0
    turns: int = 0
    gold: int = 0
    written: int = 0  # entries the write path would store (copies dropped)
    matched: int = 0
    named: int = 0  # written entries naming a speaker of a turn they cite
    copies: int = 0
    invalid: int = 0
    latencies: list[float] = field(default_factory=list)

    def row(self, meter: Meter) -> dict[str, float]:
        def pct(a: int, b: int) -> float:
            return 100.0 * a / b if b else float("nan")

        used = meter.totals()
        return {
            "precision": pct(self.matched, self.written),
            "recall": pct(self.matched, self.gold),
            "speaker": pct(self.named, self.written),
            "written": float(self.written),
            "copies": float(self.copies),
            "invalid": float(self.invalid),
            "calls_per_kept_turn": self.windows / self.turns if self.turns else float("nan"),
            "prompt_tokens_per_call": used.get("prompt_tokens", 0) / max(1, self.windows),
            "completion_tokens_per_call": used.get("completion_tokens", 0) / max(1, self.windows),
            "p50_s": percentile(self.latencies, 50) if self.latencies else float("nan"),
            "p95_s": percentile(self.latencies, 95) if self.latencies else float("nan"),
        }


def _windows(cfg: WriterEvalConfig) -> list[WriterWindow]:
    unknown = [s for s in cfg.splits if s not in SPLITS]
    if unknown:
        raise TrainingInputError(f"--split takes {', '.join(SPLITS)}, got {unknown[0]!r}")
    samples, _quirks = load_dataset(cfg.data)
    folds = {i for s in cfg.splits for i in SPLITS[s]}
    positions = [i for i in range(len(samples)) if i % 10 in folds]
    found = observation_windows([samples[i] for i in positions], positions, ",".join(cfg.splits))
    if not found:
        raise TrainingInputError(f"{cfg.data} has no observations in the {cfg.splits} split")
    if cfg.windows is not None and cfg.windows < len(found):
        picked = sorted(random.Random(cfg.seed).sample(range(len(found)), cfg.windows))
        found = [found[i] for i in picked]
    return found


def _match(
    gold: Sequence[writer.WrittenEntry],
    made: Sequence[tuple[str, set[int]]],
    embedder: Embedder,
) -> int:
    """Kept facts matched one to one with gold facts citing a shared turn, best first."""
    if not gold or not made:
        return 0
    vectors = embedder.embed([*(g.text for g in gold), *(t for t, _ in made)], EmbedMode.DOCUMENT)
    similar = vectors[len(gold) :] @ vectors[: len(gold)].T
    pairs = sorted(
        (
            (float(similar[i, j]), i, j)
            for i, (_, turns) in enumerate(made)
            for j, g in enumerate(gold)
            if turns & set(g.turns) and similar[i, j] >= MATCH_COSINE
        ),
        reverse=True,
    )
    used_made: set[int] = set()
    used_gold: set[int] = set()
    for _score, i, j in pairs:
        if i not in used_made and j not in used_gold:
            used_made.add(i)
            used_gold.add(j)
    return len(used_made)


def _score(
    tally: Tally, window: WriterWindow, output: writer.WriterOutput | None, embedder: Embedder
) -> None:
    chunk = window.chunk
    gold = writer.WriterOutput.model_validate({"entries": list(window.entries)}).entries
    tally.windows += 1
    tally.turns += len(chunk)
    tally.gold += len(gold) + window.cut
    if output is None or _out_of_range(window, output):
        tally.invalid += 1  # the write path keeps the verbatim turns instead
        return
    written = _kept(window, output)
    kept = [k for k in written if k is not None]
    tally.copies += sum(1 for e, k in zip(output.entries, written, strict=True)
                        if k is None and e.text.strip())  # fmt: skip
    tally.named += sum(1 for said, sources, _ in kept if _names(sources, said))
    made = [(said, {chunk.index(t) + 1 for t in sources}) for said, sources, _ in kept]
    tally.written += len(made)
    tally.matched += _match(gold, made, embedder)


def _names(sources: Sequence[Turn], said: str) -> bool:
    return any(t.speaker.casefold() in said.casefold() for t in sources)


def _kept(
    window: WriterWindow, output: writer.WriterOutput
) -> list[tuple[str, list[Turn], int] | None]:
    """Each entry as the write path keeps it (its text, its source turns, what it replaces)
    or ``None`` where it drops it as a copy."""
    chunk = window.chunk
    speakers = {t.speaker for t in [*chunk, *window.context]}
    out: list[tuple[str, list[Turn], int] | None] = []
    for e in output.entries:
        if not e.text.strip():
            out.append(None)
            continue
        _label, said = writer.split_label(e.text, speakers)
        cited = [chunk[n - 1] for n in sorted(set(e.turns))]
        sources = cited_speaker(said, cited, chunk)
        copied = copy_of(said, sources, chunk, window.earlier) is not None
        out.append(None if copied else (said, sources, e.replaces))
    return out


def _score_supersedes(
    tally: Supersedes, window: WriterWindow, output: writer.WriterOutput | None
) -> None:
    tally.changes += len(window.changes)
    tally.shown += sum(1 for _, old in window.changes if old in window.shown_turns)
    if output is None or _out_of_range(window, output):
        return
    labelled = set(window.changes)
    for item in _kept(window, output):
        if item is None or not item[2]:
            continue
        said, sources, replaces = item
        if not grounded(said, sources, window.shown_texts[replaces - 1]):
            continue  # the write path keeps the entry and drops the replaces
        tally.made += 1
        old = window.shown_turns[replaces - 1]
        hits = {(t.turn_id, old) for t in sources} & labelled
        tally.right += bool(hits)
        tally.found |= {(window.meta.sample_id, new, o) for new, o in hits}


def _out_of_range(window: WriterWindow, output: writer.WriterOutput) -> bool:
    """Whether the output names a turn or memory not shown: thrown away whole, served."""
    turns, shown = len(window.chunk), len(window.shown)
    return any(not 1 <= n <= turns for e in output.entries for n in e.turns) or any(
        e.replaces > shown for e in output.entries
    )


def run(cfg: WriterEvalConfig, console: Console) -> dict[str, Any]:
    """Every variant on the same windows; the figures, also written to ``OUT/writer.json``."""
    names = [v for v in cfg.variants if v in VARIANTS]
    if len(names) != len(cfg.variants):
        raise TrainingInputError(f"--variants takes {', '.join(VARIANTS)}")
    if "lora" in names and (cfg.adapter is None or not cfg.adapter.is_file()):
        raise TrainingInputError("the lora variant needs --adapter, a GGUF LoRA file")
    windows = _windows(cfg)
    changes = update_windows(scenarios(UpdatesConfig(out=cfg.out).seed, cfg.updates), "bench")
    changes = [w for w in changes if w.changes]  # the windows that state a change
    embedder = build_embedder(cfg.embedder)
    pool = BackendPool(cfg.models_dir)
    result: dict[str, Any] = {"config": _jsonable(cfg), "windows": len(windows), "variants": {}}
    try:
        for name in names:
            adapter = {"lora_path": cfg.adapter} if name == "lora" else {}
            backend = pool.get(backend_config(kind=cfg.backend_kind, model=cfg.model, **adapter))
            meter = Meter()
            runtime = RoleRuntime(backend, meter, timeout_s=WRITE_TIMEOUT_S)
            tally = Tally()
            for window in windows:
                started = time.perf_counter()
                output = _write(runtime, window)
                tally.latencies.append(time.perf_counter() - started)
                _score(tally, window, output, embedder)
            result["variants"][name] = tally.row(meter)
            supersedes = Supersedes()
            for window in changes:
                _score_supersedes(supersedes, window, _write(runtime, window))
            result["variants"][name].update(supersedes.row())
            console.print(f"{name}: {len(windows) + len(changes)} windows written")
    finally:
        pool.close()
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "writer.json").write_text(json.dumps(result, indent=2))
    _print(result, console)
    return result


def _write(runtime: RoleRuntime, window: WriterWindow) -> writer.WriterOutput | None:
    """The window's writer call, in its schema; ``None`` where it fails."""
    schema = writer.schema(len(window.chunk), len(window.shown))
    try:
        return runtime.call(writer.SPEC, window.example().messages, schema)
    except SLMError:
        return None


def _jsonable(cfg: WriterEvalConfig) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(asdict(cfg), default=str))
    return loaded


def _print(result: dict[str, Any], console: Console) -> None:
    table = Table(title=f"writer on {result['windows']} held-out windows")
    columns = ("precision", "recall", "speaker", "written", "copies", "invalid",
               "calls_per_kept_turn", "prompt_tokens_per_call", "completion_tokens_per_call",
               "p50_s", "p95_s", "supersedes", "supersede_precision", "supersede_recall",
               "changes_shown")  # fmt: skip
    table.add_column("variant")
    for c in columns:
        table.add_column(c.replace("_", " "), justify="right")
    for name, row in result["variants"].items():
        table.add_row(name, *("-" if np.isnan(row[c]) else f"{row[c]:.2f}" for c in columns))
    console.print(table)


__all__ = ["MATCH_COSINE", "VARIANTS", "WriterEvalConfig", "run"]
