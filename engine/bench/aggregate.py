"""A benchmark run's figures from its per-question records: means and latency percentiles per
system, question group, conversation and budget; the recall-versus-tokens curve; the
worst-served questions. Pure functions over the records; ``tiermem.bench.report`` renders them.

A record's ``group`` is its question's ``question_type`` where the data set has one, else its
category; the headline counts the questions with evidence that are not adversarial
(:attr:`tiermem.bench.datasets.conversation.Question.headline`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tiermem.bench.datasets.conversation import ADVERSARIAL
from tiermem.bench.stats import percentile


def is_headline(record: dict[str, Any]) -> bool:
    """A record of a headline question: it has evidence and is not adversarial.

    >>> is_headline({"evidence": ["D1:1"], "category": "temporal"})
    True
    >>> is_headline({"evidence": ["D1:1"], "category": "adversarial"})
    False
    """
    return bool(record["evidence"]) and record["category"] != ADVERSARIAL


def group_of(record: dict[str, Any]) -> str:
    """The group a record is reported under: its question type, else its category."""
    return str(record.get("question_type") or record["category"])


def groups(records: Sequence[dict[str, Any]]) -> list[str]:
    """The groups of the headline records, sorted by name.

    >>> groups([{"evidence": ["x"], "category": "temporal", "question_type": "multi-session"},
    ...         {"evidence": ["x"], "category": "single-hop"},
    ...         {"evidence": [], "category": "open-domain"}])
    ['multi-session', 'single-hop']
    """
    return sorted({group_of(r) for r in records if is_headline(r)})


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means and latency percentiles over a set of records (one system, maybe one group)."""
    recall = [r["recall"] for r in rows if r["recall"] is not None]
    answered = [r for r in rows if r.get("answer") is not None]
    judged = [r for r in answered if r.get("judge") is not None]
    retrieval = [r["retrieval_s"] for r in rows]
    e2e = [r["e2e_s"] for r in rows]
    return {
        "questions": len(rows),
        "recall": _mean(recall),
        "recall_questions": len(recall),
        "context_tokens": _mean([r["context_tokens"] for r in rows]),
        "context_tokens_max": max((r["context_tokens"] for r in rows), default=None),
        "retrieval_p50_s": percentile(retrieval, 50) if retrieval else None,
        "retrieval_p95_s": percentile(retrieval, 95) if retrieval else None,
        "e2e_p50_s": percentile(e2e, 50) if e2e else None,
        "e2e_p95_s": percentile(e2e, 95) if e2e else None,
        "answered": len(answered),
        "f1": _mean([r["f1"] for r in answered]),
        "bleu1": _mean([r["bleu1"] for r in answered]),
        "judge_accuracy": _mean([1.0 if r["judge"] == "CORRECT" else 0.0 for r in judged]),
    }


HEADLINE_BUDGET = 1200


def headline_budget(records: Sequence[dict[str, Any]]) -> int | None:
    """The budget the headline is read at: 1,200 tokens, or the measured one nearest it."""
    budgets = {int(r["budget"]) for r in records if r.get("budget") is not None}
    return min(budgets, key=lambda b: (abs(b - HEADLINE_BUDGET), b)) if budgets else None


def at_headline(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of the headline budget, and those measured without one (full context)."""
    budget = headline_budget(records)
    return [r for r in records if r.get("budget") in (None, budget)]


def _by_group(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    return {g: summarise([r for r in rows if is_headline(r) and group_of(r) == g]) for g in names}


def curve(records: Sequence[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """Per system, per budget: the headline summary (``overall``) and, under ``groups``, one
    per question group."""
    names = groups(records)
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for r in records:
        if r.get("budget") is not None:
            out.setdefault(r["system"], {}).setdefault(r["budget"], {})
    for system, budgets in out.items():
        for budget in sorted(budgets):
            mine = [r for r in records if r["system"] == system and r.get("budget") == budget]
            budgets[budget] = {
                "overall": summarise([r for r in mine if is_headline(r)]),
                "groups": _by_group(mine, names),
            }
        out[system] = dict(sorted(budgets.items()))
    return out


def worst_served(
    records: Sequence[dict[str, Any]], system: str = "tiermem", n: int = 20
) -> dict[str, list[dict[str, Any]]]:
    """Per question group, the ``n`` questions of ``system`` (at the headline budget) with
    the least evidence delivered, the costliest first among equals."""
    mine = [r for r in at_headline(records) if r["system"] == system and is_headline(r)]
    return {
        g: sorted(
            (r for r in mine if group_of(r) == g),
            key=lambda r: (r["recall"], -r["context_tokens"]),
        )[:n]
        for g in groups(records)
    }


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    systems = list(dict.fromkeys(r["system"] for r in records))
    out: dict[str, Any] = {
        "overall": {},
        "adversarial": {},
        "groups": groups(records),
        "by_group": {},
        "by_conversation": {},
        "headline_budget": headline_budget(records),
        "curve": curve(records),
    }
    records = at_headline(records)
    for sample in dict.fromkeys(r["sample"] for r in records):
        out["by_conversation"][sample] = {
            system: summarise(
                [
                    r
                    for r in records
                    if r["sample"] == sample and r["system"] == system and is_headline(r)
                ]
            )
            for system in systems
        }
    for system in systems:
        mine = [r for r in records if r["system"] == system]
        out["overall"][system] = summarise([r for r in mine if is_headline(r)])
        out["adversarial"][system] = summarise([r for r in mine if r["category"] == ADVERSARIAL])
        out["by_group"][system] = _by_group(mine, out["groups"])
    return out
