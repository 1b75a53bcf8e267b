"""``tiermem bench locomo --lodo``: each data set's figure comes from the candidate chosen on
the other data sets; candidates share the first one's memories; bad grids are typed errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from tiermem.bench import BenchInputError
from tiermem.bench.lodo import candidate_configs, choose_folds, parse_grid, run_lodo
from tiermem.bench.suite import dataset_configs
from tiermem.cli import main

from tests.engine.test_bench_suite import _base, files  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow  # whole benchmark runs, one per candidate


def _records(folder: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (folder / "records.jsonl").read_text().splitlines()]


def test_each_data_set_is_scored_by_the_choice_made_on_the_others(
    files: tuple[Path, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    locomo, lme = files
    configs = dataset_configs(_base(tmp_path), [locomo, lme])
    candidates = parse_grid(["delivery.member=0.0", "delivery.later=0.0,0.05"])
    assert len(candidates) == 3
    out = tmp_path / "lodo"
    folds = run_lodo(configs, candidates, out, Console(quiet=True))
    assert [f.dataset for f in folds] == ["locomo_fx", "lme_fx"]
    summaries = [
        {
            name: json.loads((out / f"c{i}" / name / "results.json").read_text())["summary"]
            for name in ("locomo_fx", "lme_fx")
        }
        for i in range(3)
    ]
    for fold, other in zip(folds, ("lme_fx", "locomo_fx"), strict=True):
        # the chosen candidate is the best on the other data set (the first of equals) ...
        means = [
            sum(s[other]["curve"]["tiermem"][str(b)]["overall"]["recall"] for b in (25, 1000)) / 2
            for s in summaries
        ]
        assert int(fold.chosen) == means.index(max(means))
        # ... and the figure reported is that candidate's on the data set left out
        chosen = summaries[int(fold.chosen)][fold.dataset]["curve"]["tiermem"]
        assert fold.recall == {b: chosen[str(b)]["overall"]["recall"] for b in (25, 1000)}
        assert set(fold.baselines) == {"naive-rag", "bm25", "hybrid"}
    # the baselines run once; later candidates run tiermem alone, on the first's memories
    assert {r["system"] for r in _records(out / "c1" / "lme_fx")} == {"tiermem"}
    assert not (out / "c1" / "lme_fx" / "state").exists()
    assert (out / "c0" / "lme_fx" / "state").is_dir()
    table = (out / "lodo.md").read_text()
    assert "| locomo_fx |" in table
    assert "- 1: delivery.member=0.0 delivery.later=0.0" in table
    # each candidate against the defaults, per data set, as the table and lodo.json give it
    saved = json.loads((out / "lodo.json").read_text())["against_defaults"]
    for i, row in enumerate(saved):
        for name in ("locomo_fx", "lme_fx"):
            mean = [
                sum(s[name]["curve"]["tiermem"][str(b)]["overall"]["recall"] for b in (25, 1000))
                / 2
                for s in (summaries[i], summaries[0])
            ]
            assert row[name] == pytest.approx(mean[0] - mean[1])
    assert (
        f"| 2: delivery.member=0.0 delivery.later=0.05 | {100 * saved[2]['locomo_fx']:+.1f}"
        in table
    )


def test_choose_folds_never_looks_at_the_data_set_left_out() -> None:
    def summary(recall: float) -> dict[str, object]:
        return {"curve": {"tiermem": {300: {"overall": {"recall": recall}}}}}

    # candidate 1 is far better on "a" alone: it is chosen for "b" and "c", never for "a"
    runs = [
        {"a": summary(0.5), "b": summary(0.5), "c": summary(0.5)},
        {"a": summary(0.9), "b": summary(0.5), "c": summary(0.5)},
    ]
    folds = choose_folds(runs, ["a", "b", "c"], [300])
    assert [f.chosen for f in folds] == ["0", "1", "1"]
    assert folds[0].recall[300] == 0.5  # a's figure is the defaults', chosen on b and c


def test_bad_grids_and_runs_are_refused(
    files: tuple[Path, Path],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(BenchInputError, match=r"section\.setting=value"):
        parse_grid(["member=0.3"])
    with pytest.raises(BenchInputError, match=r"section\.setting=value"):
        parse_grid(["delivery.member=,"])
    with pytest.raises(BenchInputError, match="only read-path settings"):
        parse_grid(["slm.writer_supersedes=true"])  # it would be judged on the same memories
    with pytest.raises(BenchInputError, match="only read-path settings"):
        parse_grid([], ["delivery.member=0 slm.writer_supersedes=true"])
    with pytest.raises(BenchInputError, match="--lodo-try"):
        parse_grid([], ["delivery.member=0,1"])  # one value each: it is one candidate
    locomo, lme = files
    both = dataset_configs(_base(tmp_path), [locomo, lme])
    with pytest.raises(BenchInputError, match=r"delivery\.no_such_knob"):
        candidate_configs(both, parse_grid(["delivery.no_such_knob=1"]), tmp_path / "o")
    with pytest.raises(BenchInputError, match="at least two data sets"):
        run_lodo(both[:1], parse_grid([]), tmp_path / "o", Console(quiet=True))
    twins = dataset_configs(_base(tmp_path), [lme], [lme])
    with pytest.raises(BenchInputError, match="bursty variant"):
        run_lodo(twins, parse_grid([]), tmp_path / "o", Console(quiet=True))
    data = tmp_path / "x.json"
    data.write_text("[]")
    argv = ["bench", "locomo", "--data", str(data), "--out", str(tmp_path / "o")]
    assert main([*argv, "--lodo-grid", "delivery.member=0.1"]) == 2
    assert "add --lodo" in capsys.readouterr().out
    assert main([*argv, "--lodo-try", "delivery.member=0.1"]) == 2
    assert "add --lodo" in capsys.readouterr().out
