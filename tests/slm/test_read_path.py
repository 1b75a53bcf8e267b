"""Controller and selector on the scripted backend: planning, budgets, routing, fallbacks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from tiermem import Memory
from tiermem.errors import SLMTimeout, SLMUnavailable
from tiermem.policy import Policy, budget_plan
from tiermem.roles.plan import PlanIntent, PlannedQuery, Route, TierBudgets
from tiermem.slm.scripted import ScriptedBackend
from tiermem.types import SearchFilters

from tests.conftest import chat
from tests.slm.conftest import Script, plan, user_prompt

FACTS = [
    ("user", "My sister Ines runs a bakery on Rua da Rosa in Lisbon."),
    ("user", "I booked flight TP1351 to Lisbon for 9 October."),
    ("user", "My dog Miso hates thunderstorms."),
    ("user", "I switched my runs to the evenings."),
]


def _seed(memory: Memory) -> None:
    """Verbatim entries (writer off) so the read path has known candidates."""
    memory.add(chat(*FACTS), user_id="maya", session_id="s1")


@pytest.fixture
def reader(make_slm_memory: Callable[..., Memory], script: Script) -> Memory:
    memory = make_slm_memory(writer={"enabled": False})
    _seed(memory)
    return memory


def test_plan_keeps_the_users_words_and_adds_resolved_queries(
    reader: Memory, script: Script
) -> None:
    script.queue(
        "controller",
        {
            "queries": [
                {"text": "Ines bakery Lisbon", "route": "mtm", "weight": 2},
                {
                    "text": "what does my sister do",
                    "route": "both",
                    "weight": 1,
                },  # repeats the query
                {"text": "sister's job", "route": "ltm", "weight": 1},
            ],
            "since": "",
            "until": "",
            "kinds": [],
        },
    )
    reader.add(chat(("user", "Ines is my sister.")), user_id="maya", session_id="s2")
    hits = reader.search("what does my sister do", "maya", k=2, session_id="s2")
    assert reader.components.meter.snapshot()["controller"]["ok"] == 1
    script.queue("controller", plan("Ines bakery Lisbon", "what does my sister do"))
    made = reader.components.planner.plan(
        "what does my sister do", (), SearchFilters(), datetime(2026, 3, 2, tzinfo=UTC)
    )
    assert [q.text for q in made.queries] == ["what does my sister do", "Ines bakery Lisbon"]
    assert made.queries[0].route is Route.BOTH  # the user's words come first, kept in full
    assert "bakery" in hits[0].entry.text
    assert hits[0].explanation.note.startswith("plan=model")


def test_controller_sees_stm_and_today(
    reader: Memory, script: Script, slm_backend: ScriptedBackend
) -> None:
    seen: list[str] = []
    script.on("controller", lambda r: seen.append(user_prompt(r)) or plan("she said"))
    reader.add(chat(("user", "Ines called me today.")), user_id="maya", session_id="s9")
    reader.search("what did she say", "maya", session_id="s9")
    assert "Ana: Ines called me today." in seen[0]
    system = slm_backend.calls_for("controller")[0]
    assert "Today is 2026-03-02" in system.messages[0].content


def test_controller_dates_become_filters_and_bad_dates_are_dropped(
    reader: Memory, script: Script
) -> None:
    script.queue(
        "controller",
        plan("flight", since="2026-03-01", until="2026-03-03", kinds=("plan",)),
        plan("flight", since="last week"),
        plan("flight", since="2026-03-09", until="2026-03-01"),
    )
    planner = reader.components.planner
    now = datetime(2026, 3, 5, tzinfo=UTC)
    windowed = planner.plan("flight", (), SearchFilters(), now)
    assert windowed.source == "model"
    assert windowed.filters.since == datetime(2026, 3, 1, tzinfo=UTC)
    assert windowed.filters.until is not None
    assert windowed.filters.until.day == 3
    # verbatim turns and exchanges stay searchable
    assert set(windowed.filters.kinds) == {"plan", "turn", "exchange"}
    unparseable = planner.plan("flight", (), SearchFilters(), now)
    assert unparseable.filters.since is None
    assert "unparseable" in unparseable.notes[0]
    inverted = planner.plan("flight", (), SearchFilters(), now)
    assert inverted.filters.since is None
    assert "inverted" in inverted.notes[0]


def test_budget_arithmetic_2k_candidates_k_kept(
    reader: Memory, script: Script, slm_backend: ScriptedBackend
) -> None:
    intent = PlanIntent(
        (
            PlannedQuery("a", Route.MTM, 3.0),
            PlannedQuery("b", Route.LTM, 1.0),
            PlannedQuery("c", Route.BOTH, 2.0),
        ),
        SearchFilters(),
        source="test",
    )
    plan = budget_plan(intent, 5, Policy(candidate_multiplier=2, ltm_share=1.0))
    assert sum(plan.candidate_budgets) == 10
    assert plan.candidate_budgets == (5, 2, 3)
    assert plan.tier_budgets == TierBudgets(mtm=3, ltm=2)  # weight 3 + 1 (half of c) vs 1 + 1
    assert plan.ltm_budgets == (0, 2, 3)  # at most 2 per LTM hit, within each query's budget
    script.on("selector", lambda r: {"supporting": [1, 2, 3, 4]})
    hits = reader.search("Lisbon", "maya", k=2)
    assert len(hits) == 2  # the selector can never keep more than K
    selector_request = slm_backend.calls_for("selector")[-1]
    assert selector_request.json_schema["properties"]["supporting"]["maxItems"] == 2
    numbers = selector_request.json_schema["properties"]["supporting"]["items"]["enum"]
    assert len(numbers) <= 4  # at most 2K candidates were shown


def test_selector_order_and_scores_are_the_models(reader: Memory, script: Script) -> None:
    def pick_dog(request: object) -> dict[str, list[int]]:
        text = user_prompt(request)  # type: ignore[arg-type]
        lines = [ln for ln in text.splitlines() if ln.startswith("[")]
        dog = next(i for i, ln in enumerate(lines, 1) if "Miso" in ln)
        return {"supporting": [dog]}

    script.on("selector", pick_dog)
    hits = reader.search("which pet do I have and what scares it", "maya", k=3)
    assert "Miso" in hits[0].entry.text
    assert hits[0].explanation.components["selector"] == 1.0
    assert len(hits) == 1  # the model kept one; min_keep (1) is already met


def test_selector_keeping_nothing_is_filled_to_min_keep(
    make_slm_memory: Callable[..., Memory], script: Script
) -> None:
    memory = make_slm_memory(writer={"enabled": False}, selector_min_keep=2)
    _seed(memory)
    script.on("selector", lambda r: {"supporting": []})
    hits = memory.search("Lisbon flight", "maya", k=3)
    assert len(hits) == 2
    assert all(h.explanation.components["selector"] == 0.0 for h in hits)


@pytest.mark.parametrize(
    "failure",
    [
        "not json",
        {"supporting": [99]},
        SLMTimeout("selector", "slow"),
        SLMUnavailable("selector", "down"),
    ],
)
def test_selector_fallback_is_first_stage_order_and_counted(
    reader: Memory, script: Script, failure: object
) -> None:
    baseline = reader.search("Lisbon flight", "maya", k=3)  # scripted: keeps [1]
    script.queue("selector", failure)  # type: ignore[arg-type]
    hits = reader.search("Lisbon flight", "maya", k=3)
    stats = reader.components.meter.snapshot()["selector"]
    assert stats["fallbacks"] == 1
    assert len(hits) == 3  # top-K in fused order, not the model's single pick
    assert hits[0].entry.id == baseline[0].entry.id
    assert "selection=fallback" in hits[0].explanation.note
    if failure == "not json" or isinstance(failure, dict):
        assert stats["invalid"] == 1


@pytest.mark.parametrize(
    "failure",
    [
        "{",
        SLMTimeout("controller", "slow"),
        SLMUnavailable("controller", "down"),
        {"queries": [{"text": "x", "route": "moon", "weight": 1}]},
    ],
)
def test_controller_fallback_is_the_plain_query_and_counted(
    reader: Memory, script: Script, failure: object
) -> None:
    script.queue("controller", failure)  # type: ignore[arg-type]
    hits = reader.search("dog thunderstorms", "maya", k=1)
    assert "Miso" in hits[0].entry.text
    assert "plan=fallback" in hits[0].explanation.note
    assert reader.components.meter.snapshot()["controller"]["fallbacks"] == 1


def test_routes_to_ltm_search_mtm_until_ltm_exists(reader: Memory, script: Script) -> None:
    script.queue(
        "controller",
        {
            "queries": [{"text": "Miso dog", "route": "ltm", "weight": 3}],
            "since": "",
            "until": "",
            "kinds": [],
        },
    )
    # With LTM off, LTM's share of k is zero: everything goes to MTM.
    intent = reader.components.planner.plan(
        "my pet", (), SearchFilters(), datetime(2026, 3, 2, tzinfo=UTC)
    )
    assert budget_plan(intent, 2, reader.components.policy).tier_budgets == TierBudgets(2, 0)
    script.queue(
        "controller",
        {
            "queries": [{"text": "Miso dog", "route": "ltm", "weight": 3}],
            "since": "",
            "until": "",
            "kinds": [],
        },
    )
    script.on("selector", lambda r: {"supporting": [1, 2]})
    hits = reader.search("my pet", "maya", k=2)
    assert any("Miso" in h.entry.text for h in hits)
    assert "plan=model" in hits[0].explanation.note


def test_answer_uses_the_model_generator_and_falls_back_to_extractive(
    reader: Memory, script: Script, slm_backend: ScriptedBackend
) -> None:
    script.queue("generator", {"answer": "You fly on 9 October."})
    result = reader.answer("When is my flight?", "maya")
    assert result.text == "You fly on 9 October."
    gen_request = slm_backend.calls_for("generator")[-1]
    assert "TP1351" in user_prompt(gen_request)
    script.queue("generator", SLMTimeout("generator", "slow"))
    fallback = reader.answer("When is my flight?", "maya")
    assert fallback.text.startswith("From memory")
    assert reader.components.meter.snapshot()["generator"]["fallbacks"] == 1


def test_constraints_that_starve_the_first_stage_are_relaxed(
    reader: Memory, script: Script
) -> None:
    """A weak model's kind filter (all of the user's entries are verbatim turns here, but a
    window can exclude them) must not empty the result: it is relaxed and counted."""
    script.queue("controller", plan("Miso thunderstorms", since="2020-01-01", until="2020-12-31"))
    script.on("selector", lambda r: {"supporting": [1]})
    hits = reader.search("dog thunderstorms", "maya", k=2)
    assert "Miso" in hits[0].entry.text
    events = reader.components.meter.snapshot()["controller"]["events"]
    assert events == {"constraints_relaxed": 1}


def test_constraints_that_leave_enough_candidates_are_kept(reader: Memory, script: Script) -> None:
    script.queue("controller", plan("anything", since="2026-03-01", until="2026-03-03"))
    hits = reader.search("Lisbon", "maya", k=1)
    assert hits
    assert "constraints_relaxed" not in reader.components.meter.snapshot()["controller"]["events"]


def test_no_memories_means_no_generator_call(
    make_slm_memory: Callable[..., Memory], script: Script
) -> None:
    memory = make_slm_memory(writer={"enabled": False})
    result = memory.answer("What is my cat called?", "nobody")
    assert result.text == "Memory holds nothing about that."
    assert "generator" not in memory.components.meter.snapshot()
