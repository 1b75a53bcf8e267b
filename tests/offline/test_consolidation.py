"""The consolidation job end to end on a scripted model: batches and the watermark, merge
versus insert, failures, retrieval beside MTM, erasure."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tiermem import ManualClock, Memory, MemoryNotFoundError, SearchFilters, Tier
from tiermem.errors import ConfigError, SLMTimeout, SLMUnavailable
from tiermem.slm.base import SLMRequest

from tests.conftest import T0, chat
from tests.offline.conftest import (
    edge,
    known_in,
    memories_in,
    node,
    one_node_per_memory,
    scripted,
    units,
)

HOBBIES = [
    "I started pottery classes, clay is calming",
    "We went hiking in the mountains",
    "My dog loves the beach",
    "I play violin in an orchestra",
    "Reading science fiction novels before bed",
    "Cooking ramen from scratch on weekends",
    "Volunteering at the animal shelter",
    "Learning to surf this summer",
    "Growing tomatoes on the balcony",
    "Painting watercolour landscapes",
]


def add_lines(memory: Memory, user: str, lines: list[str], speaker: str = "Ana", start=T0) -> None:  # type: ignore[no-untyped-def]
    memory.add(chat(*[("user", line) for line in lines], start=start, speaker=speaker), user)


def test_memory_without_ltm_refuses_consolidation(make_memory: Any) -> None:
    memory = make_memory()
    with pytest.raises(ConfigError):
        memory.consolidate_now()
    with pytest.raises(ConfigError):
        memory.consolidation_state()


def test_a_run_turns_memories_into_nodes_and_edges(make_ltm_memory: Any) -> None:
    def model(request: SLMRequest) -> str:
        return units(
            [node("pottery", "shaping clay; people find it calming"), node("hiking")],
            [edge("pottery", "HasProperty", "calming", "pottery is calming")],
        )

    memory = make_ltm_memory(model)
    add_lines(memory, "alice", HOBBIES[:2])
    report = memory.consolidate_now()
    assert report.entries == 2
    assert report.chunks == 1
    # Two nodes and the edge's new endpoint "calming"; then the edge.
    assert (report.counts.inserted, report.nodes, report.edges) == (4, 3, 1)
    facts = memory.components.ltm.facts()  # type: ignore[union-attr]
    assert "pottery (Concept): shaping clay; people find it calming" in facts
    assert "pottery has the property calming: pottery is calming" in facts
    assert report.prompt_tokens > 0
    assert report.completion_tokens > 0


def test_watermark_survives_restarts_and_takes_new_and_reactivated_entries(
    make_ltm_memory: Any, clock: ManualClock
) -> None:
    memory = make_ltm_memory(one_node_per_memory, batch_size=4, chunk_size=2)
    add_lines(memory, "alice", HOBBIES[:6])
    clock.advance(timedelta(minutes=30))
    assert memory.consolidate_now().entries == 4
    assert memory.components.ltm.state("alice").runs == 1  # type: ignore[union-attr]
    first = {m for r in scripted(memory).requests for m in memories_in(r)}
    memory.close()

    memory = make_ltm_memory(one_node_per_memory, batch_size=4, chunk_size=2)
    assert memory.consolidate_now().entries == 2  # the two left, nothing twice
    second = {m for r in scripted(memory).requests for m in memories_in(r)}
    assert len(first) == 4
    assert len(second) == 2
    assert not first & second
    assert all(any(h in m for m in first | second) for h in HOBBIES[:6])
    assert memory.consolidate_now().entries == 0
    assert len(scripted(memory).requests) == 1  # nothing pending: no model call

    clock.advance(timedelta(minutes=5))
    add_lines(memory, "alice", HOBBIES[6:7], start=clock.now())  # new
    memory.search("hiking mountains", "alice", k=1)  # re-activates the hiking entry
    again = memory.consolidate_now()
    shown = memories_in(scripted(memory).requests[-1])
    assert again.entries == 2
    assert any("hiking" in m for m in shown)
    assert any("Volunteering" in m for m in shown)
    # Re-consolidating the same entry refreshes its support but is not new evidence.
    assert again.counts.repeats >= 1


def test_a_failed_run_keeps_the_watermark_and_the_retry_takes_the_same_batch(
    make_ltm_memory: Any,
) -> None:
    memory = make_ltm_memory(one_node_per_memory, chunk_size=2)
    add_lines(memory, "alice", HOBBIES[:4])
    backend = scripted(memory)
    backend.push(units([node("pottery")]), SLMUnavailable("consolidator", "endpoint down"))
    with pytest.raises(SLMUnavailable):
        memory.consolidate_now()
    first_chunk = memories_in(backend.requests[0])
    failed_chunk = memories_in(backend.requests[1])
    state = memory.consolidation_state()
    assert state.failures == 1
    assert "SLMUnavailable" in (state.last_error or "")
    retry = memory.consolidate_now()  # the finished chunk stays done; the failed one is retried
    assert retry.entries == 2
    assert memories_in(backend.requests[2]) == failed_chunk != first_chunk
    assert memory.consolidation_state().failures == 0


@pytest.mark.parametrize("failure", ["invalid", "timeout"])
def test_invalid_or_timed_out_output_skips_the_chunk_counted(
    make_ltm_memory: Any, failure: str
) -> None:
    memory = make_ltm_memory(one_node_per_memory, chunk_size=2)
    add_lines(memory, "alice", HOBBIES[:4])
    bad = '{"nodes": [{"name": ' if failure == "invalid" else SLMTimeout("consolidator", "slow")
    scripted(memory).push(bad, units([node("violin")]))
    report = memory.consolidate_now()
    skipped = report.invalid_chunks if failure == "invalid" else report.timed_out_chunks
    assert (report.chunks, skipped, report.entries) == (2, 1, 4)
    assert memory.meter.snapshot()["consolidator"]["fallbacks"] == 1
    assert memory.consolidate_now().entries == 0  # a bad chunk does not block the queue


def test_merge_versus_insert(make_ltm_memory: Any, clock: ManualClock) -> None:
    memory = make_ltm_memory(chunk_size=1)
    ltm = memory.components.ltm
    backend = scripted(memory)
    add_lines(memory, "alice", HOBBIES[:1])
    backend.push(units([node("pottery", "shaping clay")]))
    memory.consolidate_now()

    clock.advance(timedelta(days=1))
    add_lines(memory, "bob", ["Pottery is my favourite hobby"], speaker="Bo", start=clock.now())
    # The model says "insert", but a node of that name exists: merged, new evidence.
    backend.push(units([node("Pottery", "shaping clay")]))
    merged = memory.consolidate_now()
    assert (merged.counts.inserted, merged.counts.merged, ltm.node_count) == (0, 1, 1)

    clock.advance(timedelta(days=1))
    add_lines(memory, "bob", ["I joined a choir"], speaker="Bo", start=clock.now())
    backend.push(
        lambda r: (
            units([node("ceramics", "shaping clay into pots", action="update", anchor=1)])
            if "pottery" in known_in(r)[0]
            else units([])
        )
    )
    updated = memory.consolidate_now()
    assert updated.counts.updated == 1
    assert ltm.node_count == 1
    assert "pottery (Concept): shaping clay into pots" in ltm.facts()

    clock.advance(timedelta(days=1))
    add_lines(memory, "bob", ["I like chess"], speaker="Bo", start=clock.now())
    backend.push(units([node("chess", "a board game")]))
    inserted = memory.consolidate_now()
    assert inserted.counts.inserted == 1
    assert ltm.node_count == 2
    evidence = {f.text.split(" (")[0]: f.evidence for f in search_all(memory)}
    assert evidence == {"pottery": 3, "chess": 1}


def search_all(memory: Memory) -> list[Any]:
    ltm = memory.components.ltm
    assert ltm is not None
    return ltm.inventory(memory.components.clock.now())


def test_knowledge_decays_and_is_pruned_unless_supported_again(
    make_ltm_memory: Any, clock: ManualClock
) -> None:
    memory = make_ltm_memory(chunk_size=1)
    ltm = memory.components.ltm
    backend = scripted(memory)
    add_lines(memory, "alice", HOBBIES[:2])
    backend.push(units([node("pottery")]), units([node("hiking")]))
    memory.consolidate_now()
    assert ltm.node_count == 2
    # 1 piece of evidence: confidence 0.5, below 0.1 after log2(5) half-lives (60 days each).
    clock.advance(timedelta(days=100))
    add_lines(memory, "alice", ["more pottery this week"], start=clock.now())
    backend.push(units([node("pottery")]))
    memory.consolidate_now()
    assert ltm.node_count == 2  # 100 days: 0.5 * 0.5**(100/60) = 0.157, both stay
    clock.advance(timedelta(days=50))
    report = memory.consolidate_now()  # nothing new; the run still applies decay
    assert report.pruned == 1
    assert ltm.node_count == 1
    assert ltm.facts() == ["pottery (Concept): pottery"]  # supported 50 days ago: 0.75*0.56


def test_search_returns_ltm_knowledge_beside_mtm_within_its_share(
    make_ltm_memory: Any,
) -> None:
    memory = make_ltm_memory(one_node_per_memory)
    add_lines(memory, "alice", HOBBIES)
    memory.consolidate_now()
    # Another user, who never said a word about pottery, finds the general knowledge.
    add_lines(memory, "carol", ["The weather was nice today"], speaker="Cy")
    hits = memory.search("pottery classes clay calming", "carol", k=5)
    tiers = [h.tier for h in hits]
    assert Tier.LTM in tiers
    assert Tier.MTM in tiers
    assert tiers.count(Tier.LTM) <= 2  # max_share 0.3 of k=5, rounded up
    ltm_hit = next(h for h in hits if h.tier is Tier.LTM)
    assert ltm_hit.source_turn_ids == ()
    assert "ltm" in ltm_hit.explanation.components
    # A time-bounded or session-bound question is about episodes: LTM is not searched.
    bounded = memory.search(
        "pottery classes clay calming", "carol", k=5, filters=SearchFilters(since=T0)
    )
    assert all(h.tier is Tier.MTM for h in bounded)
    answer = memory.answer("pottery classes clay calming", "carol")
    assert answer.source_turns == {} or all(
        t.user_id == "carol" for t in answer.source_turns.values()
    )


def test_forget_user_withdraws_their_evidence_from_the_graph(
    make_ltm_memory: Any, tmp_path: Path
) -> None:
    memory = make_ltm_memory(chunk_size=1)
    ltm = memory.components.ltm
    backend = scripted(memory)
    add_lines(memory, "alice", HOBBIES[:2])
    add_lines(memory, "bob", ["Pottery keeps me sane"], speaker="Bo")
    backend.respond_with(
        lambda r: (
            units([node("pottery")]) if "otter" in memories_in(r)[0] else units([node("hiking")])
        )
    )
    memory.consolidate_now()
    evidence = {f.text.split(" (")[0]: f.evidence for f in search_all(memory)}
    assert evidence == {"pottery": 2, "hiking": 1}

    report = memory.forget_user("alice")
    assert (report.ltm_removed, report.ltm_decremented) == (1, 1)
    evidence = {f.text.split(" (")[0]: f.evidence for f in search_all(memory)}
    assert evidence == {"pottery": 1}
    assert ltm.state("alice").watermark is None
    memory.close()
    reopened = make_ltm_memory()
    assert reopened.components.ltm.facts() == ["pottery (Concept): pottery"]
    reopened.close()
    on_disk = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for trace in (b"alice", b"hiking in the mountains", b"pottery classes"):
        assert trace not in on_disk, trace
    assert b"Pottery keeps me sane" in on_disk  # bob's memory is untouched


def test_ltm_show_lists_the_graph_read_only(
    make_ltm_memory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tiermem.cli import main

    memory = make_ltm_memory(lambda r: units([node("pottery", "shaping clay")]))
    add_lines(memory, "alice", HOBBIES[:1])
    memory.consolidate_now()
    memory.close()
    before = sorted(p.name for p in (tmp_path / "ltm").iterdir())
    toml = tmp_path / "show.toml"
    toml.write_text('[embedder]\nkind = "hash"\nmodel = "hash-384"\n')
    assert main(["ltm", "--config", str(toml), "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "LTM: 1 nodes, 0 edges" in out
    assert "pottery (Concept): shaping clay" in out
    assert sorted(p.name for p in (tmp_path / "ltm").iterdir()) == before


def test_every_graph_change_is_an_audit_row_without_user_ids(
    make_ltm_memory: Any, clock: ManualClock
) -> None:
    memory = make_ltm_memory(chunk_size=1)
    backend = scripted(memory)
    add_lines(memory, "alice", HOBBIES[:1])
    add_lines(memory, "bob", ["Pottery keeps me sane"], speaker="Bo")
    backend.push(
        units([node("pottery", "shaping clay")]),
        units([node("pottery", "shaping clay into pots", action="update", anchor=1)]),
    )
    memory.consolidate_now()
    [pottery] = [f.id for f in memory.components.ltm.inventory(clock.now())]  # type: ignore[union-attr]
    hit_id = f"ltm:{pottery}"
    events = memory.knowledge_history(hit_id)
    assert [(e.op, e.evidence, e.actor) for e in events] == [
        ("INSERT", 1, "consolidation"),
        ("SUPPORT", 2, "consolidation"),
        ("UPDATE", 2, "consolidation"),
    ]
    assert events[2].before == "pottery (Concept): shaping clay"
    assert events[2].after == "pottery (Concept): shaping clay into pots"
    memory.forget_user("alice")
    assert [(e.op, e.evidence, e.actor) for e in memory.knowledge_history(pottery)][-1] == (
        "WITHDRAW",
        1,
        "erasure",
    )
    rows = memory.components.journal._conn.execute("SELECT * FROM ltm_audit").fetchall()
    assert rows
    assert "alice" not in repr(rows)
    assert "bob" not in repr(rows)
    with pytest.raises(MemoryNotFoundError):
        memory.knowledge_history("ltm:n:nothing")


def test_erasing_the_only_supporter_leaves_no_text_of_its_knowledge_on_disk(
    make_ltm_memory: Any, clock: ManualClock, tmp_path: Path
) -> None:
    memory = make_ltm_memory(chunk_size=1)
    backend = scripted(memory)
    add_lines(memory, "alice", ["My secret project is codenamed bluewhalezz"])
    add_lines(memory, "bob", ["Pottery keeps me sane"], speaker="Bo")
    backend.push(  # the model copies alice's word into knowledge only she supports
        units([node("project", "codenamed bluewhalezz")]),
        units([node("pottery", "shaping clay")]),
    )
    memory.consolidate_now()
    ltm = memory.components.ltm
    assert ltm is not None
    facts = {f.text.split(" ")[0]: f for f in ltm.inventory(clock.now())}
    project, pottery = facts["project"], facts["pottery"]
    assert "bluewhalezz" in project.text
    memory.forget_user("alice")
    events = memory.knowledge_history(project.id)
    assert [(e.op, e.actor) for e in events] == [("INSERT", "consolidation"), ("REMOVE", "erasure")]
    assert all(e.before is None and e.after is None for e in events)  # what, when; not the text
    kept = memory.knowledge_history(pottery.id)  # bob's knowledge keeps its text
    assert kept[0].after == "pottery (Concept): shaping clay"
    memory.close()
    holding = [p for p in tmp_path.rglob("*") if p.is_file() and b"bluewhalezz" in p.read_bytes()]
    assert holding == []
