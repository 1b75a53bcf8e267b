"""With the SLM roles on: the controller routes queries to LTM, and the selector sees LTM
knowledge beside MTM memories in one candidate list."""

from __future__ import annotations

from pathlib import Path

from tiermem import ManualClock, Memory, SearchFilters, Tier
from tiermem.config import BackendConfig, SLMConfig
from tiermem.policy import budget_plan
from tiermem.roles.plan import TierBudgets

from tests.conftest import chat
from tests.fakes.scripted import KIND, ScriptedModels
from tests.offline.conftest import MODEL, ltm_config, node, units
from tests.slm.conftest import Script, numbered


def test_controller_routes_to_ltm_and_the_selector_sees_both_tiers(
    tmp_path: Path, clock: ManualClock, scripted_models: ScriptedModels
) -> None:
    script = Script()
    backend = scripted_models.serve(MODEL, script)  # one scripted model serves every task
    config = ltm_config(tmp_path, MODEL)
    config = config.model_copy(
        update={
            "slm": SLMConfig(
                backend=BackendConfig(kind=KIND, model=MODEL),
                writer={"enabled": False},
                selector_mode="listwise",
            )
        }
    )
    with Memory(config, clock=clock) as memory:
        script.on(
            "consolidator",
            lambda r: units([node("sourdough", "bread leavened by a starter culture")]),
        )
        memory.add(chat(("user", "I bake sourdough bread every Sunday")), "alice")
        assert memory.consolidate_now().counts.inserted == 1

        memory.add(chat(("user", "My oven broke yesterday")), "bob", "s1")
        script.queue(
            "controller",
            {
                "queries": [{"text": "sourdough starter bread", "route": "ltm", "weight": 3}],
                "since": "",
                "until": "",
                "kinds": [],
            },
        )

        def pick_knowledge(request):  # type: ignore[no-untyped-def]
            lines = numbered(request, "Memories:")
            return {
                "supporting": [i for i, line in enumerate(lines, 1) if "general knowledge" in line]
            }

        script.on("selector", pick_knowledge)
        hits = memory.search("what is sourdough", "bob", k=4)
        selector_prompt = backend.calls_for("selector")[-1].messages[-1].content
        assert "[general knowledge] sourdough (Concept)" in selector_prompt
        assert "oven broke" in selector_prompt  # MTM candidates beside it
        assert [h.tier for h in hits] == [Tier.LTM]
        assert hits[0].fact.kind == "Concept"  # shared knowledge, owned by neither user
        assert "alice" not in hits[0].text
        # The controller's "ltm" route counts fully to LTM, but LTM's share of k is capped.
        script.queue(
            "controller",
            {
                "queries": [{"text": "sourdough", "route": "ltm", "weight": 3}],
                "since": "",
                "until": "",
                "kinds": [],
            },
        )
        intent = memory.components.planner.plan("x", (), SearchFilters(), clock.now())
        budgets = budget_plan(intent, 10, memory.components.policy)
        assert budgets.tier_budgets == TierBudgets(mtm=7, ltm=3)
