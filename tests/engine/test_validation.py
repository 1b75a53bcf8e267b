"""Every bad input raises a clear, typed error and stores nothing."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from tiermem import (
    EmptyMessagesError,
    InvalidFilterError,
    InvalidInputError,
    InvalidLimitError,
    InvalidMessageError,
    InvalidQueryError,
    InvalidSessionIdError,
    InvalidUserIdError,
    Memory,
    MemoryNotFoundError,
    NaiveTimestampError,
    SearchFilters,
    TiermemError,
    UnknownRoleError,
)

from tests.conftest import T0, chat


def stored_state(memory: Memory, user_id: str) -> tuple[int, int, tuple[str, ...]]:
    c = memory.components
    return (
        c.store.count(user_id),
        c.journal.count_audit(user_id),
        tuple(t.turn_id for t in memory.working_memory(user_id)),
    )


@pytest.fixture
def seeded(memory: Memory) -> Memory:
    memory.add(
        chat(
            ("user", "I keep bees on my roof."),
            ("assistant", "How many hives?"),
            ("user", "Two hives, since 2024."),
        ),
        user_id="ana",
    )
    return memory


@pytest.mark.parametrize(
    "bad_user",
    ["", "   ", " ana", "ana\n", "a\x00b", "x" * 129, None, 42, b"ana"],
)
def test_bad_user_ids_are_refused_everywhere(seeded: Memory, bad_user: object) -> None:
    before = stored_state(seeded, "ana")
    calls = [
        lambda: seeded.add("hello there", user_id=bad_user),  # type: ignore[arg-type]
        lambda: seeded.search("bees", user_id=bad_user),  # type: ignore[arg-type]
        lambda: seeded.answer("bees", user_id=bad_user),  # type: ignore[arg-type]
        lambda: seeded.get_all(user_id=bad_user),  # type: ignore[arg-type]
        lambda: seeded.forget_user(bad_user),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidUserIdError):
            call()
    assert stored_state(seeded, "ana") == before


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([], EmptyMessagesError),
        ([{"role": "user", "content": "   "}], EmptyMessagesError),
        ([{"role": "user"}], InvalidMessageError),
        ([{"role": "robot", "content": "beep"}], UnknownRoleError),
        (
            [{"role": "user", "content": "hi", "timestamp": datetime(2026, 1, 1)}],
            NaiveTimestampError,
        ),
        (
            [{"role": "user", "content": "hi", "timestamp": "2026-01-01T10:00:00"}],
            NaiveTimestampError,
        ),
        ([{"role": "user", "content": "hi", "timestamp": "yesterday"}], InvalidMessageError),
        ([{"role": "user", "content": "hi", "mood": "happy"}], InvalidMessageError),
        ([{"role": "user", "content": "hi", "speaker": ""}], InvalidMessageError),
        ([{"role": "user", "content": "x" * 40_000}], InvalidMessageError),
        ([{"role": "user", "content": 7}], EmptyMessagesError),
        ([3.5], InvalidMessageError),
        (None, InvalidMessageError),
    ],
)
def test_bad_messages_store_nothing(
    seeded: Memory, messages: object, error: type[Exception]
) -> None:
    before = stored_state(seeded, "ana")
    with pytest.raises(error) as caught:
        seeded.add(messages, user_id="ana")  # type: ignore[arg-type]
    assert isinstance(caught.value, InvalidInputError)
    assert stored_state(seeded, "ana") == before


def test_one_bad_message_in_a_batch_stores_none_of_the_batch(seeded: Memory) -> None:
    before = stored_state(seeded, "ana")
    batch = [*chat(("user", "I also grow tomatoes.")), {"role": "wizard", "content": "zap"}]
    with pytest.raises(UnknownRoleError) as caught:
        seeded.add(batch, user_id="ana")
    assert caught.value.index == 1
    assert stored_state(seeded, "ana") == before
    assert not [e for e in seeded.get_all("ana") if "tomatoes" in e.text]


def test_bad_session_id_is_refused(seeded: Memory) -> None:
    with pytest.raises(InvalidSessionIdError):
        seeded.add("hello", user_id="ana", session_id="")
    with pytest.raises(InvalidSessionIdError):
        seeded.answer("bees", user_id="ana", session_id="s\t1")


@pytest.mark.parametrize("k", [0, -1, 2.5, "3", True, None])
def test_bad_k_is_refused(seeded: Memory, k: object) -> None:
    if k is None:  # None means the configured default
        assert seeded.search("bees", user_id="ana", k=None)
        return
    with pytest.raises(InvalidLimitError):
        seeded.search("bees", user_id="ana", k=k)  # type: ignore[arg-type]


@pytest.mark.parametrize("query", ["", "   ", None, "q" * 5000])
def test_bad_queries_are_refused(seeded: Memory, query: object) -> None:
    with pytest.raises(InvalidQueryError):
        seeded.search(query, user_id="ana")  # type: ignore[arg-type]


def test_bad_filters_are_refused(seeded: Memory) -> None:
    with pytest.raises(InvalidFilterError):
        seeded.search("bees", "ana", filters=SearchFilters(since=T0, until=T0 - timedelta(days=1)))
    with pytest.raises(InvalidFilterError):
        seeded.search("bees", "ana", filters=SearchFilters(since=datetime(2026, 1, 1)))
    with pytest.raises(InvalidFilterError):
        seeded.search("bees", "ana", filters=SearchFilters(kinds=("gossip",)))  # type: ignore[arg-type]


@pytest.mark.parametrize("memory_id", ["no-such-id", "00000000-0000-4000-8000-000000000000", ""])
def test_unknown_memory_ids_raise_not_found(seeded: Memory, memory_id: str) -> None:
    before = stored_state(seeded, "ana")
    for call in (
        lambda: seeded.get(memory_id, "ana"),
        lambda: seeded.update(memory_id, "new text", "ana"),
        lambda: seeded.delete(memory_id, "ana"),
        lambda: seeded.history(memory_id, "ana"),
    ):
        with pytest.raises(MemoryNotFoundError) as caught:
            call()
        assert isinstance(caught.value, TiermemError)
        assert caught.value.memory_id == memory_id
    assert stored_state(seeded, "ana") == before


def test_update_with_empty_text_is_refused_and_keeps_the_entry(seeded: Memory) -> None:
    entry = seeded.get_all("ana")[0]
    with pytest.raises(InvalidQueryError):
        seeded.update(entry.id, "  ", "ana")
    assert seeded.get(entry.id, "ana").text == entry.text


def test_error_messages_say_what_is_wrong(memory: Memory) -> None:
    with pytest.raises(UnknownRoleError, match="unknown role 'robot'"):
        memory.add([{"role": "robot", "content": "x"}], user_id="ana")
    with pytest.raises(NaiveTimestampError, match="no time zone"):
        memory.add([{"content": "x", "timestamp": datetime(2026, 1, 1)}], user_id="ana")
