"""The LoCoMo-format loader on a small fixture made here (the real data is never copied)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from tiermem.bench.datasets.locomo import load_locomo, parse_session_date, session_messages
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
    assert (multi.answer, multi.evidence, multi.category) == ("2", ("D2:1", "D1:1"), 1)
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
