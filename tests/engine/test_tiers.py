"""Hits say which tier they come from. An LTM hit is shared, de-identified knowledge (a
``KnowledgeFact``), never an entry of the caller's: it carries no user id and no source turns,
and get/history/update/delete refuse its id with a ``KnowledgeItemError`` that says why."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tiermem import (
    AsyncMemory,
    KnowledgeFact,
    KnowledgeItemError,
    ManualClock,
    Memory,
    MemoryEntry,
    MemoryNotFoundError,
    SearchHit,
    Tier,
    WrongTierError,
)

from tests.conftest import chat
from tests.fakes.scripted import ScriptedModels
from tests.offline.conftest import MODEL, ltm_config, one_node_per_memory

QUERY = "pottery classes clay calming"


def _seed(memory: Memory) -> None:
    """Alice's pottery becomes shared knowledge; Carol has memories of her own about it."""
    memory.add(chat(("user", "I started pottery classes, clay is calming")), "alice")
    memory.consolidate_now()
    memory.add(chat(("user", "My pottery classes start on Monday"), speaker="Cy"), "carol")


@pytest.fixture
def memory(tmp_path: Path, clock: ManualClock, scripted_models: ScriptedModels) -> Iterator[Memory]:
    scripted_models.serve(MODEL, one_node_per_memory)
    with Memory(ltm_config(tmp_path), clock=clock) as m:
        _seed(m)
        yield m


def _one_of_each(memory: Memory) -> tuple[SearchHit, SearchHit]:
    hits = memory.search(QUERY, "carol", k=5)
    ltm = [h for h in hits if h.tier is Tier.LTM]
    mtm = [h for h in hits if h.tier is Tier.MTM]
    assert ltm, [(h.tier, h.text) for h in hits]
    assert mtm, [(h.tier, h.text) for h in hits]
    return ltm[0], mtm[0]


def test_search_says_the_tier_of_each_hit(memory: Memory) -> None:
    knowledge, own = _one_of_each(memory)

    assert isinstance(knowledge.item, KnowledgeFact)
    assert knowledge.fact is knowledge.item
    assert knowledge.id == knowledge.fact.id
    assert knowledge.id.startswith("ltm:n:")
    assert knowledge.text == knowledge.fact.text
    assert "pottery" in knowledge.text
    assert (knowledge.fact.kind, knowledge.fact.evidence) == ("Concept", 1)
    assert 0.0 < knowledge.fact.confidence <= 1.0
    assert knowledge.source_turn_ids == ()
    assert knowledge.explanation.components["ltm"] > 0
    with pytest.raises(WrongTierError, match="shared LTM knowledge"):
        _ = knowledge.entry
    assert getattr(knowledge, "entry", None) is None  # a WrongTierError is an AttributeError
    assert memory.knowledge_history(knowledge.id)[0].op == "INSERT"

    assert isinstance(own.item, MemoryEntry)
    assert own.entry is own.item
    assert (own.id, own.text) == (own.entry.id, own.entry.text)
    assert own.entry.user_id == "carol"
    assert own.source_turn_ids == own.entry.source_turn_ids != ()
    with pytest.raises(WrongTierError, match="an MTM entry"):
        _ = own.fact


def test_an_ltm_hit_carries_no_user_id(memory: Memory) -> None:
    knowledge, _ = _one_of_each(memory)
    assert not hasattr(knowledge.fact, "user_id")
    for user in ("carol", "alice"):  # neither the caller nor the user it came from
        assert user not in repr(knowledge)


Op = Callable[[Memory, str], object]
OPS: dict[str, Op] = {
    "get": lambda m, mid: m.get(mid, "carol"),
    "history": lambda m, mid: m.history(mid, "carol"),
    "update": lambda m, mid: m.update(mid, "pottery is for everyone", "carol"),
    "delete": lambda m, mid: m.delete(mid, "carol"),
}


@pytest.mark.parametrize("operation", sorted(OPS))
def test_an_ltm_id_is_refused_by_the_per_user_operations(memory: Memory, operation: str) -> None:
    knowledge, _ = _one_of_each(memory)
    ltm = memory.components.ltm
    assert ltm is not None
    before = (ltm.facts(), memory.knowledge_history(knowledge.id), memory.get_all("carol"))

    with pytest.raises(KnowledgeItemError) as refused:
        OPS[operation](memory, knowledge.id)

    error = refused.value
    assert isinstance(error, MemoryNotFoundError)  # this user has no memory with that id
    assert (error.memory_id, error.user_id, error.operation) == (knowledge.id, "carol", operation)
    assert "shared" in str(error)
    assert "knowledge_history(id)" in str(error)
    after = (ltm.facts(), memory.knowledge_history(knowledge.id), memory.get_all("carol"))
    assert after == before


def test_answer_cites_source_turns_of_the_users_own_hits_only(memory: Memory) -> None:
    answer = memory.answer(QUERY, "carol")
    tiers = {h.tier for h in answer.hits}
    assert tiers == {Tier.LTM, Tier.MTM}
    own_turns = {t for h in answer.hits if h.tier is Tier.MTM for t in h.entry.source_turn_ids}
    assert own_turns
    assert set(answer.source_turns) == own_turns
    assert {t.user_id for t in answer.source_turns.values()} == {"carol"}
    assert memory.source_turns(answer.hits, "carol") == answer.source_turns
    # The extractive generator reads the shared knowledge first: it has no date.
    assert answer.text.splitlines()[1].startswith("[general knowledge] ")


def test_the_async_face_tells_tiers_and_refuses_ltm_ids_alike(
    tmp_path: Path, clock: ManualClock, scripted_models: ScriptedModels
) -> None:
    scripted_models.serve(MODEL, one_node_per_memory)

    async def run() -> tuple[list[Tier], type[BaseException]]:
        async with AsyncMemory(ltm_config(tmp_path), clock=clock) as memory:
            _seed(memory.sync)
            hits = await memory.search(QUERY, "carol", k=5)
            ltm_id = next(h.id for h in hits if h.tier is Tier.LTM)
            try:
                await memory.history(ltm_id, "carol")
            except KnowledgeItemError as exc:
                return sorted({h.tier for h in hits}), type(exc)
            raise AssertionError("history() of an LTM id was not refused")

    assert asyncio.run(run()) == ([Tier.LTM, Tier.MTM], KnowledgeItemError)
