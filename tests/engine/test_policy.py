"""Every setting in ``Policy`` reaches the pipeline: for each field, two configurations that
differ only in the setting behind it give a different result a user can see. A setting that
is read from the config but never handed on (``slm.supersede_min_similarity`` once was) fails
here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tiermem import ManualClock, Memory, Tier, TiermemConfig
from tiermem.config import DeliveryConfig, merge_overrides
from tiermem.config.tuning import REMOVED
from tiermem.errors import ConfigError
from tiermem.policy import Policy, policy_from_config
from tiermem.slm.base import SLMRequest
from tiermem.types import VERBATIM_KINDS

from tests.conftest import T0, chat
from tests.fakes.scripted import KIND, ScriptedModels
from tests.offline.conftest import ltm_config, one_node_per_memory
from tests.slm.conftest import Script, entry, numbered, slm_config

FACTS = [
    "My sister Ines runs a bakery in Lisbon.",
    "I booked a flight to Lisbon for October.",
    "My dog Miso hates thunderstorms.",
    "I switched my runs to the evenings.",
    "My flat in Lisbon has a small balcony.",
    "I grow tomatoes on the balcony in Lisbon.",
]


def _open(
    config: TiermemConfig, clock: ManualClock, models: ScriptedModels, script: Script | None = None
) -> Memory:
    """A memory whose scripted models (the online roles' and the consolidation's) answer with
    ``script``."""
    if script is not None:
        for backend in (config.slm.backend, config.ltm.consolidation.backend):
            if backend.kind == KIND:
                models.serve(backend.model, script)
    return Memory(config, clock=clock)


def _entries_after_a_near_repeat(
    config: TiermemConfig, clock: ManualClock, models: ScriptedModels
) -> object:
    script = Script()
    script.queue(
        "writer",
        {"entries": [entry("Maya's sister Ines runs a bakery in Lisbon.", 1)]},
        {"entries": [entry("Maya's sister Ines runs a bakery in Lisbon now.", 1)]},
    )
    with _open(config, clock, models, script) as memory:
        memory.add(chat(("user", "My sister Ines runs a bakery in Lisbon.")), "maya")
        memory.add(chat(("user", "Ines still runs that bakery.")), "maya")
        return [e.text for e in memory.get_all("maya") if e.kind not in VERBATIM_KINDS]


def _entries_kept_of_six(
    config: TiermemConfig, clock: ManualClock, models: ScriptedModels
) -> object:
    with _open(config, clock, models) as memory:
        for i, fact in enumerate(FACTS):  # one add each: an add never evicts its own entries
            memory.add(chat(("user", fact), start=T0 + timedelta(minutes=i)), "u")
        return len(memory.get_all("u"))


def _candidates_shown_to_the_selector(
    config: TiermemConfig, clock: ManualClock, models: ScriptedModels
) -> object:
    script, shown = Script(), []

    def count(request: SLMRequest) -> dict[str, list[int]]:
        shown.append(len(numbered(request, "Memories:")))
        return {"supporting": [1]}

    script.on("selector", count)
    with _open(config, clock, models, script) as memory:
        memory.add(chat(*[("user", f) for f in FACTS]), "u")
        memory.search("Lisbon", "u", k=1)
    return shown


def _hits_when_the_selector_keeps_none(
    config: TiermemConfig, clock: ManualClock, models: ScriptedModels
) -> object:
    script = Script()
    script.on("selector", lambda r: {"supporting": []})
    with _open(config, clock, models, script) as memory:
        memory.add(chat(*[("user", f) for f in FACTS]), "u")
        return len(memory.search("Lisbon", "u", k=3))


def _superseded_by_an_update(
    config: TiermemConfig, clock: ManualClock, models: ScriptedModels
) -> object:
    script = Script()
    script.queue("writer", {"entries": [entry("Maya is vegetarian.", 1, kind="preference")]})

    def update(request: SLMRequest) -> dict[str, list[dict[str, Any]]]:
        # the writer's entry, not the verbatim turn shown beside it
        shown = numbered(request, "Existing memories:")
        old = next(i for i, line in enumerate(shown, 1) if "Maya is vegetarian" in line)
        return {"entries": [entry("Maya eats fish again.", 1, replaces=old)]}

    script.on("writer", update)
    with _open(config, clock, models, script) as memory:
        memory.add(chat(("user", "I'm vegetarian.")), "maya")
        result = memory.add(chat(("user", "I eat fish again."), start=clock.now()), "maya")
        return [old.text for old in result.superseded]


def _knowledge_hits(config: TiermemConfig, clock: ManualClock, models: ScriptedModels) -> object:
    script = Script()
    script.on("consolidator", one_node_per_memory)
    with _open(config, clock, models, script) as memory:
        memory.add(chat(("user", "I started pottery classes, clay is calming")), "alice")
        memory.consolidate_now()
        memory.add(chat(("user", "The weather was nice today")), "carol")
        hits = memory.search("pottery classes clay calming", "carol", k=3)
        return [h.tier for h in hits].count(Tier.LTM)


Base = Callable[[Path], TiermemConfig]
Observe = Callable[[TiermemConfig, ManualClock, ScriptedModels], object]


def _model_free(tmp_path: Path) -> TiermemConfig:
    return TiermemConfig.for_tests()


def _scripted(**slm: Any) -> Base:
    return lambda tmp_path: slm_config(**slm)


def _with_ltm(tmp_path: Path) -> TiermemConfig:
    return ltm_config(tmp_path)


# field -> (base config, setting, two values, what a user sees)
CASES: dict[str, tuple[Base, tuple[str, str], tuple[Any, Any], Observe]] = {
    "merge_threshold": (
        _scripted(),
        ("slm", "merge_threshold"),
        (0.5, 1.0),
        _entries_after_a_near_repeat,
    ),
    "supersede_min_similarity": (
        _scripted(
            controller={"enabled": False},
            selector={"enabled": False},
            writer_supersedes=True,
        ),
        ("slm", "supersede_min_similarity"),
        (0.0, 1.0),
        _superseded_by_an_update,
    ),
    "capacity": (_model_free, ("mtm", "capacity"), (2, 100), _entries_kept_of_six),
    "candidate_multiplier": (
        _scripted(writer={"enabled": False}),
        ("slm", "candidate_multiplier"),
        (1, 4),
        _candidates_shown_to_the_selector,
    ),
    "ltm_share": (_with_ltm, ("ltm", "max_share"), (0.0, 1.0), _knowledge_hits),
    "selector_min_keep": (
        _scripted(writer={"enabled": False}),
        ("slm", "selector_min_keep"),
        (0, 2),
        _hits_when_the_selector_keeps_none,
    ),
}


def test_every_policy_field_has_a_case() -> None:
    assert set(CASES) | {"delivery"} == {f.name for f in dataclasses.fields(Policy)}


def _changed(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, float):
        return 1.0 if value == 0.0 else value / 2
    assert isinstance(value, int)
    return value + 1


@pytest.mark.parametrize("name", sorted(DeliveryConfig.model_fields))
def test_every_delivery_setting_reaches_the_policy(name: str) -> None:
    value = _changed(DeliveryConfig.model_fields[name].default)
    config = merge_overrides(TiermemConfig.for_tests(), {"delivery": {name: value}})
    delivery = policy_from_config(config).delivery
    found = (
        getattr(delivery, name) if hasattr(delivery, name) else getattr(delivery.expansion, name)
    )
    assert found == value


def _delivered(config: TiermemConfig, clock: ManualClock) -> object:
    with Memory(config, clock=clock) as memory:
        for i, fact in enumerate(FACTS):
            memory.add(chat(("user", fact), start=T0 + timedelta(minutes=i)), "u")
        context = memory.context("Lisbon", "u", 1200)
        answer = memory.answer("Lisbon", "u")
        return len(context.hits), len(context.turn_ids), answer.context_tokens


@pytest.mark.parametrize("name", REMOVED)
def test_a_removed_delivery_setting_is_refused_by_name(name: str) -> None:
    """The neighbour shares and the piece discount lost leave-one-dataset-out and left: a
    configuration still setting one is told so, not silently run without it."""
    with pytest.raises(ConfigError, match=f"delivery {name}: removed"):
        merge_overrides(TiermemConfig.for_tests(), {"delivery": {name: 0.5}})


@pytest.mark.parametrize(
    ("name", "values", "others"),
    [
        ("tokens_per_hit", (12, 600), {}),  # 100 hits asked for, or default_k's 5
        ("max_hits", (200, 1), {"tokens_per_hit": 1}),
        ("answer_budget_tokens", (1200, 12), {}),
    ],
)
def test_delivery_settings_change_what_is_delivered(
    name: str, values: tuple[object, object], others: dict[str, object], clock: ManualClock
) -> None:
    seen = []
    for value in values:
        delivery = {**others, name: value}
        config = merge_overrides(TiermemConfig.for_tests(), {"delivery": delivery, "default_k": 1})
        seen.append(_delivered(config, clock))
    assert seen[0] != seen[1], f"delivery.{name} = {values} made no difference: {seen[0]}"


@pytest.mark.parametrize("field", sorted(CASES))
def test_each_setting_changes_behaviour(
    field: str, tmp_path: Path, clock: ManualClock, scripted_models: ScriptedModels
) -> None:
    make_base, (section, key), values, observe = CASES[field]
    seen = []
    for i, value in enumerate(values):
        config = merge_overrides(make_base(tmp_path / str(i)), {section: {key: value}})
        assert getattr(policy_from_config(config), field) == value
        seen.append(observe(config, clock, scripted_models))
    assert seen[0] != seen[1], f"{section}.{key} = {values} made no difference: {seen[0]}"


def test_a_model_selector_cannot_take_more_than_the_ltm_share(
    tmp_path: Path, clock: ManualClock, scripted_models: ScriptedModels
) -> None:
    """The share is enforced once, before selection: the selector is never shown more LTM
    facts than the share allows, so even a model that keeps every fact keeps at most that."""
    config = merge_overrides(
        ltm_config(tmp_path),
        {
            "slm": {
                "backend": {"kind": KIND, "model": "scripted"},
                "writer": {"enabled": False},
                "selector_mode": "listwise",  # the model selector, not rank fusion
            }
        },
    )
    config = merge_overrides(config, {"ltm": {"max_share": 0.5}})
    script, shown = Script(), []

    def keep_all_knowledge(request: SLMRequest) -> dict[str, list[int]]:
        lines = numbered(request, "Memories:")
        shown.append(sum("general knowledge" in line for line in lines))
        return {"supporting": [i for i, ln in enumerate(lines, 1) if "general knowledge" in ln]}

    script.on("selector", keep_all_knowledge)
    script.on("consolidator", one_node_per_memory)
    with _open(config, clock, scripted_models, script) as memory:
        hobbies = ["clay pottery", "mountain hiking", "playing violin", "ocean surfing"]
        memory.add(chat(*[("user", f"I love {h}") for h in hobbies]), "alice")
        assert memory.consolidate_now().counts.inserted == 4
        memory.add(chat(("user", "My oven broke")), "bob")
        hits = memory.search("pottery hiking violin surfing", "bob", k=4)
    assert shown == [2]  # ceil(0.5 * 4) of the 4 facts
    assert [h.tier for h in hits] == [Tier.LTM] * 2
