"""The writer on the scripted backend: rules before the model, sources, supersede, merge,
fallbacks, chunking, capacity and isolation."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tiermem import AuditOp, ManualClock, Memory, SearchFilters
from tiermem.bench.updates import Supersedes
from tiermem.errors import SLMTimeout
from tiermem.slm.base import SLMRequest
from tiermem.slm.roles.writer import restates
from tiermem.slm.scripted import ScriptedBackend
from tiermem.types import VERBATIM_KINDS, MemoryEntry, MemoryKind

from tests.conftest import T0, chat
from tests.slm.conftest import Handler, Script, entry, numbered


@pytest.fixture
def writer_memory(make_slm_memory: Callable[..., Memory]) -> Memory:
    """The writer's entries beside the verbatim turns it always keeps, its update decisions
    applied (``writer_supersedes``, off by default)."""
    return make_slm_memory(
        controller={"enabled": False}, selector={"enabled": False}, writer_supersedes=True
    )


def written(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    """The writer's own entries among ``entries``, not the verbatim turns and exchanges."""
    return [e for e in entries if e.kind not in VERBATIM_KINDS]


def update_of(shown: str, text: str, kind: str = "fact") -> Handler:
    """A writer that marks ``text`` (citing turn 1) as an update of the memory shown that
    says ``shown``: the writer's entry, not the verbatim turn stored beside it."""

    def answer(request: SLMRequest) -> dict[str, Any]:
        existing = numbered(request, "Existing memories:")
        index = next(i for i, line in enumerate(existing, 1) if shown in line)
        return {"entries": [entry(text, 1, kind=kind, replaces=index)]}

    return answer


def test_small_talk_costs_no_model_call(
    writer_memory: Memory, slm_backend: ScriptedBackend
) -> None:
    result = writer_memory.add(
        chat(
            ("user", "Hi!"),
            ("assistant", "Hello!"),
            ("user", "Thanks a lot!"),
            ("assistant", "You're welcome."),
        ),
        user_id="maya",
    )
    assert slm_backend.calls_for("writer") == []
    assert result.entries == ()
    assert len(result.skipped_turn_ids) == 4
    assert len(writer_memory.working_memory("maya")) == 4
    stored = writer_memory.components.journal.turns("maya", [t.turn_id for t in result.turns])
    assert len(stored) == 4  # the turns themselves are still the record


def test_writer_entries_carry_their_source_turns_kind_and_date(
    writer_memory: Memory, script: Script, slm_backend: ScriptedBackend
) -> None:
    script.queue(
        "writer",
        {
            "entries": [
                entry(
                    "Maya booked flight TP1351 to Lisbon for 9 October 2026.",
                    1,
                    2,
                    kind="plan",
                    date="2026-10-09",
                ),
                entry("Maya's sister Ines runs a bakery in Lisbon.", 3),
            ]
        },
    )
    result = writer_memory.add(
        chat(
            ("user", "I booked the flight to Lisbon."),
            ("user", "It's TP1351, on 9 October."),
            ("user", "Ines, my sister, runs a bakery there."),
            ("assistant", "Hi!"),
        ),
        user_id="maya",
    )
    first, second = written(result.entries)
    assert first.kind is MemoryKind.PLAN
    assert first.source_turn_ids == (result.turns[0].turn_id, result.turns[1].turn_id)
    assert first.event_time == datetime(2026, 10, 9, 12, tzinfo=UTC)
    assert second.event_time == result.turns[2].timestamp  # no date given: when it was said
    request = slm_backend.calls_for("writer")[0]
    assert len(numbered(request, "Turns:")) == 3  # "Hi!" never reached the model
    answer = writer_memory.answer("When is my flight?", "maya")
    assert first.id in {h.entry.id for h in answer.hits}
    assert set(answer.source_turns) >= set(first.source_turn_ids)


def test_newer_statement_supersedes_the_older_one(
    writer_memory: Memory, script: Script, clock: ManualClock
) -> None:
    script.queue(
        "writer", {"entries": [entry("Maya is vegetarian and eats no fish.", 1, kind="preference")]}
    )
    (old,) = written(writer_memory.add(chat(("user", "I'm vegetarian.")), user_id="maya").entries)
    clock.advance(timedelta(days=30))
    again = "Maya is no longer vegetarian and eats fish again."
    script.on("writer", update_of("eats no fish", again, kind="preference"))
    result = writer_memory.add(
        chat(("user", "I eat fish again now."), start=T0 + timedelta(days=30)), user_id="maya"
    )
    (new,) = written(result.entries)
    assert [s.id for s in result.superseded] == [old.id]
    kept = writer_memory.get(old.id, "maya")
    assert kept.text == "Maya is vegetarian and eats no fish."
    assert kept.superseded_by == new.id
    found = written(h.entry for h in writer_memory.search("what do I eat", "maya", k=5))
    assert [e.id for e in found] == [new.id]
    everything = writer_memory.search(
        "vegetarian", "maya", k=5, filters=SearchFilters(include_superseded=True)
    )
    assert old.id in {h.entry.id for h in everything}
    events = writer_memory.history(old.id, "maya")
    assert [e.op for e in events] == [AuditOp.ADD, AuditOp.SUPERSEDE]
    assert events[1].after == new.text
    assert events[1].detail["superseded_by"] == new.id


PLACES = ("market", "museum", "park", "cinema", "library", "beach", "harbour", "gallery", "zoo")


def test_a_change_at_the_end_of_a_long_add_is_shown_what_it_changes(
    make_slm_memory: Callable[..., Memory], slm_backend: ScriptedBackend, clock: ManualClock
) -> None:
    """Memories are looked up per turn and each chunk is shown those of its own turns. One
    search of the call's first 2,000 characters, its best five shown to every chunk, never
    saw a statement made after a few long messages."""
    memory = make_slm_memory(controller={"enabled": False}, selector={"enabled": False})
    memory.add(chat(("user", "I live in Cork, in a small flat near the station.")), "maya")
    days = (
        f"Spent the whole afternoon at the {place} with my cousin, we looked at everything "
        f"twice, had a long lunch in the {place} cafe, argued about the best route home and "
        f"only got back after dark, tired but happy with how the {place} day turned out."
        for place in PLACES
    )
    memory.add(chat(*(("user", d) for d in list(days)[:8])), "maya")  # earlier memories
    clock.advance(timedelta(days=7))
    again = (f"Back at the {p} today, the {p} cafe had changed its menu again." for p in PLACES)
    change = "Big news: we moved! I live in Porto now, we left Cork last weekend."
    memory.add(chat(*(("user", a) for a in list(again)[:8]), ("user", change),
                    start=T0 + timedelta(days=7)), "maya")  # fmt: skip
    last = slm_backend.calls_for("writer")[-1]
    assert numbered(last, "Turns:") == [f"[1] 9 March 2026 · Ana: {change}"]  # its own chunk
    shown = numbered(last, "Existing memories:")
    assert any("I live in Cork" in line for line in shown)
    first = slm_backend.calls_for("writer")[-2]  # the other chunk: the memories of its turns
    assert not any("Cork" in line for line in numbered(first, "Existing memories:"))


def test_near_duplicate_merges_and_unites_sources(writer_memory: Memory, script: Script) -> None:
    script.queue("writer", {"entries": [entry("Maya's dog Miso hates thunderstorms.", 1)]})
    first = writer_memory.add(chat(("user", "Miso hates storms.")), user_id="maya")
    script.queue("writer", {"entries": [entry("Maya's dog Miso hates thunderstorms!", 1)]})
    second = writer_memory.add(
        chat(("user", "Thunder scares Miso."), start=T0 + timedelta(hours=1)), user_id="maya"
    )
    assert written(second.entries) == []
    (merged,) = second.merged
    assert merged.id == first.entries[0].id
    assert merged.source_turn_ids == (first.turns[0].turn_id, second.turns[0].turn_id)
    assert merged.text == "Maya's dog Miso hates thunderstorms!"  # the newer statement
    assert written(writer_memory.get_all("maya")) == [merged]
    events = writer_memory.history(merged.id, "maya")
    assert [e.op for e in events] == [AuditOp.ADD, AuditOp.MERGE]
    assert events[1].detail["similarity"] >= 0.92


def test_distinct_entries_do_not_merge(writer_memory: Memory, script: Script) -> None:
    script.queue(
        "writer",
        {"entries": [entry("Maya's dog Miso hates thunderstorms.", 1)]},
        {"entries": [entry("Maya's cat Tofu loves sunny windows.", 1)]},
    )
    writer_memory.add(chat(("user", "Miso hates storms.")), user_id="maya")
    result = writer_memory.add(
        chat(("user", "Tofu loves the sun."), start=T0 + timedelta(hours=1)), user_id="maya"
    )
    assert [e.text for e in written(result.entries)] == ["Maya's cat Tofu loves sunny windows."]
    assert result.merged == ()


@pytest.mark.parametrize(
    "failure",
    ["{oops", {"entries": [entry("Maya likes tea.", 7)]}, SLMTimeout("writer", "slow")],
)
def test_writer_fallback_stores_turns_verbatim_and_is_counted(
    writer_memory: Memory, script: Script, failure: object
) -> None:
    script.queue("writer", failure)  # type: ignore[arg-type]
    result = writer_memory.add(
        chat(("user", "I like green tea."), ("user", "Every morning.")), user_id="maya"
    )
    assert [e.kind for e in result.entries] == [MemoryKind.TURN, MemoryKind.TURN]
    assert [e.text for e in result.entries] == ["Ana: I like green tea.", "Ana: Every morning."]
    stats = writer_memory.components.meter.snapshot()["writer"]
    assert stats["fallbacks"] == 1
    assert stats["ok"] == 0


def test_long_adds_are_written_in_chunks(
    writer_memory: Memory, slm_backend: ScriptedBackend
) -> None:
    turns = [("user", f"Fact number {i}: I visited museum {i}.") for i in range(20)]
    writer_memory.add(chat(*turns), user_id="maya")
    sizes = [len(numbered(r, "Turns:")) for r in slm_backend.calls_for("writer")]
    assert sizes == [8, 8, 4]


def test_readding_known_turns_costs_no_model_call(
    writer_memory: Memory, script: Script, slm_backend: ScriptedBackend
) -> None:
    script.queue("writer", {"entries": [entry("Maya plays the cello.", 1)]})
    messages = chat(("user", "I play the cello."))
    writer_memory.add(messages, user_id="maya")
    again = writer_memory.add(messages, user_id="maya")
    assert len(slm_backend.calls_for("writer")) == 1
    assert again.entries == ()
    assert again.skipped_turn_ids == (again.turns[0].turn_id,)


def test_capacity_evicts_superseded_then_least_useful_with_audit(
    make_slm_memory: Callable[..., Memory], script: Script, clock: ManualClock
) -> None:
    """Each day's add stores the writer's entry and its verbatim turn. The writer's cello
    entry is used, its turn of the same day is not: the turn goes, the entry stays."""
    memory = make_slm_memory(
        capacity=10,
        controller={"enabled": False},
        selector={"enabled": False},
    )
    topics = ["cello", "tennis", "sushi", "Berlin", "gardening", "chess"]
    ids, turns = [], []
    writers = SearchFilters(kinds=(MemoryKind.FACT,))
    for day, topic in enumerate(topics):
        clock.set(T0 + timedelta(days=day))
        script.queue("writer", {"entries": [entry(f"Maya likes {topic} a lot.", 1)]})
        added = memory.add(
            chat((("user", f"I like {topic}.")), start=T0 + timedelta(days=day)), user_id="maya"
        ).entries
        (fact,) = written(added)
        (turn,) = [e for e in added if e.kind is MemoryKind.TURN]
        ids.append(fact.id)
        turns.append(turn.id)
        if topic == "tennis":
            (used,) = memory.search("cello", "maya", k=1, filters=writers)
            assert used.entry.id == ids[0]  # the writer's cello entry is used
    remaining = {e.id for e in memory.get_all("maya", SearchFilters(include_superseded=True))}
    assert len(remaining) == 9  # 12 entries, over 10 -> down to the low-water mark, 95% of 10
    evicted = {*ids, *turns} - remaining
    assert evicted == {turns[0], ids[1], turns[1]}  # the unused oldest: cello's turn, tennis
    assert ids[0] in remaining
    for victim in evicted:
        last = memory.history(victim, "maya")[-1]
        assert last.op is AuditOp.DELETE
        assert last.detail["reason"] == "low utility"


def test_writer_never_sees_another_users_memories(
    writer_memory: Memory, script: Script, slm_backend: ScriptedBackend
) -> None:
    script.queue("writer", {"entries": [entry("Bob's passport is in the blue folder.", 1)]})
    writer_memory.add(
        chat(("user", "My passport is in the blue folder."), speaker="Bob"), user_id="bob"
    )
    writer_memory.add(chat(("user", "Where is my passport? The blue folder?")), user_id="maya")
    maya_request = slm_backend.calls_for("writer")[-1]
    assert numbered(maya_request, "Existing memories:") == []
    assert "Bob" not in maya_request.messages[-1].content


def test_capacity_evicts_superseded_entries_first(
    make_slm_memory: Callable[..., Memory], script: Script, clock: ManualClock
) -> None:
    """Each add stores the writer's entry and its verbatim turn. The superseded entry goes
    first, before the older chess entries and before its own turn of the same day."""
    memory = make_slm_memory(
        capacity=6,
        controller={"enabled": False},
        selector={"enabled": False},
        writer_supersedes=True,
    )
    script.queue("writer", {"entries": [entry("Maya likes chess.", 1)]})
    chess = memory.add(chat(("user", "I like chess."), start=clock.now()), "maya").entries
    clock.advance(timedelta(days=1))
    script.queue(
        "writer", {"entries": [entry("Maya is vegetarian and eats no fish.", 1, kind="preference")]}
    )
    vegetarian = memory.add(chat(("user", "I'm vegetarian."), start=clock.now()), "maya").entries
    (old,) = written(vegetarian)
    clock.advance(timedelta(days=1))
    again = "Maya is no longer vegetarian and eats fish again."
    script.on("writer", update_of("eats no fish", again, kind="preference"))
    update = memory.add(chat(("user", "I eat fish again."), start=clock.now()), "maya")
    assert [e.id for e in update.superseded] == [old.id]
    clock.advance(timedelta(days=1))
    script.on("writer", lambda request: {"entries": [entry("Maya likes Berlin.", 1)]})
    result = memory.add(chat(("user", "I like Berlin."), start=clock.now()), user_id="maya")
    assert result.evicted_ids[0] == old.id  # the superseded entry goes first
    assert memory.history(old.id, "maya")[-1].detail["reason"] == "superseded"
    # 8 entries, capacity 6, low-water mark 5: then the least useful, the oldest
    assert set(result.evicted_ids) == {old.id, *(e.id for e in chess)}
    assert {e.text for e in written(memory.get_all("maya"))} == {again, "Maya likes Berlin."}
    assert "Ana: I'm vegetarian." in {e.text for e in memory.get_all("maya")}


def test_by_default_a_writers_update_hides_nothing_and_is_counted(
    make_slm_memory: Callable[..., Memory], script: Script
) -> None:
    """``slm.writer_supersedes`` is off by default: the small writers' supersedes were mostly
    wrong, and a wrong one hides a true fact. The update is stored beside the old entry."""
    memory = make_slm_memory(controller={"enabled": False}, selector={"enabled": False})
    script.queue("writer", {"entries": [entry("Maya is vegetarian.", 1, kind="preference")]})
    script.on("writer", update_of("Maya is vegetarian", "Maya eats fish again.", "preference"))
    (old,) = written(memory.add(chat(("user", "I'm vegetarian.")), user_id="maya").entries)
    result = memory.add(chat(("user", "I eat fish again."), start=T0 + timedelta(days=3)), "maya")
    assert result.superseded == ()
    (new,) = written(result.entries)
    assert new.text == "Maya eats fish again."
    assert memory.get(old.id, "maya").superseded_by is None
    found = written(h.entry for h in memory.search("what do I eat", "maya", k=5))
    assert {e.id for e in found} == {old.id, new.id}
    assert memory.meter.snapshot()["writer"]["events"] == {"replaces_off": 1}
    assert memory.meter.event_count("writer", "replaces_off") == 1
    scored = Supersedes()  # what bench updates reports of the writer's path
    scored.score(memory, "maya", [])
    assert (scored.row()["supersedes"], scored.row()["unapplied"]) == (0, 1)


def test_a_dissimilar_replacement_is_rejected_and_counted(
    writer_memory: Memory, script: Script
) -> None:
    """A weak model that marks an unrelated fact as an update must not hide the old one."""
    script.queue("writer", {"entries": [entry("Maya is vegetarian.", 1, kind="preference")]})
    script.on("writer", update_of("Maya is vegetarian", "Maya likes chess."))
    (old,) = written(writer_memory.add(chat(("user", "I'm vegetarian.")), user_id="maya").entries)
    said = "A vegetarian friend got me into chess, I like it."  # shown the memory it names
    result = writer_memory.add(chat(("user", said), start=T0 + timedelta(hours=1)), "maya")
    assert result.superseded == ()
    assert writer_memory.get(old.id, "maya").superseded_by is None
    assert len(written(writer_memory.get_all("maya"))) == 2
    events = writer_memory.components.meter.snapshot()["writer"]["events"]
    assert events == {"supersede_rejected": 1}


def test_an_update_that_its_turn_does_not_state_supersedes_nothing(
    writer_memory: Memory, script: Script
) -> None:
    """Seen with a 0.5B writer on ``bench updates``: an "update" citing small talk, and one
    restating the memory it would hide. Both entries are kept; neither hides anything."""
    script.queue("writer", {"entries": [entry("Maya is vegetarian.", 1, kind="preference")]})
    (old,) = written(writer_memory.add(chat(("user", "I'm vegetarian.")), user_id="maya").entries)
    script.on("writer", update_of("Maya is vegetarian", "Maya eats fish now."))
    small_talk = chat(("user", "Ha, I can imagine!"), start=T0 + timedelta(hours=1))
    first = writer_memory.add(small_talk, user_id="maya")
    script.on("writer", update_of("Maya is vegetarian", "Maya is vegetarian."))
    restated = chat(("user", "Still vegetarian!"), start=T0 + timedelta(hours=2))
    second = writer_memory.add(restated, user_id="maya")
    assert first.superseded == second.superseded == ()
    assert writer_memory.get(old.id, "maya").superseded_by is None
    events = writer_memory.meter.snapshot()["writer"]["events"]
    assert events.get("replaces_ungrounded") == 2


def test_a_copy_marked_as_an_update_merges_and_supersedes_nothing(
    writer_memory: Memory, script: Script
) -> None:
    """Seen with a 0.5B writer: it copies a memory it was shown (the writer's dog entry) and
    says it replaces another (the vegetarian turn, shown beside it)."""
    script.queue(
        "writer",
        {
            "entries": [
                entry("Maya is vegetarian and eats no fish.", 1),
                entry("Maya's dog Miso hates thunderstorms.", 2),
            ]
        },
    )
    vegetarian, dog = written(
        writer_memory.add(
            chat(("user", "I'm vegetarian."), ("user", "Miso hates storms.")), user_id="maya"
        ).entries
    )
    copy = "Maya's dog Miso hates thunderstorms."
    script.on("writer", update_of("Ana: I'm vegetarian.", copy))
    result = writer_memory.add(
        # the turn states what the copy says: only the copy check can catch it; it names
        # the diet too, so the vegetarian turn is among the memories shown (by its words,
        # not by where a tie of unrelated ones is cut)
        chat(
            ("user", "Miso still hates thunderstorms, and I'm still vegetarian."),
            start=T0 + timedelta(hours=1),
        ),
        user_id="maya",
    )
    assert result.superseded == ()
    assert written(result.entries) == []
    assert [m.id for m in result.merged] == [dog.id]
    live = writer_memory.get_all("maya")
    assert vegetarian in live
    assert "Ana: I'm vegetarian." in {e.text for e in live}
    events = writer_memory.meter.snapshot()["writer"]["events"]
    assert events == {"copy_not_update": 1}


def test_verbatim_turns_are_kept_beside_the_writers_entries_by_default(
    make_slm_memory: Callable[..., Memory], script: Script
) -> None:
    memory = make_slm_memory(controller={"enabled": False}, selector={"enabled": False})
    script.queue("writer", {"entries": [entry("Maya plays the cello in a quartet.", 1, 2)]})
    result = memory.add(
        chat(
            ("user", "I play the cello."), ("user", "In a quartet, Sundays."), ("user", "Thanks!")
        ),
        user_id="maya",
    )
    kinds = sorted(e.kind.value for e in result.entries)
    assert kinds == ["fact", "turn", "turn"]  # "Thanks!" is small talk: no entry at all
    fact = next(e for e in result.entries if e.kind is MemoryKind.FACT)
    turns = {e.source_turn_ids[0] for e in result.entries if e.kind is MemoryKind.TURN}
    assert set(fact.source_turn_ids) == turns


def test_with_the_writer_on_a_question_and_its_answer_are_kept_as_one_exchange_too(
    make_slm_memory: Callable[..., Memory], script: Script
) -> None:
    """The verbatim floor beside the writer's entries is the model-free path's whole: each
    turn and each exchange (a burst and the burst answering it). Without the exchanges, a
    writer measured on LoCoMo conversation 8 lost 4.1 points of recall at 300 tokens."""
    memory = make_slm_memory(controller={"enabled": False}, selector={"enabled": False})
    script.queue("writer", {"entries": [entry("Maya went to Lisbon for the festival.", 2)]})
    said = (("assistant", "Where did you go last week?"), ("user", "Lisbon, for the festival."))
    result = memory.add(chat(*said), user_id="maya")
    kinds = sorted(e.kind.value for e in result.entries)
    assert kinds == ["exchange", "fact", "turn", "turn"]
    exchange = next(e for e in result.entries if e.kind is MemoryKind.EXCHANGE)
    assert "Where did you go" in exchange.text
    assert "Lisbon" in exchange.text
    assert len(exchange.source_turn_ids) == 2


def _events(memory: Memory) -> dict[str, int]:
    return memory.meter.snapshot()["writer"]["events"]  # type: ignore[return-value]


def test_an_entry_citing_the_assistant_is_the_assistants_whatever_the_model_wrote(
    writer_memory: Memory, script: Script
) -> None:
    """Seen on qwen0.5b: "Maya: Got it, Maya: vegetarian recipes only." was the assistant's
    line. The label comes from the cited turns' speakers, never from the model's text."""
    script.queue(
        "writer",
        {
            "entries": [
                entry("Ana: vegetarian recipes only, lentil curry tonight.", 2),
                entry("Assistant: Ana has eaten no meat since 2019.", 1),
                entry("Ana has been vegetarian since 2019.", 1),
                entry("Lentil curry is on the menu for tonight.", 2),
            ]
        },
    )
    result = writer_memory.add(
        chat(
            ("user", "I've been vegetarian since 2019."),
            ("assistant", "Got it: vegetarian recipes only. I'll suggest a lentil curry tonight."),
        ),
        user_id="ana",
    )
    assert [e.text for e in written(result.entries)] == [
        "Assistant: vegetarian recipes only, lentil curry tonight.",
        "Ana: Ana has eaten no meat since 2019.",
        "Ana has been vegetarian since 2019.",  # no label written, a user turn: as written
        "Assistant: Lentil curry is on the menu for tonight.",
    ]
    assert _events(writer_memory) == {"speaker_fixed": 3}


def test_a_label_over_turns_of_two_speakers_names_both(
    writer_memory: Memory, script: Script
) -> None:
    script.queue("writer", {"entries": [entry("Ana: the 07:25 flight to Lisbon is booked.", 1, 2)]})
    result = writer_memory.add(
        chat(("user", "Which flight did I book?"), ("assistant", "TP1351 to Lisbon, 07:25.")),
        user_id="ana",
    )
    assert [e.text for e in written(result.entries)] == [
        "Ana and Assistant: the 07:25 flight to Lisbon is booked."
    ]
    assert _events(writer_memory) == {"speaker_fixed": 1}


def test_an_entry_that_restates_its_turn_is_dropped_and_counted(
    make_slm_memory: Callable[..., Memory], script: Script
) -> None:
    """The verbatim turn is stored beside the writer's entries: a copy of it adds nothing."""
    memory = make_slm_memory(controller={"enabled": False}, selector={"enabled": False})
    script.queue(
        "writer",
        {
            "entries": [
                entry("Ana: I run in the mornings before work.", 1),  # the turn, labelled
                entry("2 March 2026 · Ana: I run in the mornings, before work!", 1),  # the line
                entry("Morning runs it is", 2),  # an excerpt of the assistant's turn
                entry("Ana runs in the mornings before work.", 1),  # a rewrite: kept
            ]
        },
    )
    result = memory.add(
        chat(
            ("user", "I run in the mornings before work."),
            ("assistant", "Great goal. Morning runs it is; we can plan your build-up."),
        ),
        user_id="ana",
    )
    assert sorted(e.text for e in result.entries) == [
        "Ana runs in the mornings before work.",
        "Ana: I run in the mornings before work.",
        # the exchange, as the model-free path keeps it
        "Ana: I run in the mornings before work.\n"
        "Assistant: Great goal. Morning runs it is; we can plan your build-up.",
        "Assistant: Great goal. Morning runs it is; we can plan your build-up.",
    ]
    assert [e.kind for e in result.entries].count(MemoryKind.TURN) == 2
    assert _events(memory) == {"restated_dropped": 3}


def test_a_restatement_under_the_wrong_speaker_is_dropped(
    writer_memory: Memory, script: Script
) -> None:
    """A copy is a copy whatever speaker the model wrote: what was said stays searchable
    once, as the verbatim turn under its real speaker, never as the assistant's."""
    script.queue(
        "writer",
        {
            "entries": [
                entry("Assistant: I play the cello in a quartet.", 1),
                entry("Ana: I play the cello in a quartet", 1),
                entry("Ana rehearses with the quartet on Sundays.", 2),
            ]
        },
    )
    result = writer_memory.add(
        chat(("user", "I play the cello in a quartet."), ("user", "We rehearse on Sundays.")),
        user_id="ana",
    )
    assert [(e.kind, e.text) for e in result.entries] == [
        (MemoryKind.FACT, "Ana rehearses with the quartet on Sundays."),
        (MemoryKind.TURN, "Ana: I play the cello in a quartet."),
        (MemoryKind.TURN, "Ana: We rehearse on Sundays."),
    ]
    assert _events(writer_memory) == {"restated_dropped": 2}
    found = [h.entry.text for h in writer_memory.search("cello", "ana", k=5)]
    assert [text for text in found if "cello" in text] == ["Ana: I play the cello in a quartet."]


def test_a_copy_under_a_wrong_citation_is_dropped_not_misattributed(
    writer_memory: Memory, script: Script
) -> None:
    """Seen on qwen0.5b: citations off by one, so Maya's line cited the assistant's turn. A
    copy of any turn of the chunk is a copy; the verbatim turn it copies is the one record."""
    script.queue(
        "writer",
        {
            "entries": [
                entry("Ana: My sister Ines lives in Lisbon, she runs a bakery.", 2),
                entry("Ana's sister Ines runs a bakery in Lisbon.", 1),
            ]
        },
    )
    result = writer_memory.add(
        chat(
            ("user", "My sister Ines lives in Lisbon, she runs a bakery."),
            ("assistant", "You'll have someone to cheer for you at the race."),
        ),
        user_id="ana",
    )
    assert [e.text for e in written(result.entries)] == [
        "Ana's sister Ines runs a bakery in Lisbon."
    ]
    turns = [e for e in result.entries if e.kind is MemoryKind.TURN and "sister" in e.text]
    assert [(e.text, e.source_turn_ids) for e in turns] == [
        ("Ana: My sister Ines lives in Lisbon, she runs a bakery.", (result.turns[0].turn_id,))
    ]
    assert _events(writer_memory) == {"restated_dropped": 1}


def test_a_copy_of_a_stored_turn_it_was_shown_is_dropped(
    make_slm_memory: Callable[..., Memory], script: Script, slm_backend: ScriptedBackend
) -> None:
    """Also seen on qwen0.5b: the writer copies a verbatim turn from its existing memories
    into a later session, where no merge catches it (turn entries never merge)."""
    memory = make_slm_memory(controller={"enabled": False}, selector={"enabled": False})
    memory.add(chat(("user", "I'm training for the Lisbon half-marathon.")), "ana", "s1")
    copy = entry("Ana: I'm training for the Lisbon half-marathon.", 1, kind="event")
    script.queue("writer", {"entries": [copy]})
    later = T0 + timedelta(days=30)
    result = memory.add(
        chat(("user", "I switched my runs to the evenings."), start=later), "ana", "s2"
    )
    shown = numbered(slm_backend.calls_for("writer")[-1], "Existing memories:")
    assert any("half-marathon" in line for line in shown)
    assert [e.kind for e in result.entries] == [MemoryKind.TURN]
    assert sum("half-marathon" in e.text for e in memory.get_all("ana")) == 1
    assert _events(memory) == {"restated_dropped": 1}


@pytest.mark.parametrize(
    ("text", "turn", "restated"),
    [
        ("I'm vegetarian.", "Hi! I'm Maya. I'm vegetarian, so keep recipes meat-free.", True),
        (
            "I'm staying six nights at Casa Alfama guesthouse, room 4, close to my sister's bakery",
            "I'm staying six nights at the Casa Alfama guesthouse, room 4, close to my "
            "sister's bakery.",
            True,
        ),
        ("Maya is vegetarian.", "Hi! I'm Maya. I'm vegetarian, so keep recipes meat-free.", False),
        ("Maya runs in the mornings.", "I run in the mornings.", False),
        ("Maya's flight TP1351 leaves at 07:25.", "TP1351, 07:25", False),
    ],
)
def test_what_counts_as_a_restatement(text: str, turn: str, restated: bool) -> None:
    assert restates(text, [turn]) is restated


def test_a_long_message_is_indexed_in_pieces_with_the_writer_too(
    make_slm_memory: Callable[..., Memory],
) -> None:
    """The writer sees a turn's first 400 characters; the verbatim turn it keeps is the only
    record of the rest, so it is indexed in pieces as on the model-free path."""
    memory = make_slm_memory(controller={"enabled": False}, selector={"enabled": False})
    topics = [
        "The garden needs watering twice a week in summer.",
        "Our neighbour Paul repairs old radios in his garage.",
        "The train to the coast leaves at nine every Saturday.",
        "My aunt bakes rye bread with caraway seeds.",
    ]
    said = [topics[i % len(topics)].replace(".", f" number {i}.") for i in range(60)]
    said[45] = "The spare key is hidden under the blue flowerpot beside the shed."
    result = memory.add(chat(("user", " ".join(said))), user_id="maya")
    assert len([e for e in result.entries if e.kind is MemoryKind.TURN]) > 1
    ctx = memory.context("where is the spare key hidden", "maya", budget_tokens=200)
    assert "flowerpot" in ctx.text
