"""``Journal.placed_turns``: a context reads only the turns it names, each with its place in
its session, and the places are what reading the whole session would give."""

from __future__ import annotations

import random
from datetime import timedelta
from itertools import pairwise

from tiermem import Memory
from tiermem.context import GAP

from tests.conftest import T0, chat


def _whole_sessions(memory: Memory, user_id: str) -> dict[str, list[str]]:
    """Every session's turn ids in the order they were said (what the place counts)."""
    rows = memory.components.journal._query(  # the whole table, to check against
        "SELECT session_id, turn_id FROM turns WHERE user_id = ? ORDER BY session_id, at, rowid",
        (user_id,),
    )
    out: dict[str, list[str]] = {}
    for session, turn in rows:
        out.setdefault(session, []).append(turn)
    return out


def test_places_are_the_turns_positions_in_their_whole_sessions(make_memory) -> None:
    memory = make_memory("reference")
    rnd = random.Random(3)
    for s in range(3):
        # a session of 40 turns, some said in the same second (a burst): ties keep the
        # order they were stored in
        messages = chat(*[("user", f"Line {s}-{i} about tulips") for i in range(40)])
        for i, m in enumerate(messages):
            m["timestamp"] = T0 + timedelta(hours=s, minutes=i // 3)
        memory.add(messages, "ana", session_id=f"s{s}")
    memory.add(chat(("user", "Someone else's line about tulips")), "bo", session_id="s0")
    sessions = _whole_sessions(memory, "ana")
    every = [t for ids in sessions.values() for t in ids]
    asked = [*rnd.sample(every, 25), "no-such-turn"]

    placed = memory.components.journal.placed_turns("ana", asked)

    expected = [
        (t, place) for ids in sessions.values() for place, t in enumerate(ids) if t in asked
    ]
    assert [(t.turn_id, place) for t, place in placed] == expected
    assert len(placed) == 25  # nothing else read: no unasked turn, no other user's
    assert {t.user_id for t, _ in placed} == {"ana"}
    assert memory.components.journal.placed_turns("bo", asked) == []


def test_a_context_joins_turns_said_one_after_another_and_marks_a_gap(make_memory) -> None:
    memory = make_memory("reference")
    lines = [f"Filler line {i} about the weather" for i in range(30)]
    lines[4] = "My sister Lena lives in Porto"
    lines[5] = "Lena works at the Porto harbour office"
    lines[20] = "Lena visits Porto every summer"
    memory.add(chat(*[("user", line) for line in lines]), "ana", session_id="s1")
    order = _whole_sessions(memory, "ana")["s1"]

    ctx = memory.context("Lena Porto", "ana", budget_tokens=60)

    runs = [[order.index(t) for t in s.turn_ids] for s in ctx.snippets]
    assert [4, 5] in runs
    assert [20] in runs
    for run in runs:  # a snippet is turns said one after another
        assert run == list(range(run[0], run[0] + len(run)))
    for a, b in pairwise(runs):  # and the next one starts after a gap
        assert b[0] > a[-1] + 1
    assert ctx.text.count(GAP) == len(runs) - 1
