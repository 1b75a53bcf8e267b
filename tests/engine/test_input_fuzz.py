"""Hostile input through every public method: each call with at least one bad argument raises a
``TiermemError`` with a short message, and what was stored before stays as it was.

The sweep is seeded, so a failure names a call that can be replayed."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest
from tiermem import Memory, SearchFilters, TiermemError

from tests.conftest import T0, chat
from tests.engine.test_validation import BrokenOffset, ImpossibleOffset, NoOffset

CALLS_PER_RUN = 300


HUGE = "x" * 10_000_000
FAR_EAST, FAR_WEST = timezone(timedelta(hours=14)), timezone(timedelta(hours=-14))

BAD_IDS: list[object] = [
    "",
    "  ",
    " ana",
    "a\ud800b",
    "\udfff",
    "a\u2028b",
    "b\u2029",
    "a\x00b",
    "a\tb",
    "\u200b",
    "x" * 129,
    HUGE,
    None,
    42,
    10**5000,
    1.5,
    b"ana",
    ["ana"],
    object(),
]
BAD_TEXTS: list[object] = [
    "",
    " \n ",
    "\u200b\ufeff",
    "\u3164",
    "\u2060\u200d",
    "a\ud800b",
    "q" * 40_000,
    HUGE,
    None,
    7,
    b"bees",
    ["bees"],
]
BAD_K: list[object] = [0, -1, True, False, 2.5, "3", [3], -(10**5000)]
BAD_TIMES: list[object] = [
    datetime(1, 1, 1, tzinfo=FAR_EAST),
    datetime(9999, 12, 31, 23, tzinfo=FAR_WEST),
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    datetime(2026, 1, 1),
    datetime(2026, 1, 1, tzinfo=NoOffset()),
    datetime(2026, 1, 1, tzinfo=ImpossibleOffset()),
    datetime(2026, 1, 1, tzinfo=BrokenOffset()),
    "2026-13-01T00:00:00+00:00",
    "a\ud800b",
    HUGE,
    1_700_000_000,
]
BAD_FILTERS: list[object] = [
    SearchFilters(kinds=None),  # type: ignore[arg-type]
    SearchFilters(kinds=5),  # type: ignore[arg-type]
    SearchFilters(kinds="fact"),  # type: ignore[arg-type]
    SearchFilters(kinds=("gossip",)),  # type: ignore[arg-type]
    SearchFilters(kinds=(HUGE,)),  # type: ignore[arg-type]
    SearchFilters(include_superseded="yes"),  # type: ignore[arg-type]
    SearchFilters(include_superseded=None),  # type: ignore[arg-type]
    SearchFilters(session_id="a\ud800b"),
    SearchFilters(session_id=HUGE),
    SearchFilters(since=T0, until=T0 - timedelta(seconds=1)),
    *(SearchFilters(since=t) for t in BAD_TIMES),  # type: ignore[arg-type]
    *(SearchFilters(until=t) for t in BAD_TIMES),  # type: ignore[arg-type]
    {"kinds": ["fact"]},
    "recent",
]
BAD_MESSAGES: list[object] = [
    None,
    [],
    3.5,
    [None],
    [{"role": "robot", "content": "beep"}],
    [{"role": HUGE, "content": "beep"}],
    [{"content": "hi", "mood": "happy"}],
    [{"content": "hi", 1: "x", "mood": "happy"}],
    [{"content": "hi", HUGE: 1}],
    [{"role": "user"}],
    [{"content": "hi", "speaker": "a\u2028b"}],
    [{"content": "hi", "speaker": HUGE}],
    [{"content": "hi", "turn_id": "a\ud800b"}],
    [{"content": "hi", "turn_id": "t1"}, {"content": "ho", "turn_id": "t1"}],
    *([{"content": text}] for text in BAD_TEXTS),
    *([{"content": "I moved to Porto.", "timestamp": t}] for t in BAD_TIMES),
]


@dataclass(frozen=True)
class Param:
    """One argument of a public method: values that are fine, and values that must fail."""

    good: list[object]
    bad: list[object]


def _methods(memory: Memory, entry_id: str) -> dict[str, tuple[Callable[..., object], list[Param]]]:
    user = Param(["ana"], BAD_IDS)
    session = Param([None, "s1"], [i for i in BAD_IDS if i is not None])
    memory_id = Param([entry_id], BAD_IDS)
    query = Param(["bees", "how many hives"], BAD_TEXTS)
    filters = Param([None, SearchFilters(kinds=("turn",))], BAD_FILTERS)  # type: ignore[arg-type]
    return {
        "add": (memory.add, [Param(["I keep bees."], BAD_MESSAGES), user, session]),
        "search": (memory.search, [query, user, Param([None, 2], BAD_K), filters, session]),
        "answer": (memory.answer, [query, user, session, filters]),
        "context": (
            memory.context,
            [query, user, Param([1200, 40], BAD_K), session, filters, Param([None, 3], BAD_K)],
        ),
        "get": (memory.get, [memory_id, user]),
        "get_all": (memory.get_all, [user, filters]),
        "update": (memory.update, [memory_id, Param(["Ana keeps wasps."], BAD_TEXTS), user]),
        "delete": (memory.delete, [memory_id, user]),
        "history": (memory.history, [memory_id, user]),
        "forget_user": (memory.forget_user, [user]),
        "working_memory": (memory.working_memory, [user, session]),
        "knowledge_history": (memory.knowledge_history, [Param(["ltm:x"], BAD_IDS)]),
    }


def _snapshot(memory: Memory) -> tuple[object, ...]:
    entries = tuple((e.id, e.text, e.updated_at) for e in memory.get_all("ana"))
    turns = tuple(t.turn_id for t in memory.working_memory("ana"))
    audit = memory.components.journal.count_audit("ana")
    return entries, turns, audit


def test_every_bad_argument_is_a_short_typed_error_that_changes_nothing(memory: Memory) -> None:
    added = memory.add(
        chat(("user", "I keep bees on my roof."), ("user", "Two hives, since 2024.")),
        user_id="ana",
    )
    methods = _methods(memory, added.entries[0].id)
    before = _snapshot(memory)
    rng = random.Random(10)
    escaped: list[str] = []
    for n in range(CALLS_PER_RUN):
        name = rng.choice(sorted(methods))
        method, params = methods[name]
        bad_at = rng.randrange(len(params))
        args = [
            rng.choice(p.bad) if i == bad_at or rng.random() < 0.2 else rng.choice(p.good)
            for i, p in enumerate(params)
        ]
        try:
            method(*args)
        except TiermemError as exc:
            if len(str(exc)) > 300:
                escaped.append(f"call {n} {name}: message of {len(str(exc))} characters")
        except Exception as exc:  # noqa: BLE001 - the point is to catch what escapes
            escaped.append(f"call {n} {name}{_short(args)}: {type(exc).__name__}: {_short(exc)}")
        else:
            escaped.append(f"call {n} {name}{_short(args)}: accepted")
    assert escaped == []
    assert _snapshot(memory) == before


def test_the_sweep_covers_every_public_method(memory: Memory) -> None:
    public = {
        n for n in dir(Memory) if not n.startswith("_") and callable(getattr(Memory, n, None))
    }
    not_fuzzed = {  # no caller-supplied text reaches them, or they only read config
        "check_writable",  # takes no argument
        "close",
        "components",
        "consolidate_now",  # ConfigError without LTM; its user id goes through the same check
        "consolidation_state",
        "from_defaults",
        "meter",
        "source_turns",
    }
    assert set(_methods(memory, "id")) == public - not_fuzzed


def _short(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:
        return "<too large>"
    return text if len(text) < 120 else text[:120] + "..."


@pytest.mark.parametrize("bound", [datetime.min, datetime.max], ids=["min", "max"])
def test_the_ends_of_the_utc_range_are_not_hostile(memory: Memory, bound: datetime) -> None:
    at = bound.replace(tzinfo=UTC)
    result = memory.add([{"content": "I found an old coin.", "timestamp": at}], user_id="ana")
    assert result.turns[0].timestamp == at
    assert memory.search("coin", "ana", filters=SearchFilters(since=at, until=at))
