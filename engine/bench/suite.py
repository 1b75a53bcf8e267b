"""``tiermem bench locomo`` on several data sets in one command, and the table that sums them up.

Each data set (a file, or the bursty variant of one) is a run of its own
(:func:`tiermem.bench.locomo.run`) with its outputs under ``OUT/<name>`` (a single data set
writes into ``OUT`` itself, as ``tiermem bench locomo --data FILE`` always has, so a run in
progress resumes where it was); every run shares one embedder (and its on-disk cache). The
summary has one row per data set and budget: the evidence recall of tiermem, naive-rag, bm25
and hybrid on the headline questions, tiermem's lead over the best baseline, the tokens each
delivered, and tiermem's and naive-rag's retrieval p50.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tiermem.bench import BenchInputError
from tiermem.bench.embed_cache import CachedEmbedder
from tiermem.bench.locomo import (
    Answerer,
    RunConfig,
    check_config,
    load_conversations,
    run,
    run_embedder,
)

COMPARED = ("tiermem", "naive-rag", "bm25", "hybrid")
BASELINES = ("naive-rag", "bm25", "hybrid")
TIMED = ("tiermem", "naive-rag")


def dataset_configs(
    base: RunConfig, data: Sequence[Path], bursty: Sequence[Path] = ()
) -> list[RunConfig]:
    """One run per file of ``data`` and per bursty variant of a file of ``bursty``, each
    writing under ``base.out / <name>`` (one data set alone: into ``base.out``); two data
    sets of one name are refused.

    >>> cfgs = dataset_configs(RunConfig(Path("a.json"), Path("out")),
    ...                        [Path("x/locomo10.json")], [Path("x/locomo10.json")])
    >>> [(c.name, str(c.out)) for c in cfgs]
    [('locomo10', 'out/locomo10'), ('locomo10-bursty', 'out/locomo10-bursty')]
    """
    configs = [replace(base, data=p, bursty=False) for p in data]
    configs += [replace(base, data=p, bursty=True) for p in bursty]
    if not configs:
        raise BenchInputError("no data set: give --data FILE or --bursty FILE")
    names = [c.name for c in configs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BenchInputError(f"two data sets would write to the same folder: {', '.join(twice)}")
    if len(configs) == 1:
        return [replace(configs[0], out=base.out)]
    return [replace(c, out=base.out / c.name) for c in configs]


@dataclass(frozen=True, slots=True)
class SummaryRow:
    dataset: str
    budget: int | None  # None: the fixed-k delivery
    questions: int  # headline questions, tiermem's
    recall: dict[str, float | None]
    tokens: dict[str, float | None]
    retrieval_p50_s: dict[str, float | None]

    @property
    def lead(self) -> float | None:
        """tiermem's recall minus the better baseline's (``None`` when one is missing)."""
        mine = self.recall.get("tiermem")
        theirs = [v for b in BASELINES if (v := self.recall.get(b)) is not None]
        return mine - max(theirs) if mine is not None and theirs else None


def summary_rows(summaries: Mapping[str, dict[str, Any]]) -> list[SummaryRow]:
    """Per data set (name -> its ``aggregate`` summary), one row per budget measured, or one
    for the fixed k. A system not run reads ``None``.

    >>> point = lambda r: {"overall": {"recall": r, "context_tokens": 900.0,
    ...                                "retrieval_p50_s": 0.01, "questions": 3}}
    >>> s = {"curve": {"tiermem": {1200: point(0.8)}, "bm25": {1200: point(0.7)}}}
    >>> (row,) = summary_rows({"lme": s})
    >>> row.budget, round(row.lead, 2), row.recall["naive-rag"]
    (1200, 0.1, None)
    """
    rows = []
    for name, summary in summaries.items():
        curve = summary.get("curve") or {}
        budgets = sorted({b for points in curve.values() for b in points}) or [None]
        for budget in budgets:
            at = {
                system: (
                    curve.get(system, {}).get(budget, {}).get("overall")
                    if budget is not None
                    else summary.get("overall", {}).get(system)
                )
                or {}
                for system in COMPARED
            }
            rows.append(
                SummaryRow(
                    name,
                    budget,
                    int(at["tiermem"].get("questions") or 0),
                    {s: at[s].get("recall") for s in COMPARED},
                    {s: at[s].get("context_tokens") for s in COMPARED},
                    {s: at[s].get("retrieval_p50_s") for s in TIMED},
                )
            )
    return rows


def _pct(value: float | None, unit: str = " %") -> str:
    return "–" if value is None else f"{100 * value:.1f}{unit}"


def _points(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f}"


def _tokens(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def _ms(value: float | None, unit: str = " ms") -> str:
    return "–" if value is None else f"{1000 * value:.1f}{unit}"


HEADER = (
    "data set",
    "budget",
    "questions",
    *(f"{s} recall" for s in COMPARED),
    "tiermem lead (points)",
    *(f"{s} tokens" for s in COMPARED),
    *(f"{s} retrieval p50" for s in TIMED),
)
# The console's narrower spelling of the same columns, units in the header.
SHORT_HEADER = (
    "data set",
    "budget",
    "q",
    *(f"{s} recall %" for s in COMPARED),
    "lead points",
    *(f"{s} tokens" for s in COMPARED),
    *(f"{s} p50 ms" for s in TIMED),
)


def row_cells(row: SummaryRow, k: int, units: bool = True) -> list[str]:
    """The row as table cells (``units=False``: bare numbers, the header has the unit)."""
    pct, ms = (" %", " ms") if units else ("", "")
    return [
        row.dataset,
        str(row.budget) if row.budget is not None else f"k={k}",
        str(row.questions),
        *(_pct(row.recall[s], pct) for s in COMPARED),
        _points(row.lead),
        *(_tokens(row.tokens[s]) for s in COMPARED),
        *(_ms(row.retrieval_p50_s[s], ms) for s in TIMED),
    ]


def summary_table(rows: Sequence[SummaryRow], k: int) -> Table:
    table = Table(title="Every data set: evidence recall on the headline questions")
    longest = max((len(r.dataset) for r in rows), default=8)
    table.add_column(SHORT_HEADER[0], no_wrap=True, min_width=longest)
    for column in SHORT_HEADER[1:]:
        table.add_column(column, justify="right", min_width=min(9, len(column)))
    for row in rows:
        table.add_row(*row_cells(row, k, units=False))
    return table


def summary_markdown(rows: Sequence[SummaryRow], runs: Mapping[str, dict[str, Any]], k: int) -> str:
    lines = [
        "# Benchmark summary",
        "",
        "Evidence recall on each data set's headline questions (with evidence, not "
        "adversarial); tokens are those delivered; the lead is tiermem's recall minus the "
        "better baseline's. Each data set's own report is in its folder.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
        *("| " + " | ".join(row_cells(r, k)) + " |" for r in rows),
        "",
        "## Data quirks met, per file",
        "",
    ]
    for name, result in runs.items():
        quirks = result.get("quirks") or {}
        split = result.get("config", {}).get("split", "all")
        found = "; ".join(f"{q}: {n}" for q, n in sorted(quirks.items())) or "none"
        lines.append(f"- **{name}** (split {split}): {found}")
    return "\n".join(lines) + "\n"


def run_all(
    configs: Sequence[RunConfig],
    out: Path,
    console: Console,
    answerer: Answerer | None = None,
) -> dict[str, Any]:
    """Every data set's run, one after another (each resumable), then the summary under
    ``out`` (``summary.md``, ``summary.json``) and on the console."""
    for cfg in configs:  # refuse a bad argument or file before the first run starts
        check_config(cfg)
        load_conversations(cfg)
    embedder = run_embedder(configs[0])
    runs: dict[str, dict[str, Any]] = {}
    try:
        for cfg in configs:
            runs[cfg.name] = run(cfg, console, answerer, embedder)
    finally:
        if isinstance(embedder, CachedEmbedder):
            console.print(
                f"embedding cache {embedder.path}: {embedder.hits} reused, "
                f"{embedder.misses} embedded"
            )
            embedder.close()
    rows = summary_rows({name: r["summary"] for name, r in runs.items()})
    k = configs[0].k
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text(summary_markdown(rows, runs, k), encoding="utf-8")
    summary = [{**asdict(r), "lead": r.lead} for r in rows]
    quirks = {name: r["quirks"] for name, r in runs.items()}
    (out / "summary.json").write_text(
        json.dumps({"rows": summary, "quirks": quirks}, indent=1), encoding="utf-8"
    )
    console.print(summary_table(rows, k))
    return {"runs": runs, "rows": rows}


__all__ = [
    "SummaryRow",
    "dataset_configs",
    "run_all",
    "summary_markdown",
    "summary_rows",
    "summary_table",
]
