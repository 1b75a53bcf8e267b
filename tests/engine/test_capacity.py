"""Capacity eviction after an add: it never takes the entries the add just wrote, it keeps at
least one entry, and a failure in it does not undo or hide the add that came before it (the
add's result stands and says the eviction failed; the next add enforces capacity again)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from tiermem import ManualClock, Memory, StoreError, TiermemConfig, faults
from tiermem.components import build_components
from tiermem.types import AuditOp, MemoryEntry

from tests.conftest import T0, chat, config_for
from tests.engine.test_atomicity import DownStore

SECRET = "My passport number is X123."


def _config(location: str, tmp_path: Path, capacity: int) -> TiermemConfig:
    config = config_for(location, tmp_path)
    return config.model_copy(update={"mtm": config.mtm.model_copy(update={"capacity": capacity})})


@pytest.fixture
def opened() -> Iterator[list[Memory]]:
    memories: list[Memory] = []
    yield memories
    faults.set_hook(None)
    for memory in memories:
        memory.close()


def _open(opened: list[Memory], location: str, tmp_path: Path, capacity: int) -> Memory:
    memory = Memory(_config(location, tmp_path, capacity), clock=ManualClock(T0))
    opened.append(memory)
    return memory


def _say(memory: Memory, text: str, hours: int) -> list[MemoryEntry]:
    messages = chat(("user", text), start=T0 + timedelta(hours=hours))
    return list(memory.add(messages, user_id="ana").entries)


def _fail_eviction(step: str) -> None:
    if step == "evict:mid-store-apply":
        raise StoreError("injected: store went away during the eviction")


@pytest.mark.parametrize("location", ["memory", "path", "edge", "reference"])
def test_a_failed_eviction_leaves_the_add_standing_and_is_reported(
    location: str,
    tmp_path: Path,
    opened: list[Memory],
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = _open(opened, location, tmp_path, capacity=3)
    for i, text in enumerate(("I have a cat.", "I live in Ghent.", "I like tea.")):
        _say(memory, text, i)
    faults.set_hook(_fail_eviction)
    with caplog.at_level(logging.WARNING):
        result = memory.add(chat(("user", SECRET), start=T0 + timedelta(hours=5)), "ana")
    faults.set_hook(None)

    # The add is done and says so; the eviction is reported, not raised.
    assert [e.text for e in result.entries] == [f"Ana: {SECRET}"]
    assert result.evicted_ids == ()
    assert result.eviction_error is not None
    assert "went away" in result.eviction_error
    new = result.entries[0]
    assert memory.get(new.id, "ana").text == f"Ana: {SECRET}"
    assert [e.op for e in memory.history(new.id, "ana")] == [AuditOp.ADD]
    # The eviction was rolled back whole: every entry is there, without DELETE rows.
    assert len(memory.get_all("ana")) == 4
    assert all(
        [e.op for e in memory.history(e.id, "ana")] == [AuditOp.ADD] for e in memory.get_all("ana")
    )
    assert not memory.components.journal.has_unfinished()
    warnings = [r.getMessage() for r in caplog.records if r.name == "tiermem.pipeline.write"]
    assert any("evict" in w for w in warnings)
    assert not any("X123" in w or "ana" in w or "went away" in w for w in warnings)

    # A retry of the same add finds its turn stored, and enforces capacity again:
    # 4 entries, capacity 3, low-water mark 2.
    again = memory.add(chat(("user", SECRET), start=T0 + timedelta(hours=5)), "ana")
    assert again.entries == ()
    assert again.eviction_error is None
    assert len(again.evicted_ids) == 2
    assert len(memory.get_all("ana")) == 2
    for evicted in again.evicted_ids:  # one eviction each: the failed one left no row
        assert [e.op for e in memory.history(evicted, "ana")] == [AuditOp.ADD, AuditOp.DELETE]


def test_an_eviction_whose_rollback_fails_is_finished_before_the_next_write(
    tmp_path: Path, opened: list[Memory]
) -> None:
    config = _config("reference", tmp_path, capacity=2)
    base = build_components(config, ManualClock(T0))
    store = DownStore(384)
    memory = Memory(config, components=replace(base, store=store))
    opened.append(memory)
    _say(memory, "I have a cat.", 0)
    _say(memory, "I live in Ghent.", 1)

    def store_goes_down(step: str) -> None:
        if step == "evict:mid-store-apply":
            store.down = True
            raise StoreError("injected: store went away during the eviction")

    faults.set_hook(store_goes_down)
    result = memory.add(chat(("user", SECRET), start=T0 + timedelta(hours=2)), "ana")
    faults.set_hook(None)
    assert [e.text for e in result.entries] == [f"Ana: {SECRET}"]
    assert result.eviction_error is not None
    # The eviction could not be undone now: it is left to recovery, as any failed rollback.
    assert memory.components.journal.has_unfinished()
    with pytest.raises(StoreError):  # nothing is written past an unfinished rollback
        memory.add(chat(("user", "I play chess."), start=T0 + timedelta(hours=3)), "ana")
    store.down = False
    last = memory.add(chat(("user", "I play chess."), start=T0 + timedelta(hours=3)), "ana")
    assert not memory.components.journal.has_unfinished()
    assert last.eviction_error is None
    # The rollback was finished, then this add evicted afresh: 4 entries, capacity 2,
    # low-water mark 1, and the entry it just wrote is kept.
    assert [e.text for e in memory.get_all("ana")] == ["Ana: I play chess."]
    assert len(last.evicted_ids) == 3
    history = [e.op for e in memory.history(result.entries[0].id, "ana")]
    assert history == [AuditOp.ADD, AuditOp.DELETE]


@pytest.mark.parametrize("location", ["memory", "reference"])
def test_an_add_never_evicts_its_own_entries(
    location: str, tmp_path: Path, opened: list[Memory]
) -> None:
    memory = _open(opened, location, tmp_path, capacity=5)
    for i in range(5):
        _say(memory, f"Fact {i} about apples.", i)
    for _ in range(3):  # well used: the old entries are worth more than a fresh one
        memory.search("apples", user_id="ana", k=5)
    result = memory.add(chat(("user", "My blood type is O negative."), start=T0), "ana")
    new = result.entries[0]
    assert new.id not in result.evicted_ids
    assert len(result.evicted_ids) == 2  # 6 entries, capacity 5, low-water mark 4
    assert memory.get(new.id, "ana").text == "Ana: My blood type is O negative."


@pytest.mark.parametrize("location", ["memory", "reference"])
def test_capacity_one_keeps_the_newest_entry(
    location: str, tmp_path: Path, opened: list[Memory]
) -> None:
    memory = _open(opened, location, tmp_path, capacity=1)
    (tea,) = _say(memory, "I like tea.", 0)
    result = memory.add(chat(("user", "My sister is Ana."), start=T0 + timedelta(hours=1)), "ana")
    assert [e.text for e in result.entries] == ["Ana: My sister is Ana."]
    assert result.evicted_ids == (tea.id,)
    assert [e.text for e in memory.get_all("ana")] == ["Ana: My sister is Ana."]
