"""``tiermem bench locomo``: tiermem beside naive-rag, bm25 and full-context on LoCoMo-format
data (LoCoMo, LongMemEval S converted), every system measured in the same run on the same
questions, on one file or several (:func:`run_all`), each also as its bursty variant if asked.

Per question it records what each system delivers (its source turns, context tokens, the
retrieval and end-to-end latency) and, with a generator configured, the answer's F1, BLEU-1
and (with a judge) the judge's verdict. Records are appended to ``records.jsonl`` as they are
made; ``--resume`` skips those already there, and tiermem's memory lives under the output
folder so its ingestion resumes too. ``--split`` runs the conversations of the fixed split
(:mod:`tiermem.bench.datasets.splits`); ``--embed-cache`` memoises the vectors
on disk (:mod:`tiermem.bench.embed_cache`), shared by naive-rag and tiermem.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from tiermem.bench import SYSTEMS, BenchInputError
from tiermem.bench import judge as judge_prompt
from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.bursty import burst, split_turns
from tiermem.bench.datasets.conversation import Conversation, Question, Quirks
from tiermem.bench.datasets.splits import check_split, in_split
from tiermem.bench.embed_cache import CachedEmbedder
from tiermem.bench.metrics import answer_f1, bleu1, evidence_recall
from tiermem.bench.systems import (
    BM25,
    FullContext,
    Hybrid,
    NaiveRAG,
    Retrieved,
    System,
    Tiermem,
)
from tiermem.config import (
    ONLINE_ROLES,
    EmbedderConfig,
    LlamaCppConfig,
    OpenAIConfig,
    SLMConfig,
    TiermemConfig,
)
from tiermem.embedding import Embedder, build_embedder
from tiermem.errors import SLMError
from tiermem.slm.meter import Meter
from tiermem.slm.prompts import generator as generator_prompt
from tiermem.slm.registry import BackendPool
from tiermem.slm.roles.common import RoleRuntime
from tiermem.tokens import ApproxTokenCounter

SEED = 0


@dataclass
class RunConfig:
    data: Path
    out: Path
    systems: tuple[str, ...] = SYSTEMS
    conversations: tuple[int | str, ...] | None = None  # 0-based indices or sample ids
    max_questions: int | None = None
    # at most this many conversations of the file, evenly spaced in file order (a data set of
    # many one-question conversations, LongMemEval-S, sampled across its question types)
    sample: int | None = None
    k: int = 10
    budgets: tuple[int, ...] | None = None  # token ceilings; None: the fixed k
    model: str | None = None  # tiermem's SLM roles (llama.cpp alias or GGUF); None: model-free
    roles: tuple[str, ...] = ONLINE_ROLES  # the roles ``model`` plays; the others stay model-free
    generator: str | None = None  # answers for every system (llama.cpp alias or GGUF)
    generator_ctx: int = 8192
    judge_url: str | None = None
    judge_model: str | None = None
    resume: bool = False
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    split: str = "all"  # choose, report or all (tiermem.bench.datasets.splits)
    bursty: bool = False  # run the bursty variant of ``data`` (every sentence its own message)
    embed_cache: Path | None = None  # a folder of memoised vectors, shared by runs
    # tiermem's own configuration (``bench locomo --config``): its delivery, policy and roles
    # sections apply; the run sets the storage (under OUT) and ``--model``. ``embedder`` is
    # the run's, for naive-rag too (the CLI takes it from that file).
    tiermem: TiermemConfig = field(default_factory=TiermemConfig)
    # where tiermem keeps its memories; None: ``out/state`` (``--lodo`` candidates share one)
    state_dir: Path | None = None

    @property
    def name(self) -> str:
        """The data set's name in reports and output folders: the file's stem, ``-bursty``
        for its bursty variant."""
        return self.data.stem + ("-bursty" if self.bursty else "")


@dataclass
class Answerer:
    """The same generator (and judge) for every system, so answers differ only by context."""

    generator: RoleRuntime | None
    judge: RoleRuntime | None
    window_tokens: int

    def answer(self, question: str, context: list[str], tokens: int) -> tuple[str | None, str]:
        if self.generator is None:
            return None, "no generator"
        if tokens > self.window_tokens:
            return None, "context exceeds the generator's window"
        inp = generator_prompt.GeneratorInput(question, [], context, "unknown")
        try:
            out = self.generator.call(generator_prompt.SPEC, generator_prompt.build_messages(inp))
        except SLMError as exc:
            return None, f"generator failed: {type(exc).__name__}"
        return out.answer, ""

    def verdict(self, question: str, gold: str, answer: str) -> str | None:
        if self.judge is None:
            return None
        try:
            out = self.judge.call(
                judge_prompt.SPEC, judge_prompt.build_messages(question, gold, answer)
            )
        except SLMError:
            return None
        return out.verdict


def _answerer(cfg: RunConfig, pool: BackendPool, meter: Meter) -> Answerer:
    generator = judge = None
    if cfg.generator:
        backend = pool.get(LlamaCppConfig(model=cfg.generator, n_ctx=cfg.generator_ctx))
        generator = RoleRuntime(backend, meter, timeout_s=120.0)
    if cfg.judge_url and cfg.judge_model:
        backend = pool.get(OpenAIConfig(model=cfg.judge_model, base_url=cfg.judge_url))
        judge = RoleRuntime(backend, meter, timeout_s=120.0)
    return Answerer(generator, judge, cfg.generator_ctx - 600)


def _system(name: str, cfg: RunConfig, embedder: Any) -> System:
    """``embedder`` is the run's (maybe cached) embedder, for naive-rag and, when it is cached,
    tiermem; without a cache tiermem builds its own from the config, as a user's would."""
    if name == "tiermem":
        slm = cfg.tiermem.slm
        if cfg.model:
            # the roles as measured (tiermem.presets): the selector listwise, not fusion
            slm = SLMConfig(backend=LlamaCppConfig(model=cfg.model), selector_mode="listwise")
            slm = slm.model_copy(
                update={
                    role: getattr(slm, role).model_copy(update={"enabled": role in cfg.roles})
                    for role in ONLINE_ROLES
                }
            )
        config = cfg.tiermem.model_copy(update={"slm": slm, "embedder": cfg.embedder})
        cached = embedder if isinstance(embedder, CachedEmbedder) else None
        return Tiermem(config, cfg.state_dir or cfg.out / "state", cfg.k, cached)
    if name == "naive-rag":
        return NaiveRAG(embedder, cfg.k)
    if name == "bm25":
        return BM25(cfg.k)
    if name == "hybrid":
        return Hybrid(embedder, cfg.k)
    if name == "full-context":
        return FullContext()
    raise BenchInputError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line cut short by an interruption; what follows it is not trusted
    return rows


def _repair(path: Path) -> list[dict[str, Any]]:
    """Cut a JSONL file back to its last complete record (a stop can leave half a line) and
    return its records, so that what is appended next follows whole lines."""
    rows = _read_jsonl(path)
    if path.exists():
        path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows), encoding="utf-8")
    return rows


def _append(path: Path, row: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row, default=str) + "\n")
        handle.flush()


def selected_questions(sample: Conversation, limit: int | None) -> list[Question]:
    return list(sample.questions[:limit] if limit else sample.questions)


@contextmanager
def _progress(console: Console) -> Iterator[Progress]:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        yield progress


def run(
    cfg: RunConfig,
    console: Console,
    answerer: Answerer | None = None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Run (or resume) the benchmark on one data set; ``answerer`` overrides the configured
    generator, ``embedder`` the configured embedder (and its cache)."""
    check_config(cfg)
    chosen, quirks = load_conversations(cfg)
    cfg.out.mkdir(parents=True, exist_ok=True)
    records_path, builds_path = cfg.out / "records.jsonl", cfg.out / "builds.jsonl"
    if not cfg.resume:
        for path in (records_path, builds_path):
            path.unlink(missing_ok=True)
    done = {(r["system"], r["sample"], r["index"], r.get("budget")) for r in _repair(records_path)}
    built = {(b["system"], b["sample"]) for b in _repair(builds_path)}
    pool, meter = BackendPool(Path("~/.cache/tiermem/models")), Meter()
    answerer = answerer or _answerer(cfg, pool, meter)
    own = embedder is None
    embedder = embedder or run_embedder(cfg)
    counter = ApproxTokenCounter()
    per_question = sum(len(budgets_for(name, cfg)) for name in cfg.systems)
    total = sum(len(selected_questions(s, cfg.max_questions)) for s in chosen) * per_question
    try:
        with _progress(console) as progress:
            task = progress.add_task(cfg.name, total=total, completed=len(done))
            for sample in chosen:
                questions = selected_questions(sample, cfg.max_questions)
                for name in cfg.systems:
                    budgets = budgets_for(name, cfg)
                    todo = {
                        i: [b for b in budgets if (name, sample.sample_id, i, b) not in done]
                        for i in range(len(questions))
                    }
                    todo = {i: bs for i, bs in todo.items() if bs}
                    if not todo:
                        continue
                    system = _system(name, cfg, embedder)
                    where = f"{cfg.name} · {name} · {sample.sample_id}"
                    progress.update(task, description=f"{where} · building")
                    cost = system.build(sample)
                    if (name, sample.sample_id) not in built:
                        row = {"system": name, "sample": sample.sample_id}
                        _append(builds_path, {**row, "turns": sample.turn_count, **asdict(cost)})
                    progress.update(task, description=where)
                    for i, wanted in todo.items():
                        q = questions[i]
                        delivered = system.deliver(q.question, wanted)
                        for budget, got in zip(wanted, delivered, strict=True):
                            row = _record(name, sample, i, q, got, answerer, counter)
                            _append(records_path, {**row, "budget": budget})
                            progress.advance(task)
                    system.close()
    finally:
        pool.close()
        if own and isinstance(embedder, CachedEmbedder):
            embedder.close()
    from tiermem.bench.report import write_outputs

    return write_outputs(
        cfg,
        _read_jsonl(records_path),
        _read_jsonl(builds_path),
        dict(quirks.counts),
        counter.name,
        console,
        {
            (s.sample_id, t.turn_id): f"{t.speaker}: {t.text}"
            for s in chosen
            for session in s.sessions
            for t in session.turns
        },
    )


def run_embedder(cfg: RunConfig) -> Embedder:
    """The configured embedder, memoised under ``cfg.embed_cache`` when it is set."""
    embedder = build_embedder(cfg.embedder)
    return CachedEmbedder(embedder, cfg.embed_cache) if cfg.embed_cache else embedder


def load_conversations(cfg: RunConfig) -> tuple[list[Conversation], Quirks]:
    """The conversations a run asks for (``--conversations``, then ``--split``), as their
    bursty variant if asked, and the quirks met reading the whole file."""
    samples, quirks = load_dataset(cfg.data)
    positions = [i for i in choose_positions(samples, cfg.conversations) if in_split(i, cfg.split)]
    if not positions:
        raise BenchInputError(
            f"{cfg.data}: no conversation is both named by --conversations and in the "
            f"{cfg.split!r} split"
        )
    chosen = [samples[i] for i in spaced(positions, cfg.sample)]
    if cfg.bursty:
        quirks.note("bursty: turns split into sentences", sum(map(split_turns, samples)))
        chosen = [burst(s) for s in chosen]
    return chosen, quirks


def _record(
    name: str,
    sample: Conversation,
    index: int,
    q: Question,
    got: Retrieved,
    answerer: Answerer,
    counter: ApproxTokenCounter,
) -> dict[str, Any]:
    started = time.perf_counter()
    tokens = counter.count("\n".join(got.context))
    answer, note = answerer.answer(q.question, list(got.context), tokens)
    e2e = got.latency_s + (time.perf_counter() - started) if answer is not None else got.latency_s
    row: dict[str, Any] = {
        "system": name,
        "sample": sample.sample_id,
        "index": index,
        "question": q.question,
        "category": q.category,
        "question_type": q.question_type,
        "gold": q.answer,
        "evidence": list(q.evidence),
        "delivered": list(got.turn_ids),
        "recall": evidence_recall(q.evidence, set(got.turn_ids)) if q.evidence else None,
        "context_tokens": tokens,
        "retrieval_s": got.latency_s,
        "e2e_s": e2e,
        "answer": answer,
        "note": note,
    }
    if answer is not None:
        row["f1"] = answer_f1(answer, q.answer, q.category)
        row["bleu1"] = bleu1(answer, q.answer)
        row["judge"] = answerer.verdict(q.question, q.answer, answer)
    return row


def check_config(cfg: RunConfig) -> None:
    """Refuse, before any work, what names nothing: an unknown system, a budget or k that is
    not a positive number, a data file that is not there."""
    unknown = [name for name in cfg.systems if name not in SYSTEMS]
    if unknown or not cfg.systems:
        raise BenchInputError(
            f"unknown system {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"known: {', '.join(SYSTEMS)}"
        )
    if cfg.budgets is not None and (not cfg.budgets or any(b <= 0 for b in cfg.budgets)):
        raise BenchInputError(f"budgets must be positive token counts, got {cfg.budgets}")
    if cfg.k <= 0:
        raise BenchInputError(f"k must be positive, got {cfg.k}")
    if cfg.sample is not None and cfg.sample <= 0:
        raise BenchInputError(f"--sample must be positive, got {cfg.sample}")
    if cfg.max_questions is not None and cfg.max_questions <= 0:
        raise BenchInputError(f"max questions must be positive, got {cfg.max_questions}")
    check_split(cfg.split)
    if not cfg.data.is_file():
        raise BenchInputError(f"no data file at {cfg.data}")


def budgets_for(name: str, cfg: RunConfig) -> tuple[int | None, ...]:
    """The budgets a system is measured at. Full context has no order to cut by: it is
    measured once, whole, as the ceiling on recall."""
    if cfg.budgets is None or name == "full-context":
        return (None,)
    return cfg.budgets


def spaced(positions: list[int], n: int | None) -> list[int]:
    """At most ``n`` of ``positions``, evenly spaced, the first always among them.

    >>> spaced(list(range(119)), 12)
    [0, 9, 19, 29, 39, 49, 59, 69, 79, 89, 99, 109]
    >>> spaced([3, 4], 12), spaced([3, 4], None)
    ([3, 4], [3, 4])
    """
    if n is None or len(positions) <= n:
        return positions
    return [positions[i * len(positions) // n] for i in range(n)]


def choose_positions(
    samples: list[Conversation], wanted: tuple[int | str, ...] | None
) -> list[int]:
    """The positions of the samples named by 0-based index or by sample id (``conv-30``), in
    the order named; all of them when none is named.

    >>> s = [Conversation(i, "A", "B", (), ()) for i in ("conv-26", "conv-30")]
    >>> choose_positions(s, ("conv-30", 0)), choose_positions(s, None)
    ([1, 0], [0, 1])
    """
    if not wanted:
        return list(range(len(samples)))
    by_id = {s.sample_id: i for i, s in enumerate(samples)}
    out = []
    for item in wanted:
        if isinstance(item, int) or (isinstance(item, str) and item.isdigit()):
            i = int(item)
            if not 0 <= i < len(samples):
                raise BenchInputError(
                    f"conversation index {i} is out of range: the file has {len(samples)} "
                    f"(0-{len(samples) - 1})"
                )
            out.append(i)
        elif item in by_id:
            out.append(by_id[item])
        else:
            known = ", ".join(list(by_id)[:12])
            raise BenchInputError(f"no conversation {item!r} in the file; its ids: {known}")
    return out
