"""Changed facts: the newer statement reaches the context beside the old one, answer() says
when memory holds nothing on a question, and ``bench updates`` measures both."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from rich.console import Console
from tiermem import Memory
from tiermem.bench.update_scenarios import update_scenarios
from tiermem.bench.updates import WRITER, UpdatesConfig, _tiermem_config, run_updates
from tiermem.config import DeliveryConfig, EmbedderConfig, merge_overrides
from tiermem.embedding.base import EmbedMode, Vectors
from tiermem.generator import NOTHING_IN_MEMORY, supports

from tests.conftest import T0, chat, config_for

OLD = "I live in Cork, in a small flat near the station."
NEW = "Big news: we moved! I live in Porto now, we left Cork last weekend."
UNRELATED = "Watched a documentary about octopuses last night, so good."


def _memory(tmp_path: Path, **delivery: object) -> Memory:
    delivery = {"later": 0.6, **delivery}  # context()'s share is small by default
    config = merge_overrides(config_for("memory", tmp_path), {"delivery": delivery})
    memory = Memory(config)
    week = timedelta(weeks=1)
    memory.add(chat(("user", "My flat has a small balcony facing the station.")), "ana", "s0")
    memory.add(chat(("user", OLD), start=T0 + week), "ana", "s1")
    memory.add(chat(("user", UNRELATED), start=T0 + 2 * week), "ana", "s2")
    memory.add(chat(("user", NEW), start=T0 + 3 * week), "ana", "s3")
    return memory


def _texts(memory: Memory, query: str, **kwargs: object) -> list[str]:
    ctx = memory.context(query, "ana", 1000, k=1, **kwargs)  # type: ignore[arg-type]
    return [ctx.source_turns[t].content for t in ctx.turn_ids]


def test_a_later_statement_close_to_a_hit_is_delivered_after_it(tmp_path: Path) -> None:
    """One hit is retrieved (k=1): the old statement. The later one close to it comes with it,
    under its own later date; the unrelated later turn does not, nor the earlier one."""
    with _memory(tmp_path, later_similarity=0.3) as memory:
        texts = _texts(memory, "Cork flat near the station")
        assert texts[0] == OLD
        assert texts[-1] == NEW  # sessions oldest first: the old value reads first
        assert UNRELATED not in texts
        assert not any("balcony" in t for t in texts)  # earlier, not later: never offered
        assert _texts(memory, "Cork flat near the station", expand=False) == [OLD]


def test_later_statements_are_a_knob_of_the_delivery(tmp_path: Path) -> None:
    # context(): a small share, which costs other hits nothing measurable; answer(): more
    assert 0 < DeliveryConfig().later < DeliveryConfig().answer_later
    with _memory(tmp_path, later=0.0) as memory:
        assert NEW not in _texts(memory, "Cork flat near the station")
    with _memory(tmp_path, later_similarity=0.99) as memory:  # nothing is that close
        assert NEW not in _texts(memory, "Cork flat near the station")
    with _memory(tmp_path, later_similarity=0.3, later_max_tokens=5) as memory:  # too long
        assert NEW not in _texts(memory, "Cork flat near the station")


def test_a_later_statement_is_the_hits_own_speakers(tmp_path: Path) -> None:
    """The assistant's later echo of the user's words changes none of the user's facts."""
    with _memory(tmp_path, later_similarity=0.3) as memory:
        echo = "You live in Cork, in a small flat near the station, right?"
        later = T0 + timedelta(weeks=4)
        memory.add(chat(("user", "Quick question."), ("assistant", echo), start=later), "ana")
        texts = _texts(memory, "Cork flat near the station")
        assert NEW in texts
        assert echo not in texts


def test_a_later_statement_that_ranks_low_is_offered_at_the_later_share(tmp_path: Path) -> None:
    """The new statement is retrieved, but below two look-alikes of the question's words. At a
    budget of two turns it reaches the context only as a later statement of the old one
    (``later_retrieved``): as a hit of its own it is worth its low rank."""
    fillers = (
        "The station cafe near my old office does a great flat white.",
        "Near the station they are building a new block of flats.",
    )
    query = "Cork flat near the station"

    def delivered(retrieved: bool) -> list[str]:
        shares = {"later": 0.6, "later_similarity": 0.3, "later_retrieved": retrieved}
        # lengths aside: a quarter of this budget (long_share) is shorter than every turn
        plain = {"long_share": 0.0}
        config = config_for("memory", tmp_path)
        with Memory(merge_overrides(config, {"delivery": shares | plain})) as memory:
            for i, text in enumerate(fillers):
                memory.add(chat(("user", text), start=T0 + timedelta(days=i)), "ana", f"f{i}")
            memory.add(chat(("user", OLD), start=T0 + timedelta(weeks=1)), "ana", "s1")
            memory.add(chat(("user", NEW), start=T0 + timedelta(weeks=3)), "ana", "s3")
            ranked = [h.item.text for h in memory.search(query, "ana", k=5)]
            assert ranked.index(f"Ana: {NEW}") > ranked.index(f"Ana: {fillers[1]}") > 0
            ctx = memory.context(query, "ana", 60, k=5)
            return [ctx.source_turns[t].content for t in ctx.turn_ids]

    assert delivered(retrieved=False) == [fillers[1], OLD]
    assert delivered(retrieved=True) == [OLD, NEW]


def test_later_statements_cost_no_model_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They search from the hits' stored vectors: context() embeds its query, nothing else,
    whether later statements are offered or not."""

    def embed_calls(later: float) -> int:
        calls = []
        with _memory(tmp_path, later=later, later_similarity=0.3) as memory:
            embedder = memory.components.embedder
            embed = embedder.embed

            def counted(texts: list[str], mode: EmbedMode) -> Vectors:
                calls.append(texts)
                return embed(texts, mode)

            monkeypatch.setattr(embedder, "embed", counted)
            assert (NEW in _texts(memory, "Cork flat near the station")) is (later > 0)
        return len(calls)

    assert embed_calls(0.6) == embed_calls(0.0) == 1


def test_answer_offers_later_statements_by_default(tmp_path: Path) -> None:
    """answer()'s few hits miss the later statement; its own expansion brings it."""
    with _memory(tmp_path, later=0.0, later_similarity=0.3) as memory:
        assert NEW not in _texts(memory, "Cork flat near the station")
        answer = memory.answer("Cork flat near the station", "ana")
        assert NEW in answer.text
        assert answer.text.index(OLD) < answer.text.index(NEW)


def test_answer_says_memory_holds_nothing_when_no_memory_bears_on_the_question(
    tmp_path: Path,
) -> None:
    with _memory(tmp_path) as memory:
        context = memory.context("Which gym do I go to?", "ana", 500)
        assert context.hits  # the nearest memories are found, related or not
        assert not supports("Which gym do I go to?", context)
        result = memory.answer("Which gym do I go to?", "ana")
        assert result.text == NOTHING_IN_MEMORY
        assert (result.hits, result.context_tokens, dict(result.source_turns)) == ((), 0, {})
        found = memory.answer("Where do I live?", "ana")  # "live": a word the memories share
        assert found.text != NOTHING_IN_MEMORY
        assert NEW in found.text


def test_a_refused_answer_counts_no_access(tmp_path: Path) -> None:
    with _memory(tmp_path) as memory:
        memory.answer("Which gym do I go to?", "ana")
        assert all(e.access_count == 0 for e in memory.get_all("ana"))
        memory.answer("Where do I live?", "ana")
        assert any(e.access_count > 0 for e in memory.get_all("ana"))


def test_the_scenarios_are_seeded_and_their_labels_name_real_turns() -> None:
    convs, labels = update_scenarios(seed=3, users=6)
    again, _ = update_scenarios(seed=3, users=6)
    assert convs == again
    assert convs != update_scenarios(seed=4, users=6)[0]
    for conv in convs:
        ids = conv.turn_ids()
        turns = {t.turn_id: t for s in conv.sessions for t in s.turns}
        changes = {(u.old_turn, u.new_turn) for u in labels[conv.sample_id]}
        for q in conv.questions:
            assert set(q.evidence) <= ids
            if q.question_type == "update":
                assert tuple(q.evidence) in changes
                old, new = (turns[t] for t in q.evidence)
                assert old.turn_id != new.turn_id
                assert q.answer.lower() in new.text.lower()  # the new statement holds the value
        assert all(u.new_turn in ids and u.old_turn in ids for u in labels[conv.sample_id])


@pytest.mark.slow  # a whole benchmark run
def test_bench_updates_reports_every_path_and_budget(tmp_path: Path) -> None:
    cfg = UpdatesConfig(
        tmp_path, budgets=(300, 1200), users=3, embedder=EmbedderConfig(kind="hash")
    )
    result = run_updates(cfg, Console(width=140, record=True))
    assert set(result["curve"]) == {"tiermem", "tiermem+later", "naive-rag", "bm25"}
    for by_budget in result["curve"].values():
        assert set(by_budget) == {"300", "1200"}
        for row in by_budget.values():
            assert 0 <= row["stale_only"] <= 100 - row["latest"] + 1e-9
            assert row["tokens"] <= 1200
    assert result["scenarios"]["questions"]["update"] == 3 * 4
    assert 0 <= result["refusal"]["tiermem"]["refused"] <= 100
    assert set(result["answer"]) == {"tiermem", "tiermem+later"}
    for row in result["answer"].values():  # answer()'s own context, at its own budget
        assert row["questions"] == sum(result["scenarios"]["questions"].values())
        assert 0 <= row["stale_only"] <= 100 - row["latest"] + 1e-9
        assert 0 < row["tokens"] <= 1200
    assert result["supersedes_applied"] is False  # the default: the writer hides nothing
    assert json.loads((tmp_path / "updates.json").read_text()) == result


def test_the_writer_path_keeps_the_configured_slm_settings(tmp_path: Path) -> None:
    """``--config``'s [slm] reaches the writer's path: that is how its supersede decisions
    are applied and scored (``slm.writer_supersedes`` is off by default)."""
    base = merge_overrides(
        config_for("memory", tmp_path),
        {"slm": {"writer_supersedes": True, "supersede_min_similarity": 0.7}},
    )
    cfg = UpdatesConfig(tmp_path, model="qwen0.5b", tiermem=base)
    slm = _tiermem_config(cfg, WRITER).slm
    assert (slm.writer_supersedes, slm.supersede_min_similarity) == (True, 0.7)
    roles = (slm.writer.enabled, slm.controller.enabled, slm.selector.enabled)
    assert roles == (True, False, False)
    assert slm.backend.model == "qwen0.5b"
    assert (slm.writer.timeout_s, slm.writer.backend) == (60.0, None)  # [slm.writer]'s own
    default = UpdatesConfig(tmp_path, model="qwen0.5b")
    assert not _tiermem_config(default, WRITER).slm.writer_supersedes


@pytest.mark.slow  # 24 users' scenarios, four budgets, with and without
def test_the_model_free_path_delivers_the_newest_statement_more_than_without_it(
    tmp_path: Path,
) -> None:
    """The later-statement expansion is what lowers the stale-only rate: the same run with
    it off leaves more contexts holding only the old value (hash embedder, 24 users, 300
    tokens: 21.9 % stale-only without, 20.8 % with). With 8 users the first-person search
    terms (``tiermem.lexical.search_terms``) find the newest statement without it."""
    runs = {}
    for later in (0.0, 0.6):
        base = merge_overrides(config_for("memory", tmp_path), {"delivery": {"later": later}})
        cfg = UpdatesConfig(
            tmp_path / str(later),
            budgets=(300,),
            users=24,
            embedder=EmbedderConfig(kind="hash"),
            tiermem=base,
        )
        runs[later] = run_updates(cfg, Console(width=140))["curve"]["tiermem"]["300"]
    assert runs[0.6]["stale_only"] < runs[0.0]["stale_only"]
    assert runs[0.6]["latest"] > runs[0.0]["latest"]


def test_the_command_runs_the_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tiermem.cli import main

    args = ["bench", "updates", "--out", str(tmp_path), "--users", "1", "--budget", "300"]
    assert main([*args, "--embedder", "hash"]) == 0
    out = capsys.readouterr().out
    assert "update scenarios: 1 users, seed 7" in out
    assert "stale-only" in out
    assert json.loads((tmp_path / "updates.json").read_text())["curve"]["bm25"]["300"]
