"""SLM-1 as the read path's planner.

Fallback (counted as ``controller`` fallbacks in the meter): on invalid output, timeout or an
unreachable backend, the plan is the user's own query routed to both tiers (MTM, and LTM when
it is on), with no constraints.
Whatever the model says, the user's query is kept as one of the queries (the first), so a
weak model cannot lose the original intent; the model adds at most three.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, time

from tiermem.errors import SLMError
from tiermem.roles.plan import PlanIntent, PlannedQuery, Route
from tiermem.slm.prompts import controller as prompt
from tiermem.slm.roles.common import Role, RoleRuntime
from tiermem.types import MemoryKind, SearchFilters, Turn

MAX_QUERIES = 4


def _parse_day(value: str) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def resolve_constraints(
    output: prompt.ControllerOutput, given: SearchFilters
) -> tuple[SearchFilters, list[str]]:
    """Turn the model's dates and kinds into filters. The caller's own filters win; an
    unusable or inverted window is dropped, and a note says so."""
    notes: list[str] = []
    since_day, until_day = _parse_day(output.since), _parse_day(output.until)
    if (output.since and since_day is None) or (output.until and until_day is None):
        notes.append("controller dates unparseable; window dropped")
        since_day = until_day = None
    if since_day and until_day and since_day > until_day:
        notes.append("controller window inverted; dropped")
        since_day = until_day = None
    since = datetime.combine(since_day, time.min, UTC) if since_day else None
    until = datetime.combine(until_day, time.max, UTC) if until_day else None
    kinds = tuple(dict.fromkeys(MemoryKind(k) for k in output.kinds))
    if kinds:
        # Verbatim entries (turns, exchanges) are evidence of every kind; never filter them away.
        kinds = (*kinds, MemoryKind.TURN, MemoryKind.EXCHANGE)
    return replace(
        given,
        since=given.since or since,
        until=given.until or until,
        kinds=given.kinds or kinds,
    ), notes


class SLMController(Role):
    """Plans a search: the user's query plus the model's, with routes, weights and
    constraints. It makes no budgets; the read path does, from ``Policy``."""

    name = "slm-controller"

    def __init__(self, runtime: RoleRuntime, stm_turns: int = 6) -> None:
        super().__init__(runtime)
        self._stm_turns = stm_turns

    def plan(
        self, query: str, stm: Sequence[Turn], filters: SearchFilters, now: datetime
    ) -> PlanIntent:
        inp = prompt.ControllerInput(
            query=query,
            recent_turns=[f"{t.speaker}: {t.content}" for t in stm[-self._stm_turns :]],
            today=now.date(),
        )
        try:
            output = self._rt.call(prompt.SPEC, prompt.build_messages(inp))
        except SLMError as exc:
            self._rt.fallback(prompt.SPEC.name, exc, "the plain query")
            return PlanIntent(
                (PlannedQuery(query, Route.BOTH),),
                filters,
                "fallback",
                (f"controller fallback: {type(exc).__name__}",),
            )
        queries = [PlannedQuery(query, Route.BOTH, 3.0)]
        seen = {query.strip().lower()}
        for q in output.queries:
            text = q.text.strip()
            if text and text.lower() not in seen and len(queries) < MAX_QUERIES:
                seen.add(text.lower())
                queries.append(PlannedQuery(text, Route(q.route), float(q.weight)))
        merged, notes = resolve_constraints(output, filters)
        return PlanIntent(tuple(queries), merged, "model", tuple(notes))
