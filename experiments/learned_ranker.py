"""Issue 53's learned ranker, trained leave-one-dataset-out: a gradient-boosted classifier over
the first stage's own features reorders the pool in place of rank fusion (``distinct`` applied
after, ``k`` kept). Not shipped (docs/decisions.md); kept here for one commit so the figures in
docs/benchmarks.md can be reproduced.

    python experiments/learned_ranker.py dump --lodo-out lodo --work ranker
    python experiments/learned_ranker.py run --work ranker --features all
    python experiments/learned_ranker.py run --work ranker --features scores

``lodo``: the ``--out`` of the four-set ``bench locomo --lodo`` run (its ``<set>/state``).
``dump`` runs fusion over an Edge copy of each set's memories and writes every pool the
selector sees; ``run`` fits one model per fold on the other three sets' pools and runs
``bench locomo`` on the left-out set with it, then prints left-out minus fusion.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.pipeline import make_pipeline

DATA = Path("../shared/data")
SETS = ("locomo10", "realtalk_dev_locomo", "beam_dev_locomo", "longmemeval_s_dev")
BUDGETS = (300, 600, 1200, 2400)
# rank, position against k, dense score and its gap to the pool's best, BM25 score over the
# pool's best, fused score, pool size; then the entry's kind, source turns and length
SCORES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12]
ALL = list(range(13))


def features(cands, k):
    dense = [c.components["dense"] for c in cands if "dense" in c.components]
    bm25 = [c.components["bm25"] for c in cands if "bm25" in c.components]
    dmax, bmax = max(dense, default=0.0), max(bm25, default=1.0) or 1.0
    rows = []
    for i, c in enumerate(cands):
        d, b, e = c.components.get("dense"), c.components.get("bm25"), c.item
        rows.append([
            math.log1p(i), i / max(k, 1), float(i < k),
            d if d is not None else 0.0, d - dmax if d is not None else -0.5, float(d is None),
            b / bmax if b is not None else 0.0, float(b is None), c.fused,
            float(getattr(e, "kind", "") == "exchange"),
            float(len(getattr(e, "source_turn_ids", ()))),
            math.log1p(len(e.text.split())), math.log1p(len(cands)),
        ])  # fmt: skip
    return rows


def patched(pools: Path | None, model) -> None:
    """The bench's tiermem with the selector recording its pools, or reordering them."""
    from tiermem.bench import systems
    from tiermem.pipeline.read import FoundTurns
    from tiermem.roles import plan

    asked: dict[str, str] = {}
    deliver = systems.Tiermem.deliver

    def recording_deliver(self, question, budgets):
        asked.update(user=self._user, question=question)
        return deliver(self, question, budgets)

    top_k = plan.TopKSelector.select
    out = pools.open("w") if pools else None

    def select(self, queries, candidates, k):
        if out is not None or not candidates:
            if out is not None:
                turns = [list(getattr(c.item, "source_turn_ids", ())) for c in candidates]
                row = {**asked, "k": k, "x": features(candidates, k), "turns": turns}
                out.write(json.dumps(row) + "\n")
            return top_k(self, queries, candidates, k)
        s = model.predict_proba(np.asarray(features(candidates, k)))[:, 1]
        found, first, again = FoundTurns(), [], []
        for i in sorted(range(len(candidates)), key=lambda i: (-s[i], i)):
            own = getattr(candidates[i].item, "source_turn_ids", ())
            (again if found.repeats(own) else first).append(i)
            found.add(own)
        kept = tuple((candidates[i], float(s[i])) for i in (first + again)[:k])
        return plan.Selection(kept, "passthrough")

    systems.Tiermem.deliver = recording_deliver
    plan.TopKSelector.select = select


def bench(name: str, out: Path) -> None:
    from tiermem.cli import main

    args = ["bench", "locomo", "--data", str(DATA / f"{name}.json"), "--max-questions", "40"]
    args += ["--sample", "12", "--systems", "tiermem", "--budget", ",".join(map(str, BUDGETS))]
    args += ["--embed-cache", str(Path("~/.cache/tiermem/embed").expanduser())]
    if main([*args, "--out", str(out), "--resume"]) != 0:
        sys.exit(f"bench locomo failed on {name}")


def copy_run(run: Path, out: Path) -> None:
    """A bench run's stored memories and tiermem's builds, to resume from."""
    shutil.copytree(run / "state", out / "state")
    with (run / "builds.jsonl").open() as builds:
        (out / "builds.jsonl").write_text("".join(b for b in builds if '"tiermem"' in b))


def copy_state(lodo: Path, name: str, out: Path) -> None:
    """The set's memories as the --lodo run stored them, moved to Edge shards."""
    copy_run(lodo / name, out)
    for conv in (out / "state").iterdir():
        if conv.is_dir():
            cmd = [sys.executable, "-m", "tiermem.cli", "migrate", "--to", "edge"]
            subprocess.run([*cmd, "--data-dir", str(conv)], check=True, capture_output=True)


def pools(work: Path, name: str):
    evidence = {}
    for line in (work / name / "fusion" / "records.jsonl").open():
        r = json.loads(line)
        evidence[(r["sample"], r["question"])] = set(r["evidence"])
    for line in (work / name / "pools.jsonl").open():
        p = json.loads(line)
        if gold := evidence.get((p["user"], p["question"])):
            yield np.asarray(p["x"]), np.asarray([int(bool(gold & set(t))) for t in p["turns"]])


def recall(records: Path) -> list[float]:
    by_budget: dict[int, list[float]] = {}
    for line in records.open():
        r = json.loads(line)
        if r["recall"] is not None:
            by_budget.setdefault(r["budget"], []).append(r["recall"])
    return [100 * float(np.mean(by_budget[b])) for b in BUDGETS]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=("dump", "run", "dump-one", "eval-one"))
    ap.add_argument("--model", type=Path)
    ap.add_argument("--set")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--lodo-out", type=Path)
    ap.add_argument("--features", choices=("all", "scores"), default="scores")
    a = ap.parse_args()
    if a.step in ("dump-one", "eval-one"):  # one process a run: patched() patches for good
        model = pickle.load(a.model.open("rb")) if a.model else None
        patched(a.work / a.set / "pools.jsonl" if model is None else None, model)
        bench(a.set, a.out)
        return
    if a.step == "dump":
        for name in SETS:
            out = a.work / name / "fusion"
            copy_state(a.lodo_out, name, out)
            one = [sys.executable, __file__, "dump-one", "--work", str(a.work), "--set", name]
            subprocess.run([*one, "--out", str(out)], check=True, capture_output=True)
        return
    cols = ALL if a.features == "all" else SCORES
    for left_out in SETS:
        xs, ys = zip(*(p for s in SETS if s != left_out for p in pools(a.work, s)), strict=True)
        model = make_pipeline(
            ColumnTransformer([("cols", "passthrough", cols)]),
            HistGradientBoostingClassifier(max_iter=100, max_depth=3, random_state=0),
        ).fit(np.vstack(xs), np.concatenate(ys))
        out = a.work / left_out / f"ranker_{a.features}"
        path = a.work / f"model_{a.features}_minus_{left_out}.pkl"
        pickle.dump(model, path.open("wb"))
        copy_run(a.work / left_out / "fusion", out)
        one = [sys.executable, __file__, "eval-one", "--work", str(a.work), "--model", str(path)]
        one += ["--set", left_out, "--out", str(out)]
        subprocess.run(one, check=True, capture_output=True)
        base = recall(a.work / left_out / "fusion" / "records.jsonl")
        got = recall(out / "records.jsonl")
        diff = " / ".join(f"{g - f:+.1f}" for g, f in zip(got, base, strict=True))
        shown = " / ".join(f"{g:.1f}" for g in got)
        print(f"{left_out}: ranker {shown}, minus fusion {diff}", flush=True)


if __name__ == "__main__":
    main()
