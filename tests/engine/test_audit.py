"""The audit trail records every change with time and before/after text."""

from __future__ import annotations

from datetime import datetime, timedelta

from tiermem import AuditOp, ManualClock, Memory, TiermemConfig

from tests.conftest import T0, chat


def test_add_update_delete_leave_a_complete_history(memory: Memory, clock: ManualClock) -> None:
    added = memory.add(chat(("user", "My bike is a red Gazelle.")), user_id="ana").entries[0]
    clock.advance(timedelta(hours=1))
    updated = memory.update(added.id, "Ana: my bike is a green Gazelle now.", "ana")
    clock.advance(timedelta(hours=1))
    memory.delete(added.id, "ana")

    events = memory.history(added.id, "ana")
    assert [e.op for e in events] == [AuditOp.ADD, AuditOp.UPDATE, AuditOp.DELETE]
    assert [e.at for e in events] == [T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)]
    assert (events[0].before, events[0].after) == (None, "Ana: My bike is a red Gazelle.")
    assert (events[1].before, events[1].after) == (
        "Ana: My bike is a red Gazelle.",
        "Ana: my bike is a green Gazelle now.",
    )
    assert (events[2].before, events[2].after) == ("Ana: my bike is a green Gazelle now.", None)
    assert events[0].detail["source_turn_ids"] == list(added.source_turn_ids)
    assert events[0].actor == "turn-burst-v3"
    assert updated.updated_at == T0 + timedelta(hours=1)
    assert updated.created_at == added.created_at


def test_update_is_searchable_by_its_new_text(memory: Memory) -> None:
    entry = memory.add(chat(("user", "I drive a Volvo.")), user_id="ana").entries[0]
    memory.update(entry.id, "Ana sold the car and now cycles everywhere.", "ana")
    top = memory.search("cycles everywhere", "ana", k=1)[0]
    assert top.entry.id == entry.id
    assert top.entry.text == "Ana sold the car and now cycles everywhere."


def test_reingesting_the_same_turns_writes_no_duplicate_and_no_audit_row(memory: Memory) -> None:
    messages = chat(("user", "I teach maths."), ("assistant", "Which grade?"))
    first = memory.add(messages, user_id="ana")
    second = memory.add(messages, user_id="ana")
    assert [e.kind for e in first.entries] == ["turn", "turn", "exchange"]
    assert second.entries == ()
    assert set(second.skipped_turn_ids) == {t.turn_id for t in first.turns}
    assert memory.components.journal.count_audit("ana") == 3
    assert len(memory.get_all("ana")) == 3


def test_system_turns_are_kept_as_turns_but_not_as_memories(memory: Memory) -> None:
    result = memory.add(
        [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "I collect stamps."},
        ],
        user_id="ana",
    )
    assert [e.text for e in result.entries] == ["user: I collect stamps."]
    assert result.skipped_turn_ids == (result.turns[0].turn_id,)
    assert len(memory.working_memory("ana")) == 2


class TickingClock(ManualClock):
    """A clock that moves a second each time it is read, as a real one moves between two
    readings: an add that read it twice would stamp its rows with different times."""

    def now(self) -> datetime:
        self.advance(timedelta(seconds=1))
        return super().now()


def test_an_add_reads_the_clock_once_so_its_turn_entries_and_audit_rows_agree() -> None:
    clock = TickingClock(T0)
    with Memory(TiermemConfig.for_tests(), clock=clock) as memory:
        said = [
            {"role": "user", "content": "I moved to Porto in May.", "speaker": "Ana"},
            {"role": "assistant", "content": "How is Porto?"},
        ]  # no timestamps: the add stamps them
        result = memory.add(said, user_id="ana")
        times = {t.timestamp for t in result.turns}
        times |= {e.created_at for e in result.entries} | {e.updated_at for e in result.entries}
        times |= {ev.at for e in result.entries for ev in memory.history(e.id, "ana")}
    assert len(result.entries) >= 2
    assert times == {T0 + timedelta(seconds=1)}
