"""``tiermem bench locomo --lodo``: every read-path choice made leave-one-dataset-out.

Each candidate is tiermem's configuration with some settings changed (``--lodo-grid
delivery.member=0.5,0.9``: the defaults, then every combination of the values given;
``--lodo-try "delivery.member=0 delivery.later=0"``: one candidate with exactly those). Every
candidate runs on every data set; the baselines run once. For each data set, the candidate
chosen is the one with the best recall on the *other* data sets (the mean over them, each
data set weighing the same, of its mean over the budgets; a tie keeps the earlier candidate,
the defaults first), and the figure reported for that data set is the chosen candidate's on
it. A setting that wins its own data sets but loses the one left out shows as a fold that
chose it and lost.

Candidates share the stored memories of the first one (``RunConfig.state_dir``): the grid
holds read-path settings, which need no new ingestion.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tiermem.bench import BenchInputError
from tiermem.bench.locomo import RunConfig
from tiermem.bench.suite import BASELINES, run_all
from tiermem.config import merge_overrides
from tiermem.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Candidate:
    """Tiermem's configuration with ``overrides`` (dotted setting -> value) applied."""

    name: str
    overrides: Mapping[str, object]


DEFAULTS = Candidate("defaults", {})
# The settings a grid may hold: read-path ones, which the shared memories need not be built
# again for (a write-path setting would be judged on the defaults' memories).
READ_PATH = ("delivery.", "default_k", "slm.selector_mode", "slm.pointwise_weight")


def _value(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # a bare word: a string setting


def _setting(spec: str, flag: str) -> tuple[str, list[str]]:
    key, sep, values = spec.partition("=")
    key = key.strip()
    axis = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or "." not in key or not axis:
        raise BenchInputError(f"{flag} {spec!r}: write section.setting=value,value")
    if not key.startswith(READ_PATH):
        raise BenchInputError(
            f"{flag} {key}: only read-path settings ({', '.join(READ_PATH)}): the "
            "candidates share one ingestion"
        )
    return key, axis


def parse_grid(specs: Sequence[str], tries: Sequence[str] = ()) -> list[Candidate]:
    """The defaults, then every combination of the values each spec gives, then one
    candidate per ``tries`` entry (settings separated by spaces, one value each).

    >>> [c.name for c in parse_grid(["delivery.member=0.5,0.9", "delivery.distinct=false"])]
    ['defaults', 'delivery.member=0.5 delivery.distinct=false', 'delivery.member=0.9 delivery.distinct=false']
    >>> [c.overrides for c in parse_grid([], ["delivery.member=0 delivery.later=0"])][1]
    {'delivery.member': 0, 'delivery.later': 0}
    """  # noqa: E501
    axes = []
    for spec in specs:
        key, values = _setting(spec, "--lodo-grid")
        axes.append([(key, v) for v in values])
    candidates = [DEFAULTS]
    for combo in itertools.product(*axes) if axes else ():
        name = " ".join(f"{k}={v}" for k, v in combo)
        candidates.append(Candidate(name, {k: _value(v) for k, v in combo}))
    for spec in tries:
        settings = dict(_setting(part, "--lodo-try") for part in spec.split())
        if not settings or any(len(v) != 1 for v in settings.values()):
            raise BenchInputError(f"--lodo-try {spec!r}: write section.setting=value ...")
        name = " ".join(f"{k}={v[0]}" for k, v in settings.items())
        candidates.append(Candidate(name, {k: _value(v[0]) for k, v in settings.items()}))
    return candidates


def _nested(overrides: Mapping[str, object]) -> dict[str, object]:
    out: dict[str, Any] = {}
    for dotted, value in overrides.items():
        *sections, key = dotted.split(".")
        target = out
        for section in sections:
            target = target.setdefault(section, {})
        target[key] = value
    return out


def candidate_configs(
    configs: Sequence[RunConfig], candidates: Sequence[Candidate], out: Path
) -> list[list[RunConfig]]:
    """Per candidate, its run of every data set: the first with every system asked, under
    ``out/c0``; the others tiermem alone, under ``out/cN``, reading the first's memories."""
    runs = []
    for i, candidate in enumerate(candidates):
        folder = out / f"c{i}"
        per_set = []
        for cfg in configs:
            try:
                tiermem = merge_overrides(cfg.tiermem, _nested(candidate.overrides))
            except ConfigError as exc:
                raise BenchInputError(f"--lodo-grid {candidate.name}: {exc}") from exc
            state = out / "c0" / cfg.name / "state"
            systems = cfg.systems if i == 0 else ("tiermem",)
            per_set.append(
                replace(
                    cfg, out=folder / cfg.name, tiermem=tiermem, systems=systems, state_dir=state
                )
            )
        runs.append(per_set)
    return runs


def _recall(summary: Mapping[str, Any], system: str, budget: int) -> float | None:
    point = summary.get("curve", {}).get(system, {}).get(budget, {}).get("overall") or {}
    value = point.get("recall")
    return float(value) if value is not None else None


def _mean_recall(summary: Mapping[str, Any], budgets: Sequence[int]) -> float:
    """tiermem's recall on one data set, the mean over the budgets."""
    known = [v for b in budgets if (v := _recall(summary, "tiermem", b)) is not None]
    return sum(known) / len(known) if known else float("-inf")


def against_defaults(
    summaries: Sequence[Mapping[str, Mapping[str, Any]]],
    names: Sequence[str],
    budgets: Sequence[int],
) -> list[dict[str, float]]:
    """Per candidate, per data set: its mean recall over the budgets minus the defaults'
    (candidate 0). A setting whose candidate is no worse than the defaults on the others in
    a fold would be chosen there over them.

    >>> s = lambda r: {"curve": {"tiermem": {300: {"overall": {"recall": r}}}}}
    >>> against_defaults([{"a": s(0.5)}, {"a": s(0.75)}], ["a"], [300])
    [{'a': 0.0}, {'a': 0.25}]
    """
    return [
        {n: _mean_recall(s[n], budgets) - _mean_recall(summaries[0][n], budgets) for n in names}
        for s in summaries
    ]


@dataclass(frozen=True, slots=True)
class Fold:
    """One data set left out: the candidate chosen on the others, and its figures on it."""

    dataset: str
    chosen: str
    recall: dict[int, float | None]  # tiermem, the chosen candidate, per budget
    baselines: dict[str, dict[int, float | None]]  # per baseline, per budget

    def lead(self, budget: int) -> float | None:
        mine = self.recall.get(budget)
        theirs = [v for b in self.baselines.values() if (v := b.get(budget)) is not None]
        return mine - max(theirs) if mine is not None and theirs else None


def choose_folds(
    summaries: Sequence[Mapping[str, Mapping[str, Any]]],
    names: Sequence[str],
    budgets: Sequence[int],
) -> list[Fold]:
    """``summaries[c][dataset]``: candidate c's run summary on each data set (c = 0 holds the
    baselines). For each data set, the candidate best on the others, and its figures.

    >>> s = lambda r: {"curve": {"tiermem": {300: {"overall": {"recall": r}}}}}
    >>> runs = [{"a": s(0.5), "b": s(0.5)}, {"a": s(0.9), "b": s(0.1)}]
    >>> [(f.dataset, f.chosen, f.recall[300]) for f in choose_folds(runs, ["a", "b"], [300])]
    [('a', '0', 0.5), ('b', '1', 0.1)]
    """

    def score(c: int, dataset: str) -> float:
        return _mean_recall(summaries[c][dataset], budgets)

    folds = []
    for left_out in names:
        others = [n for n in names if n != left_out]
        if not others:
            raise BenchInputError("--lodo needs at least two data sets")
        means = [sum(score(c, n) for n in others) / len(others) for c in range(len(summaries))]
        best = max(range(len(summaries)), key=lambda c: (means[c], -c))
        folds.append(
            Fold(
                left_out,
                str(best),
                {b: _recall(summaries[best][left_out], "tiermem", b) for b in budgets},
                {
                    base: {b: _recall(summaries[0][left_out], base, b) for b in budgets}
                    for base in BASELINES
                },
            )
        )
    return folds


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def lodo_markdown(
    folds: Sequence[Fold],
    candidates: Sequence[Candidate],
    budgets: Sequence[int],
    deltas: Sequence[Mapping[str, float]] = (),
) -> str:
    lines = [
        "# Leave-one-dataset-out",
        "",
        "Each data set's figure comes from the candidate chosen on the other data sets.",
        "",
        "| data set left out | chosen | system | " + " | ".join(map(str, budgets)) + " |",
        "|---|---|---|" + "---|" * len(budgets),
    ]
    for fold in folds:
        chosen = candidates[int(fold.chosen)].name
        lines.append(
            f"| {fold.dataset} | {chosen} | tiermem | "
            + " | ".join(_pct(fold.recall[b]) for b in budgets)
            + " |"
        )
        for base, recall in fold.baselines.items():
            lines.append(f"| | | {base} | " + " | ".join(_pct(recall[b]) for b in budgets) + " |")
        leads = [fold.lead(b) for b in budgets]
        cells = ["–" if v is None else f"{100 * v:+.1f}" for v in leads]
        lines.append("| | | lead | " + " | ".join(cells) + " |")
    lines += ["", "Candidates:", ""]
    lines += [f"- {i}: {c.name}" for i, c in enumerate(candidates)]
    if len(deltas) > 1:
        names = list(deltas[0])
        lines += [
            "",
            "Each candidate against the defaults: its mean recall over the budgets minus "
            "theirs, points, per data set.",
            "",
            "| candidate | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for i, delta in list(enumerate(deltas))[1:]:
            row = " | ".join(f"{100 * delta[n]:+.1f}" for n in names)
            lines.append(f"| {i}: {candidates[i].name} | {row} |")
    return "\n".join(lines) + "\n"


def run_lodo(
    configs: Sequence[RunConfig],
    candidates: Sequence[Candidate],
    out: Path,
    console: Console,
) -> list[Fold]:
    """Every candidate on every data set (each run resumable), then the folds, written to
    ``out/lodo.md`` and ``out/lodo.json`` and printed."""
    budgets = configs[0].budgets
    if not budgets:
        raise BenchInputError("--lodo needs token budgets (--budget)")
    if len(configs) < 2:
        raise BenchInputError("--lodo needs at least two data sets")
    files = [cfg.data.resolve() for cfg in configs]
    if len(set(files)) < len(files):
        raise BenchInputError(
            "--lodo: a file and its bursty variant are the same conversations; leaving one out "
            "would choose on the other"
        )
    if "tiermem" not in configs[0].systems:
        raise BenchInputError("--lodo chooses tiermem's settings: keep tiermem in --systems")
    summaries = []
    for i, per_set in enumerate(candidate_configs(configs, candidates, out)):
        console.print(f"[bold]candidate {i}[/]: {candidates[i].name}")
        result = run_all(per_set, out / f"c{i}", console)
        summaries.append({name: r["summary"] for name, r in result["runs"].items()})
    names = [cfg.name for cfg in configs]
    folds = choose_folds(summaries, names, budgets)
    deltas = against_defaults(summaries, names, budgets)
    (out / "lodo.md").write_text(
        lodo_markdown(folds, candidates, budgets, deltas), encoding="utf-8"
    )
    saved = {
        "folds": [{**asdict(f), "chosen_name": candidates[int(f.chosen)].name} for f in folds],
        "against_defaults": [
            {"candidate": c.name, **d} for c, d in zip(candidates, deltas, strict=True)
        ],
    }
    (out / "lodo.json").write_text(json.dumps(saved, indent=1), encoding="utf-8")
    table = Table(title="Leave-one-dataset-out: each data set's figure from the others' choice")
    for column in ("left out", "chosen", "system", *map(str, budgets)):
        table.add_column(column)
    for fold in folds:
        chosen = candidates[int(fold.chosen)].name
        table.add_row(fold.dataset, chosen, "tiermem", *(_pct(fold.recall[b]) for b in budgets))
        for base, recall in fold.baselines.items():
            table.add_row("", "", base, *(_pct(recall[b]) for b in budgets))
    console.print(table)
    return folds
