"""Issue 53, stop 63: where a set's budget goes with today's defaults (docs/benchmarks.md,
"What a unit is worth"). Kept for one commit so the figures can be rerun.

    python experiments/budget_spend.py spend --state S --records R --budget 300
    python experiments/budget_spend.py missed --state S --records R --baseline B --budget 300

``S``: a ``bench locomo`` run's ``state`` (a copy: reading counts accesses, which a closing
memory writes); ``R``: that run's ``records.jsonl``; ``B``: records holding ``hybrid``.

``spend``: ``context()`` again for every question, each unit that delivery packs sorted into
a hit of one turn, a whole exchange hit, a turn of an exchange hit alone (a member), a later
statement, or a piece's line; its tokens, and the evidence turns it delivered first.
``missed``: for the evidence turns ``hybrid`` delivered and tiermem did not, where the turn
stands in tiermem's own ranking (``search()`` with ``k`` 300).
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path
from typing import Any

from tiermem import context as cx
from tiermem.config import TiermemConfig
from tiermem.memory import Memory
from tiermem.pipeline import deliver

now: dict[str, Any] = {"types": {}, "evidence": set(), "credited": set()}
tokens: collections.Counter[str] = collections.Counter()
units: collections.Counter[str] = collections.Counter()
evidence: collections.Counter[str] = collections.Counter()


def memory(state: Path, conversation: str) -> Memory:
    paths = TiermemConfig.for_data_dir(state / conversation)
    update = {"data_dir": paths.data_dir, "mtm": paths.mtm, "journal": paths.journal}
    return Memory(TiermemConfig().model_copy(update=update))


def typed_units(hits, turns, *args, **kwargs):
    offered = hit_units(hits, turns, *args, **kwargs)
    own = {tuple(t for t in h.source_turn_ids if t in turns) for h in hits}
    parts = {t for ids in own if len(ids) > 1 for t in ids}
    for u in offered:
        if u.turn_ids in own:
            kind = "hit of one turn" if len(u.turn_ids) == 1 else "whole exchange hit"
        elif len(u.turn_ids) == 1 and u.turn_ids[0] in parts:
            kind = "member"
        else:
            kind = "later statement"
        now["types"][id(u)] = kind
    return offered


def counted_pack(offered, turns, budget_tokens, counter=None, costs=None):
    """``tiermem.context.pack``, step for step, counting what each kind of unit costs."""
    costs = costs or cx.LineCosts(counter or cx.ApproxTokenCounter())
    layout, repeats, used = cx._Layout(turns, costs), cx._Repeats(turns), 0
    for unit in offered:
        if unit.line is None and (not unit.turn_ids or any(t not in turns for t in unit.turn_ids)):
            continue
        if unit.line is not None and unit.line in layout.notes:
            continue
        if repeats.only_repeats(unit):
            continue
        total, changed = layout.cost_with(unit)
        kind = now["types"].get(id(unit), "line")
        if total <= budget_tokens:
            layout.apply(unit, total, changed)
            repeats.add(unit)
            tokens[kind] += total - used
            units[kind] += 1
            used = total
            for t in unit.turn_ids:
                if t in now["evidence"] and t not in now["credited"]:
                    evidence[kind] += 1
                    now["credited"].add(t)
        elif unit.fallback is not None and unit.fallback not in layout.notes:
            line = cx.Unit((), unit.value, unit.fallback)
            total, changed = layout.cost_with(line)
            if total <= budget_tokens:
                layout.apply(line, total, changed)
                tokens["a piece's line"] += total - used
                used = total
    return cx.render(layout.sessions, layout.notes, budget_tokens, costs.counter)


hit_units = deliver.hit_units


def spend(state: Path, records: dict[tuple[str, int], dict[str, Any]], budget: int) -> None:
    deliver.hit_units, deliver.pack = typed_units, counted_pack
    for conversation in sorted({s for s, _ in records}):
        with memory(state, conversation) as m:
            for (s, _), r in records.items():
                if s == conversation:
                    now.update(evidence=set(r["evidence"]), credited=set())
                    m.context(r["question"], conversation, budget)
    asked = len(records)
    print(f"budget {budget}, {asked} questions")
    for kind, spent in tokens.most_common():
        per_k = 1000 * evidence[kind] / max(spent, 1)
        print(f"  {kind}: {spent / asked:.1f} tokens a question, {units[kind] / asked:.2f} units,")
        print(f"    {evidence[kind]} evidence turns, {per_k:.2f} per 1,000 tokens")


def missed(state: Path, records, baseline, budget: int) -> None:
    places: list[int | None] = []
    for conversation in sorted({s for s, _ in records}):
        with memory(state, conversation) as m:
            for key, r in records.items():
                if key[0] != conversation:
                    continue
                gold = set(r["evidence"])
                lost = (set(baseline[key]["delivered"]) & gold) - set(r["delivered"])
                if lost:
                    hits = m.search(r["question"], conversation, k=300)
                    for t in lost:
                        found = (i for i, h in enumerate(hits) if t in h.source_turn_ids)
                        places.append(next(found, None))
    bands = collections.Counter(
        "not in the first 300" if p is None else next(f"< {n}" for n in (25, 50, 100, 300) if p < n)
        for p in places
    )
    print(f"budget {budget}: {len(places)} evidence turns hybrid delivered and tiermem did not")
    print("  their place in tiermem's ranking:", dict(sorted(bands.items())))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=("spend", "missed"))
    ap.add_argument("--state", type=Path, required=True)
    ap.add_argument("--records", type=Path, required=True)
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--budget", type=int, required=True)
    a = ap.parse_args()

    def of(path: Path, system: str) -> dict[tuple[str, int], dict[str, Any]]:
        rows = map(json.loads, path.open())
        return {
            (r["sample"], r["index"]): r
            for r in rows
            if r["system"] == system and r["budget"] == a.budget
        }

    if a.step == "spend":
        spend(a.state, of(a.records, "tiermem"), a.budget)
    else:
        missed(a.state, of(a.records, "tiermem"), of(a.baseline, "hybrid"), a.budget)


if __name__ == "__main__":
    main()
