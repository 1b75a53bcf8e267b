"""STM keeps the most recent turns of each (user, session) within its token budget."""

from __future__ import annotations

from datetime import timedelta

from tiermem.config import STMConfig
from tiermem.stm import ShortTermMemory
from tiermem.tokens import ApproxTokenCounter
from tiermem.types import Role, Turn

from tests.conftest import T0


def _turn(i: int, content: str, user: str = "u", session: str = "s") -> Turn:
    return Turn(f"t{i}", user, session, Role.USER, "Ana", content, T0 + timedelta(minutes=i))


def test_window_is_bounded_in_tokens_and_keeps_the_newest() -> None:
    counter = ApproxTokenCounter()
    stm = ShortTermMemory(STMConfig(max_tokens=40, max_turns=100), counter)
    stm.append([_turn(i, f"turn number {i} says a few words here") for i in range(20)])
    window = stm.window("u", "s")
    assert window[-1].turn_id == "t19"
    assert [t.turn_id for t in window] == [f"t{i}" for i in range(20 - len(window), 20)]
    assert stm.tokens("u", "s") <= 40
    assert len(window) >= 3  # the budget still holds several turns


def test_window_is_bounded_in_turns() -> None:
    stm = ShortTermMemory(STMConfig(max_tokens=10_000, max_turns=3), ApproxTokenCounter())
    stm.append([_turn(i, "short") for i in range(5)])
    assert [t.turn_id for t in stm.window("u", "s")] == ["t2", "t3", "t4"]


def test_an_oversized_turn_is_kept_alone() -> None:
    stm = ShortTermMemory(STMConfig(max_tokens=5, max_turns=10), ApproxTokenCounter())
    stm.append([_turn(0, "hi"), _turn(1, "a much longer turn than five tokens can hold")])
    assert [t.turn_id for t in stm.window("u", "s")] == ["t1"]


def test_sessions_and_users_are_separate_and_forgettable() -> None:
    stm = ShortTermMemory(STMConfig(), ApproxTokenCounter())
    stm.append(
        [
            _turn(0, "a", session="s1"),
            _turn(1, "b", session="s2"),
            _turn(2, "c", user="v", session="s1"),
        ]
    )
    assert [t.content for t in stm.window("u", "s1")] == ["a"]
    assert [t.content for t in stm.window("u", "s2")] == ["b"]
    assert stm.forget_user("u") == 2
    assert stm.window("u", "s1") == ()
    assert [t.content for t in stm.window("v", "s1")] == ["c"]
