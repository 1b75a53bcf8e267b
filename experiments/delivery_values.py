"""Issue 53, stop 63: changes to how delivery values a unit, and two first-stage changes,
each run leave-one-dataset-out over the `--lodo` table's memories. None ships
(docs/decisions.md); kept for one commit so the figures in docs/benchmarks.md can be rerun.

    python experiments/delivery_values.py --fusion ranker --work exp density_0.5 decay_3 ...
    python experiments/delivery_values.py --fusion ranker --work exp --table density_0.5 ...

``ranker``: per set, ``<set>/fusion/{state,builds.jsonl,records.jsonl}``: an Edge copy of the
``--lodo`` run's memories and today's defaults run over it (stop 62's learned-ranker work
dir). Each variant runs ``bench locomo`` over a sparse copy of each set's state with the read
path patched, then ``--table`` prints each set's mean recall over the four budgets minus the
defaults' and what each fold (the other three sets' mean) would choose.

Variants (a suffix ``_nolong`` also sets ``long_tokens`` and ``long_share`` to 0):
- ``density_P``: units ordered by value / tokens ** P (value per token);
- ``dturn_P``: the same with a unit's tokens per turn (an exchange of two short turns is short);
- ``decay_K``: a hit's value 1 / (K + rank) instead of 1 / (1 + rank);
- ``prf_M_A``: the dense query moved toward its first M hits' stored vectors by A (Rocchio);
- ``listdistinct``: ``distinct`` applied inside the dense and the BM25 list before fusion;
- ``ownmembers_S``: a turn of an exchange hit offered alone (``member``) keeps its value only
  if the first stage found that turn on its own too (as a turn, a sentence or a piece), and
  S of it otherwise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

DATA = Path("../shared/data")
SETS = ("locomo10", "realtalk_dev_locomo", "beam_dev_locomo", "longmemeval_s_dev")
BUDGETS = (300, 600, 1200, 2400)


def patch(variant: str) -> None:
    """The read path with ``variant``'s change (in this process)."""
    from tiermem.pipeline import deliver, read
    from tiermem.stores.base import HybridHits, nearest

    if variant.startswith(("density_", "dturn_")):
        per_turn, power = variant.startswith("dturn_"), float(variant.split("_")[1])
        hit_units = deliver.hit_units

        def by_density(hits, turns, expansion, later=None, tokens=None, budget_tokens=None):
            units = hit_units(hits, turns, expansion, later, tokens, budget_tokens)
            if tokens is None:
                return units

            def cost(u):
                if not u.turn_ids:
                    return 20
                total = max(1, sum(tokens(turns[t]) for t in u.turn_ids if t in turns))
                return total / len(u.turn_ids) if per_turn else total

            return sorted(units, key=lambda u: -u.value / cost(u) ** power)

        deliver.hit_units = by_density
    elif variant.startswith("decay_"):
        k0 = float(variant.split("_")[1])
        deliver.hit_value = lambda rank: 1.0 / (k0 + rank)
    elif variant.startswith("prf_"):
        m, alpha = int(variant.split("_")[1]), float(variant.split("_")[2])
        hybrid_nearest = read.hybrid_nearest

        def moved(store, user_id, vector, text, filters, limit):
            hits = hybrid_nearest(store, user_id, vector, text, filters, limit)
            top = [h.entry.id for h in hits.dense[:m]]
            stored = store.stored_vectors(user_id, top) if top else {}
            if not stored:
                return hits
            unit = [np.asarray(v, np.float32).reshape(-1) for v in stored.values()]
            centre = np.mean([v / (np.linalg.norm(v) or 1.0) for v in unit], axis=0)
            q = np.asarray(vector, np.float32).reshape(-1)
            q = q / (np.linalg.norm(q) or 1.0) + alpha * centre
            q = (q / (np.linalg.norm(q) or 1.0)).astype(np.float32)
            return HybridHits(nearest(store, user_id, q, filters, limit), hits.lexical)

        read.hybrid_nearest = moved
    elif variant == "listdistinct":
        candidates = read._mtm_candidates

        def dedupe(hits):
            found, first, again = read.FoundTurns(), [], []
            for h in hits:
                (again if found.repeats(h.entry.source_turn_ids) else first).append(h)
                found.add(h.entry.source_turn_ids)
            return first + again

        def deduped(hits, budget, found):
            kept = object.__new__(HybridHits)  # as ordered here: HybridHits() would sort again
            object.__setattr__(kept, "dense", dedupe(hits.dense))
            object.__setattr__(kept, "lexical", dedupe(hits.lexical))
            return candidates(kept, budget, found)

        read._mtm_candidates = deduped
    elif variant.startswith("ownmembers_"):
        share = float(variant.split("_")[1])
        alone: set[str] = set()  # turns the last first stage found on their own
        first_stage, hit_units = read.first_stage, deliver.hit_units

        def recording(*args, **kwargs):
            found = first_stage(*args, **kwargs)
            alone.clear()
            alone.update(t for c in found if len(ids := c.source_turn_ids) == 1 for t in ids)
            return found

        def members_by_own(hits, turns, expansion, later=None, tokens=None, budget_tokens=None):
            units = hit_units(hits, turns, expansion, later, tokens, budget_tokens)
            own = {tuple(t for t in h.source_turn_ids if t in turns) for h in hits}
            parts = {t for ids in own if len(ids) > 1 for t in ids}
            out = [
                replace(u, value=u.value * share)
                if len(u.turn_ids) == 1
                and u.turn_ids not in own
                and u.turn_ids[0] in parts
                and u.turn_ids[0] not in alone
                else u
                for u in units
            ]
            return sorted(out, key=lambda u: -u.value)

        read.first_stage, deliver.hit_units = recording, members_by_own
    else:
        sys.exit(f"unknown variant {variant}")


def bench_one(variant: str, name: str, out: Path) -> None:
    patch(variant.removesuffix("_nolong"))
    from tiermem.cli import main

    args = ["bench", "locomo", "--data", str(DATA / f"{name}.json"), "--max-questions", "40"]
    args += ["--sample", "12", "--systems", "tiermem", "--budget", ",".join(map(str, BUDGETS))]
    args += ["--embed-cache", str(Path("~/.cache/tiermem/embed").expanduser())]
    if variant.endswith("_nolong"):
        config = out.parent / "nolong.toml"
        config.write_text("[delivery]\nlong_tokens = 0\nlong_share = 0\n")
        args += ["--config", str(config)]
    sys.exit(main([*args, "--out", str(out), "--resume"]))


def recall(records: Path) -> list[float]:
    by_budget: dict[int, list[float]] = {}
    for r in map(json.loads, records.open()):
        if r["system"] == "tiermem" and r["recall"] is not None:
            by_budget.setdefault(r["budget"], []).append(r["recall"])
    return [100 * statistics.mean(by_budget[b]) for b in BUDGETS]


def table(fusion: Path, work: Path, variants: list[str]) -> None:
    base = {s: recall(fusion / s / "fusion" / "records.jsonl") for s in SETS}
    diff = {
        v: {
            s: [b - a for a, b in zip(base[s], recall(work / v / s / "records.jsonl"), strict=True)]
            for s in SETS
        }
        for v in variants
    }
    mean = {v: {s: statistics.mean(diff[v][s]) for s in SETS} for v in variants}
    print("| variant | " + " | ".join(SETS) + " |")
    for v in variants:
        print(f"| {v} | " + " | ".join(f"{mean[v][s]:+.2f}" for s in SETS) + " |")
    for left in SETS:
        others = {v: statistics.mean(mean[v][s] for s in SETS if s != left) for v in variants}
        best = max(others, key=others.__getitem__)
        if others[best] <= 0:
            print(f"leaving out {left}: the defaults")
            continue
        cells = " / ".join(f"{x:+.1f}" for x in diff[best][left])
        print(f"leaving out {left}: {best} ({others[best]:+.2f} on the others), left out {cells}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--fusion", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--one", nargs=2, metavar=("SET", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        bench_one(a.variants[0], a.one[0], Path(a.one[1]))
    if a.table:
        table(a.fusion, a.work, a.variants)
        return
    for variant in a.variants:
        for name in SETS:
            out = a.work / variant / name
            out.mkdir(parents=True, exist_ok=True)
            src = a.fusion / name / "fusion"
            if not (out / "state").exists():  # sparse: a plain copy of Edge shards fills a disk
                copy = ["cp", "-a", "--sparse=always", str(src / "state"), str(out)]
                subprocess.run(copy, check=True)
            (out / "builds.jsonl").write_text((src / "builds.jsonl").read_text())
            cmd = [sys.executable, __file__, variant, "--fusion", str(a.fusion)]
            subprocess.run([*cmd, "--work", str(a.work), "--one", name, str(out)], check=True)
            subprocess.run(["rm", "-rf", str(out / "state")], check=True)


if __name__ == "__main__":
    main()
