"""Write a benchmark run's ``results.json``, ``report.md`` and PNG plots from its records (the
figures themselves come from ``tiermem.bench.aggregate``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tiermem.bench import bench_dependency
from tiermem.bench import judge as judge_prompt
from tiermem.bench.aggregate import aggregate, at_headline, worst_served
from tiermem.bench.provenance import model_hashes, versions
from tiermem.slm.prompts import generator as generator_prompt


def _fmt(value: Any, kind: str = "") -> str:
    if value is None:
        return "–"
    if kind == "%":
        return f"{100 * value:.1f} %"
    if kind == "s":
        if value >= 1:
            return f"{value:.2f} s"
        return f"{value * 1000:.0f} ms" if value >= 0.01 else f"{value * 1000:.2f} ms"
    if isinstance(value, float):
        return f"{value:.0f}" if kind == "int" else f"{value:.3f}"
    return str(value)


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _recall_tokens(point: dict[str, Any]) -> str:
    if not point["questions"]:
        return "–"
    return f"{_fmt(point['recall'], '%')} ({_fmt(point['context_tokens'], 'int')})"


Cells = tuple[list[str], list[list[str]]]  # a table: its header, its rows


def _columns(table: Cells, wanted: Sequence[str]) -> Cells:
    """The ``wanted`` columns of ``table``, in that order."""
    header, rows = table
    at = [header.index(name) for name in wanted]
    return list(wanted), [[row[i] for i in at] for row in rows]


def _headline_cells(summary: dict[str, Any]) -> Cells:
    header = ["system", "questions", "evidence recall", "context tokens", "retrieval p50"]
    header += ["retrieval p95", "end-to-end p50", "end-to-end p95", "F1", "BLEU-1", "judge"]
    rows = [
        [
            name,
            _fmt(s["questions"]),
            _fmt(s["recall"], "%"),
            _fmt(s["context_tokens"], "int"),
            _fmt(s["retrieval_p50_s"], "s"),
            _fmt(s["retrieval_p95_s"], "s"),
            _fmt(s["e2e_p50_s"], "s"),
            _fmt(s["e2e_p95_s"], "s"),
            _fmt(s["f1"]),
            _fmt(s["bleu1"]),
            _fmt(s["judge_accuracy"], "%"),
        ]
        for name, s in summary["overall"].items()
    ]
    return header, rows


def _curve_cells(summary: dict[str, Any]) -> Cells:
    header = ["system", "budget", "evidence recall", "mean tokens delivered", "max tokens"]
    header += ["retrieval p50", *summary["groups"]]
    rows = [
        [
            name,
            str(budget),
            _fmt(point["overall"]["recall"], "%"),
            _fmt(point["overall"]["context_tokens"], "int"),
            _fmt(point["overall"]["context_tokens_max"]),
            _fmt(point["overall"]["retrieval_p50_s"], "s"),
            *[_recall_tokens(point["groups"][g]) for g in summary["groups"]],
        ]
        for name, points in summary["curve"].items()
        for budget, point in points.items()
    ]
    return header, rows


def _curve_section(summary: dict[str, Any]) -> list[str]:
    if not summary["curve"]:
        return []
    cells = _curve_cells(summary)
    curve = _columns(cells, cells[0][:6])
    by_group = _columns(cells, ["system", "budget", *summary["groups"]])
    return [
        "## Recall vs delivered tokens (headline questions)",
        "",
        "Each system delivers the most it can within each budget, in its own order, through "
        "the same context builder (turns grouped by session under one date). The budget is a "
        "ceiling: the tokens shown are those actually delivered. Plot: `recall_vs_tokens.png`.",
        "",
        _markdown_table(*curve),
        "",
        "### By question group, every budget: evidence recall (mean tokens delivered)",
        "",
        _markdown_table(*by_group),
        "",
    ]


def _clip(text: str, n: int = 140) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _worst_section(
    records: Sequence[dict[str, Any]], turn_text: dict[tuple[str, str], str]
) -> list[str]:
    worst = worst_served(records)
    if not any(worst.values()):
        return []
    parts = [
        "## Worst-served questions (tiermem, headline budget)",
        "",
        "Per question group, the 20 questions with the least evidence delivered: the evidence "
        "turns it missed, and the first turns it delivered instead.",
        "",
    ]
    for group, rows in worst.items():
        parts += [f"### {group}", ""]
        for r in rows:
            missed = [e for e in dict.fromkeys(r["evidence"]) if e not in set(r["delivered"])]
            parts.append(
                f"- **{r['sample']} #{r['index']}** {_clip(r['question'], 200)} "
                f"(recall {100 * r['recall']:.0f} %, {r['context_tokens']} tokens)"
            )
            for e in missed:
                parts.append(f"  - missed `{e}`: {_clip(turn_text.get((r['sample'], e), '?'))}")
            for d in r["delivered"][:5]:
                parts.append(f"  - gave `{d}`: {_clip(turn_text.get((r['sample'], d), '?'), 90)}")
        parts.append("")
    return parts


def render_report(
    cfg: Any,
    summary: dict[str, Any],
    builds: Sequence[dict[str, Any]],
    quirks: dict[str, int],
    tokenizer: str,
    records: Sequence[dict[str, Any]] = (),
    turn_text: dict[tuple[str, str], str] | None = None,
) -> str:
    budget = summary.get("headline_budget")
    delivery = f"budgets = {cfg.budgets}, headline at {budget}" if budget else f"k = {cfg.k}"
    roles = f"{cfg.model} as {', '.join(cfg.roles)}" if cfg.model else "none (model-free roles)"
    variant = " (bursty variant: every sentence its own message)" if cfg.bursty else ""
    parts = [
        f"# Benchmark: {cfg.name}",
        "",
        f"Data: `{cfg.data}`{variant}; split: {cfg.split} (position % 10 < 7: choose, else "
        f"report); conversations: {cfg.conversations or 'all'}; "
        f"questions per conversation: {cfg.max_questions or 'all'}; {delivery}; "
        f"tiermem SLM model: {roles}; "
        f"generator: {cfg.generator or 'none'}; judge: {cfg.judge_model or 'none'}.",
        f"Context tokens are counted with `{tokenizer}`. Evidence recall is the share of gold "
        "evidence turns among the source turns of what is delivered to the generator; the "
        "headline uses the questions with evidence that are not adversarial, adversarial "
        "questions are reported apart. Question groups are the data set's question types "
        "where it has them, else its categories.",
        "",
        f"## Headline (headline questions{f', budget {budget} tokens' if budget else ''})",
        "",
        _markdown_table(*_headline_cells(summary)),
        "",
        *_curve_section(summary),
        "## Evidence recall by question group (mean tokens delivered)",
        "",
        _markdown_table(
            ["system", *summary["groups"], "adversarial F1"],
            [
                [
                    name,
                    *[_recall_tokens(groups[g]) for g in summary["groups"]],
                    _fmt(summary["adversarial"][name]["f1"]),
                ]
                for name, groups in summary["by_group"].items()
            ],
        ),
        "",
        "## By conversation (headline questions)",
        "",
        _markdown_table(
            [
                "conversation",
                "system",
                "questions",
                "evidence recall",
                "context tokens",
                "retrieval p50",
            ],
            [
                [
                    sample,
                    name,
                    _fmt(s["questions"]),
                    _fmt(s["recall"], "%"),
                    _fmt(s["context_tokens"], "int"),
                    _fmt(s["retrieval_p50_s"], "s"),
                ]
                for sample, systems in summary.get("by_conversation", {}).items()
                for name, s in systems.items()
            ],
        ),
        "",
        "## Build cost per conversation",
        "",
        _markdown_table(
            [
                "system",
                "conversation",
                "turns",
                "seconds",
                "SLM calls",
                "calls / turn",
                "prompt tokens",
                "completion tokens",
                "entries",
                "fallbacks",
            ],
            [
                [
                    b["system"],
                    b["sample"],
                    str(b["turns"]),
                    f"{b['seconds']:.1f}",
                    str(b["slm_calls"]),
                    f"{b['slm_calls'] / max(1, b['turns']):.3f}",
                    str(b["prompt_tokens"]),
                    str(b["completion_tokens"]),
                    str(b["entries"]),
                    str(b["fallbacks"]),
                ]
                for b in builds
            ],
        ),
        "",
        *_worst_section(records, turn_text or {}),
        "## Data quirks met (counted over the whole file as it is loaded)",
        "",
        _markdown_table(["quirk", "items"], [[k, str(v)] for k, v in sorted(quirks.items())])
        if quirks
        else "none",
        "",
        f"Prompts: generator `{generator_prompt.VERSION}`, judge `{judge_prompt.VERSION}`. "
        "Versions, model hashes and every per-question record are in `results.json`.",
    ]
    return "\n".join(parts) + "\n"


def plot(
    summary: dict[str, Any], records: Sequence[dict[str, Any]], out: Path, title: str = ""
) -> list[Path]:
    matplotlib = bench_dependency("matplotlib")
    matplotlib.use("Agg")
    plt = bench_dependency("matplotlib.pyplot")

    paths = []
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for name, points in summary["curve"].items():
        xs = [p["overall"]["context_tokens"] for p in points.values()]
        ys = [100 * (p["overall"]["recall"] or 0.0) for p in points.values()]
        ax.plot(xs, ys, marker="o", label=name)
    if summary["curve"]:
        ax.legend(loc="lower right")
    for name, s in summary["overall"].items():
        if s["recall"] is None or name in summary["curve"]:
            continue
        ax.scatter(s["context_tokens"], 100 * s["recall"], s=60)
        ax.annotate(
            name,
            (s["context_tokens"], 100 * s["recall"]),
            textcoords="offset points",
            xytext=(6, 4),
        )
    ax.set_xscale("log")
    ax.set_xlabel("context tokens delivered per question (log)")
    ax.set_ylabel("evidence recall, headline questions (%)")
    ax.set_title(f"Recall vs context size: {title}")
    ax.grid(True, alpha=0.3)
    paths.append(out / "recall_vs_tokens.png")
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    systems = [s for s in summary["overall"] if s != "full-context"]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    shown = at_headline(records)
    data = [[1000 * r["retrieval_s"] for r in shown if r["system"] == s] for s in systems]
    ax.boxplot(data, tick_labels=systems, showfliers=True)
    ax.set_yscale("log")
    ax.set_ylabel("retrieval latency per question (ms, log)")
    ax.set_title("Retrieval latency")
    ax.grid(True, axis="y", alpha=0.3)
    paths.append(out / "latency.png")
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def write_outputs(
    cfg: Any,
    records: Sequence[dict[str, Any]],
    builds: Sequence[dict[str, Any]],
    quirks: dict[str, int],
    tokenizer: str,
    console: Console,
    turn_text: dict[tuple[str, str], str] | None = None,
) -> dict[str, Any]:
    summary = aggregate(records)
    config = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    results = {
        "config": config,
        "seed": 0,
        "tokenizer": tokenizer,
        "versions": versions(),
        "model_hashes": model_hashes(),
        "summary": summary,
        "builds": list(builds),
        "quirks": quirks,
        "records": list(records),
    }
    (cfg.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    report = render_report(cfg, summary, builds, quirks, tokenizer, records, turn_text)
    (cfg.out / "report.md").write_text(report)
    plot(summary, records, cfg.out, cfg.name)
    shown = ["system", "questions", "evidence recall", "context tokens", "retrieval p50", "F1"]
    headline = _columns(_headline_cells(summary), shown)
    console.print(_console_table(f"{cfg.name}: headline questions", headline))
    if summary["curve"]:
        title = "Recall vs delivered tokens, headline questions (and per group)"
        shown = ["system", "budget", "evidence recall", "mean tokens delivered", *summary["groups"]]
        console.print(_console_table(title, _columns(_curve_cells(summary), shown)))
    console.print(f"wrote {cfg.out / 'report.md'}, results.json and plots")
    return results


def _console_table(title: str, cells: Cells) -> Table:
    table = Table(title=title)
    for column in cells[0]:
        table.add_column(column, justify="right")
    for row in cells[1]:
        table.add_row(*row)
    return table
