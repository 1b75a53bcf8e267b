"""The LoCoMo-format loader on small fixtures made here (the real data is never copied): LoCoMo's
quirks, LongMemEval's empty messages and question types, the fixed split."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tiermem.bench import BenchInputError
from tiermem.bench.datasets import load_dataset
from tiermem.bench.datasets.conversation import session_messages
from tiermem.bench.datasets.locomo import load_locomo, parse_session_date
from tiermem.bench.datasets.splits import fold_of, in_split
from tiermem.bench.metrics import evidence_recall

FIXTURE = [
    {
        "sample_id": "fx-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "9:05 am on 3 June, 2024",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat called Tofu."},
                {
                    "speaker": "Ben",
                    "dia_id": "D1:2",
                    "text": "Look!",
                    "img_url": ["x"],
                    "blip_caption": "a photo of a bicycle",
                },
            ],
            "session_2_date_time": "6:40 pm on 20 June, 2024",
            "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "Tofu is two now."}],
            "session_3_date_time": "1:00 pm on 1 July, 2024",
        },
        "qa": [
            {
                "question": "What is Ana's cat called?",
                "answer": "Tofu",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "How old is Tofu?",
                "answer": 2,
                "evidence": ["D2:1; D1:1"],
                "category": 1,
            },
            {
                "question": "What is Ben's cat called?",
                "adversarial_answer": "Tofu",
                "evidence": ["D1:1"],
                "category": 5,
            },
        ],
    }
]


def test_loader_reads_sessions_questions_and_counts_quirks(tmp_path: Path) -> None:
    path = tmp_path / "fx.json"
    path.write_text(json.dumps(FIXTURE))
    (sample,), quirks = load_locomo(path)
    assert sample.sample_id == "fx-1"
    assert [s.index for s in sample.sessions] == [1, 2]
    assert sample.sessions[0].date == datetime(2024, 6, 3, 9, 5, tzinfo=UTC)
    assert sample.sessions[0].turns[1].text == "Look! [shares a photo: a photo of a bicycle]"
    multi = sample.questions[1]
    assert (multi.answer, multi.evidence, multi.category) == ("2", ("D2:1", "D1:1"), "multi-hop")
    assert [q.category for q in sample.questions] == ["single-hop", "multi-hop", "adversarial"]
    assert [q.group for q in sample.questions] == ["single-hop", "multi-hop", "adversarial"]
    assert [q.headline for q in sample.questions] == [True, True, False]
    assert sample.questions[2].answer == "Tofu"
    assert dict(quirks.counts) == {
        "session dates without a session": 1,
        "image turns (caption appended)": 1,
        "malformed evidence strings": 1,
        "non-string answers": 1,
        "questions without 'answer' (adversarial)": 1,
    }


def test_session_messages_keep_speakers_ids_and_dates(tmp_path: Path) -> None:
    path = tmp_path / "fx.json"
    path.write_text(json.dumps(FIXTURE))
    (sample,), _ = load_locomo(path)
    messages = session_messages(sample.sessions[0], datetime(2000, 1, 1, tzinfo=UTC))
    assert [(m["speaker"], m["turn_id"]) for m in messages] == [("Ana", "D1:1"), ("Ben", "D1:2")]
    assert messages[1]["timestamp"] == datetime(2024, 6, 3, 9, 6, tzinfo=UTC)


def test_dates_and_recall() -> None:
    assert parse_session_date("12:09 am on 13 August, 2023") == datetime(
        2023, 8, 13, 0, 9, tzinfo=UTC
    )
    assert evidence_recall(("D1:1", "D1:2", "D2:1"), {"D1:1", "D2:1", "D9:9"}) == 2 / 3
    assert evidence_recall((), {"D1:1"}) == 0.0


LONGMEMEVAL_LIKE = [
    {
        "sample_id": "lme-1",
        "conversation": {
            "speaker_a": "User",
            "speaker_b": "Assistant",
            "session_1_date_time": "8:38 pm on 16 July, 2023",
            "session_1": [
                {"speaker": "User", "dia_id": "D1:1", "text": "I take yoga twice a week."},
                {"speaker": "Assistant", "dia_id": "D1:2", "text": ""},
                {"speaker": "User", "dia_id": "D1:3", "text": " \u200b\u200b "},
                {"speaker": "Assistant", "dia_id": "D1:4", "text": "x" * 40_000},
            ],
            "session_2_date_time": "9:00 am on 20 July, 2023",
            "session_2": [{"speaker": "User", "dia_id": "D2:1", "text": "\u200b"}],
            "session_3_date_time": "9:00 am on 1 August, 2023",
            "session_3": [{"speaker": "User", "dia_id": "D3:1", "text": "Now three times."}],
        },
        "qa": [
            {
                "question": "How often do I take yoga?",
                "answer": "Three times a week.",
                "evidence": ["D1:1", "D3:1", "D1:3"],
                "category": 4,
                "question_type": "knowledge-update",
            },
            {
                "question": "When did I start yoga?",
                "answer": "July",
                "evidence": ["D1:1"],
                "category": 2,
                "question_type": "temporal-reasoning",
            },
        ],
    }
]


def test_empty_and_zero_width_messages_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(LONGMEMEVAL_LIKE))
    (sample,), quirks = load_dataset(path)
    turns = [t.turn_id for s in sample.sessions for t in s.turns]
    assert turns == ["D1:1", "D1:4", "D3:1"]  # session 2 held only an invisible message
    assert [s.index for s in sample.sessions] == [1, 3]
    assert len(sample.sessions[0].turns[1].text) == 40_000  # kept whole
    assert sample.questions[0].evidence == ("D1:1", "D3:1")
    assert dict(quirks.counts) == {
        "empty messages (skipped)": 3,
        "empty sessions": 1,
        "evidence on empty messages (dropped)": 1,
    }


def test_a_message_over_adds_limit_is_cut_to_it_and_counted(tmp_path: Path) -> None:
    """A pasted document past what ``add()`` takes (a BEAM chat has one of 348,469
    characters) would stop the run: every system reads it cut to the limit, and it is a quirk."""
    from tiermem.validation import MAX_CONTENT_CHARS

    raw = json.loads(json.dumps(LONGMEMEVAL_LIKE))
    raw[0]["conversation"]["session_1"][0]["text"] = "x" * (MAX_CONTENT_CHARS + 10)
    path = tmp_path / "long.json"
    path.write_text(json.dumps(raw))
    (sample,), quirks = load_dataset(path)
    assert len(sample.sessions[0].turns[0].text) == MAX_CONTENT_CHARS
    assert quirks.counts["messages over add()'s limit (cut to it)"] == 1


def test_question_types_are_kept_and_are_the_group(tmp_path: Path) -> None:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(LONGMEMEVAL_LIKE))
    (sample,), _ = load_dataset(path)
    first, second = sample.questions
    assert (first.category, first.question_type, first.group) == (
        "single-hop",
        "knowledge-update",
        "knowledge-update",
    )
    assert (second.category, second.group) == ("temporal", "temporal-reasoning")


def test_a_file_that_is_not_locomo_format_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"sample_id": "x"}]))
    with pytest.raises(BenchInputError, match="not a LoCoMo-format JSON file"):
        load_dataset(path)
    with pytest.raises(BenchInputError, match="no data file"):
        load_dataset(tmp_path / "missing.json")


def test_one_split_rule_for_every_file_and_every_command() -> None:
    locomo = [fold_of(i) for i in range(10)]
    assert locomo == ["train"] * 7 + ["tune"] + ["test"] * 2
    # bench locomo's names are the same folds: choose is train, report is tune and test
    assert [in_split(i, "choose") for i in range(10)] == [f == "train" for f in locomo]
    assert [in_split(i, "report") for i in range(10)] == [f != "train" for f in locomo]
    longmemeval = [fold_of(i) for i in range(119)]
    counts = {f: longmemeval.count(f) for f in ("train", "tune", "test")}
    assert counts == {"train": 84, "tune": 12, "test": 23}  # 110-116 train, 117 tune, 118 test
    assert longmemeval[10:20] == locomo  # interleaved, not a prefix
    assert all(in_split(i, "all") for i in range(119))
    with pytest.raises(BenchInputError, match="unknown split 'holdout'"):
        in_split(0, "holdout")


def test_every_system_dates_an_undated_session_a_day_after_the_one_before() -> None:
    """One ingestion rule: tiermem's add() calls and the baselines' turns carry the same dates."""
    from datetime import timedelta

    from tiermem.bench.datasets.conversation import (
        EPOCH,
        Conversation,
        DialogueTurn,
        Session,
        conversation_adds,
    )
    from tiermem.bench.systems import _turns

    def conversation(first: datetime | None) -> Conversation:
        sessions = tuple(
            Session(i, first if i == 1 else None, (DialogueTurn(f"D{i}:1", "Ana", f"t{i}"),))
            for i in (1, 2, 3)
        )
        return Conversation("c", "Ana", "Ben", sessions, ())

    day, dated = timedelta(days=1), datetime(2024, 5, 1, 9, tzinfo=UTC)
    for first, start in ((dated, dated), (None, EPOCH)):  # none dated: from 1970-01-01
        conv = conversation(first)
        adds = conversation_adds(conv)
        assert [session_id for session_id, _ in adds] == ["s1", "s2", "s3"]
        assert [m[0]["timestamp"] for _, m in adds] == [start, start + day, start + 2 * day]
        assert [t.at for t in _turns(conv).ordered] == [start, start + day, start + 2 * day]
