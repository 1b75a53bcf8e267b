"""The selector's training set on a ten-conversation LoCoMo fixture made here: the fixed split
holds no test conversation in train or tune, two builds are byte-identical, the pool is the
read path's and every example is rendered by the prompt module the selector serves with."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from tiermem.bench import BenchInputError
from tiermem.config import EmbedderConfig
from tiermem.policy import Policy
from tiermem.slm.prompts import relevance
from tiermem.training.dataset import DatasetConfig, read_examples, write_dataset

FACTS = [
    "I adopted a cat called {n}.",
    "I play the oboe in an orchestra in {n}ville.",
    "My sister bakes bread in Lisbon near {n} street.",
    "We ran a marathon with {n} last spring.",
    "The orchestra plays Mahler on Friday, {n} conducts.",
    "I repainted the kitchen a pale green with {n}.",
    "Our neighbour {n} keeps bees on the roof.",
]


def _conversation(i: int) -> dict[str, object]:
    name = f"Name{i}"
    turns = [
        {
            "speaker": "Ana" if j % 2 == 0 else "Ben",
            "dia_id": f"D1:{j + 1}",
            "text": t.format(n=name),
        }
        for j, t in enumerate(FACTS)
    ]
    return {
        "sample_id": f"fx-{i}",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "9:05 am on 3 June, 2024",
            "session_1": turns[:4],
            "session_2_date_time": "6:40 pm on 20 June, 2024",
            "session_2": [{**t, "dia_id": f"D2:{j + 1}"} for j, t in enumerate(turns[4:])],
        },
        "qa": [
            {"question": f"What is the name of Ana's cat {name}?", "answer": name,
             "evidence": ["D1:1"], "category": 4},
            {"question": "Who keeps bees on the roof?", "answer": name,
             "evidence": ["D2:3"], "category": 4},
            {"question": "Which instrument does Ben play?", "answer": "oboe",
             "evidence": ["D1:2"], "category": 1},
            {"question": "What is Ben's cat called?", "adversarial_answer": name,
             "evidence": ["D1:1"], "category": 5},
        ],
    }  # fmt: skip


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "fx.json"
    path.write_text(json.dumps([_conversation(i) for i in range(10)]))
    return path


def _config(data: Path, split: str, negatives: int | None = None) -> DatasetConfig:
    return DatasetConfig(
        data=data, split=split, k=2, negatives=negatives, embedder=EmbedderConfig(kind="hash")
    )


def test_no_test_conversation_leaks_into_train_or_tune(data: Path, tmp_path: Path) -> None:
    found = {}
    for split in ("train", "tune", "test"):
        out = tmp_path / f"{split}.jsonl"
        stats = write_dataset(_config(data, split), out)
        examples = read_examples(out)
        found[split] = {e.meta.sample_id for e in examples}
        assert {e.meta.split for e in examples} == {split}
        assert stats.examples == len(examples) > 0
        assert stats.questions == 3 * stats.conversations  # the adversarial one left out
        assert {e.meta.category for e in examples} == {"multi-hop", "single-hop"}
    assert found == {
        "train": {f"fx-{i}" for i in range(7)},
        "tune": {"fx-7"},
        "test": {"fx-8", "fx-9"},
    }


def test_two_builds_are_byte_identical(data: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_dataset(_config(data, "tune", negatives=1), first)
    write_dataset(_config(data, "tune", negatives=1), second)
    assert first.read_bytes() == second.read_bytes()
    other_seed = tmp_path / "c.jsonl"
    write_dataset(replace(_config(data, "tune", negatives=1), seed=7), other_seed)
    drawn = [(e.meta.question_index, e.meta.rank) for e in read_examples(first)]
    redrawn = [(e.meta.question_index, e.meta.rank) for e in read_examples(other_seed)]
    assert drawn != redrawn  # the seed draws the negatives


def test_examples_are_the_read_paths_pool_labelled_by_evidence(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "test.jsonl"
    write_dataset(_config(data, "test"), out)
    examples = read_examples(out)
    pool = Policy().candidate_multiplier * 2  # k=2: the pool the selector sees at k=2
    by_question: dict[tuple[str, int], list[int]] = {}
    for e in examples:
        assert e.meta.pool_size == pool
        assert e.meta.prompt_version == relevance.VERSION
        assert e.meta.label == bool(set(e.meta.source_turns) & set(e.meta.evidence))
        assert e.target == relevance.target(e.meta.label)
        question = e.messages[-1].content.split("Question: ")[1].split("\n")[0]
        memory = e.messages[-1].content.split("Memory: ")[1]
        assert list(e.messages) == relevance.build_messages(
            relevance.RelevanceInput(question, memory)
        )
        assert memory.startswith("[3 June 2024] ") or memory.startswith("[20 June 2024] ")
        by_question.setdefault((e.meta.sample_id, e.meta.question_index), []).append(e.meta.rank)
    # the whole pool of every question, in first-stage order, when negatives are not capped
    assert all(ranks == list(range(pool)) for ranks in by_question.values())
    assert sum(e.meta.label for e in examples) >= 4  # the cat and the bees are found


def test_a_negatives_cap_keeps_every_positive(data: Path, tmp_path: Path) -> None:
    whole, capped = tmp_path / "whole.jsonl", tmp_path / "capped.jsonl"
    write_dataset(_config(data, "test"), whole)
    write_dataset(_config(data, "test", negatives=1), capped)
    all_positives = [e.meta for e in read_examples(whole) if e.meta.label]
    kept = read_examples(capped)
    assert [e.meta for e in kept if e.meta.label] == all_positives
    per_question: dict[tuple[str, int], int] = {}
    for e in kept:
        key = (e.meta.sample_id, e.meta.question_index)
        per_question[key] = per_question.get(key, 0) + (not e.meta.label)
    assert max(per_question.values()) == 1


def test_an_unknown_split_or_a_short_file_is_a_typed_error(data: Path, tmp_path: Path) -> None:
    with pytest.raises(BenchInputError, match="unknown split 'dev'"):
        write_dataset(_config(data, "dev"), tmp_path / "x.jsonl")
    short = tmp_path / "short.jsonl"
    short_data = tmp_path / "short.json"
    short_data.write_text(json.dumps([_conversation(i) for i in range(8)]))
    with pytest.raises(BenchInputError, match="positions 8-9 modulo 10, the file has 8"):
        write_dataset(_config(short_data, "test"), short)
    assert not short.exists()


def test_the_cli_writes_a_split_and_says_what_it_holds(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tiermem.cli import main

    out = tmp_path / "train.jsonl"
    args = ["train", "dataset", "--data", str(data), "--out", str(out), "-k", "2"]
    assert main([*args, "--embedder", "hash", "--negatives", "1"]) == 0
    examples = read_examples(out)
    printed = " ".join(capsys.readouterr().out.split())  # as read, whatever the width
    assert f"{len(examples)} examples" in printed
    assert "21 questions of 7 conversations" in printed
    assert main([*args, "--negatives", "some"]) == 2
    assert "error: --negatives takes a count or 'all'" in capsys.readouterr().out
    assert main([*args, "--categories", "4,6"]) == 2
    assert "error: --categories takes category names or LoCoMo's ids 1-5" in capsys.readouterr().out
    assert main([*args, "--embedder", "hash", "--categories", "5"]) == 0
    assert {e.meta.category for e in read_examples(out)} == {"adversarial"}
    assert main([*args, "--embedder", "hash", "--categories", "multi-hop"]) == 0
    assert {e.meta.category for e in read_examples(out)} == {"multi-hop"}


def test_a_longer_file_is_split_by_position_modulo_ten(tmp_path: Path) -> None:
    """LongMemEval S holds 119 conversations: every one of them lands in a split."""
    from tiermem.bench.datasets.conversation import Conversation
    from tiermem.bench.datasets.splits import split_items

    samples = [Conversation(f"c{i}", "A", "B", (), ()) for i in range(23)]
    found = {s: [i for i, _ in split_items(samples, s)] for s in ("train", "tune", "test")}
    assert found["tune"] == [7, 17]
    assert found["test"] == [8, 9, 18, 19]
    assert found["train"] == [*range(7), *range(10, 17), 20, 21, 22]


def test_the_cli_joins_the_selector_examples_of_several_files(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tiermem.cli import main

    alone, joined = tmp_path / "alone.jsonl", tmp_path / "joined.jsonl"
    base = ["train", "dataset", "-k", "2", "--embedder", "hash", "--negatives", "1"]
    assert main([*base, "--data", str(data), "--out", str(alone)]) == 0
    assert main([*base, "--data", str(data), "--data", str(data), "--out", str(joined)]) == 0
    assert joined.read_text() == alone.read_text() * 2  # each file by its own split, in order
    assert [p.name for p in tmp_path.glob("joined*")] == ["joined.jsonl"]  # no part left
    assert "the 2 files' examples joined" in capsys.readouterr().out
