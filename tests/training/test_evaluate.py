"""``tiermem bench selector`` on the ten-conversation fixture: every variant sees the same
questions and pools, and a model that knows the answers beats rank fusion on precision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from tiermem.config import EmbedderConfig
from tiermem.errors import InvalidInputError
from tiermem.slm.base import ScoreRequest
from tiermem.training.evaluate import SelectorEvalConfig, run

from tests.fakes.scripted import ScriptedModels
from tests.training.test_dataset import _conversation

ANSWERS = {"cat": "adopted a cat", "bees": "keeps bees", "instrument": "oboe"}


def _oracle(request: ScoreRequest) -> dict[str, float]:
    """Says yes to a memory holding the answer to the fixture's question, no to the rest."""
    question, memory = request.messages[-1].content.split("Memory:")
    relevant = any(q in question and a in memory for q, a in ANSWERS.items())
    return {"yes": 0.95, "no": 0.05} if relevant else {"yes": 0.02, "no": 0.98}


def _config(tmp_path: Path, **overrides: object) -> SelectorEvalConfig:
    data = tmp_path / "ten.json"
    data.write_text(json.dumps([_conversation(i) for i in range(10)]))
    settings: dict[str, object] = {
        "data": data,
        "out": tmp_path / "out",
        "model": "judge",
        "backend_kind": "scripted",
        "k": 2,
        "budgets": (40, 400),
        "embedder": EmbedderConfig(kind="hash"),
        "variants": ("fusion", "listwise", "pointwise"),
        **overrides,
    }
    return SelectorEvalConfig(**settings)  # type: ignore[arg-type]


def test_every_variant_answers_the_same_questions_of_the_test_split(
    tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    scripted_models.serve("judge", {"supporting": [1]})
    scripted_models["judge"].score_with(_oracle)
    result = run(_config(tmp_path, weight=1.0), Console(quiet=True))
    rows = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    # Conversations 8 and 9 only, 3 questions each, every variant on each.
    assert {r["sample_id"] for r in rows} == {"fx-8", "fx-9"}
    assert len(rows) == 2 * 3 * 3
    per_question = {}
    for r in rows:
        per_question.setdefault((r["sample_id"], r["question_index"]), []).append(r)
    assert all(
        [r["variant"] for r in rs] == ["fusion", "listwise", "pointwise"]
        and len({r["pool"] for r in rs}) == 1
        for rs in per_question.values()
    )
    summary = result["summary"]
    assert set(summary) == {"fusion", "listwise", "pointwise"}
    for s in summary.values():
        assert 0 < s["tokens_at_40"] <= 40
        assert s["tokens_at_40"] <= s["tokens_at_400"] <= 400
        assert s["mean_kept"] <= 2
    assert summary["fusion"]["prompt_tokens"] == 0  # no model
    assert summary["pointwise"]["prompt_tokens"] > 0
    # The scripted listwise model keeps candidate 1 only: fewer kept than fusion's k.
    assert summary["listwise"]["mean_kept"] == 1
    # The oracle's yes outweighs any rank: pointwise keeps only evidence.
    assert summary["pointwise"]["precision"] == 1.0
    assert (tmp_path / "out" / "summary.json").exists()


def test_a_calibrated_threshold_keeps_fewer(
    tmp_path: Path, scripted_models: ScriptedModels
) -> None:
    scripted_models["judge"].score_with(_oracle)
    cfg = _config(
        tmp_path, variants=("fusion", "pointwise"), weight=1.0, calibrate_questions=3, k=4
    )
    result = run(cfg, Console(quiet=True))
    assert 0.0 < result["thresholds"]["pointwise"] < 1.0
    # The threshold falls between the oracle's yes and no: only the evidence is kept, not k.
    s = result["summary"]["pointwise"]
    assert s["mean_kept"] < 4
    assert (s["precision"], s["recall"]) == (1.0, 1.0)
    assert result["summary"]["fusion"]["precision"] < 1.0  # k = 4 kept, evidence or not
    # The same scores cut at k: equal K beside fusion's, for no more model calls than a run
    # without calibration (which has no @k rows) makes per question.
    fixed = result["summary"]["pointwise@k"]
    assert fixed["mean_kept"] == result["summary"]["fusion"]["mean_kept"] == 4
    (tmp_path / "plain").mkdir()
    plain = run(
        _config(tmp_path / "plain", variants=("pointwise",), weight=1.0, k=4), Console(quiet=True)
    )
    assert set(plain["summary"]) == {"pointwise"}
    assert (
        fixed["prompt_tokens"]
        == s["prompt_tokens"]
        == plain["summary"]["pointwise"]["prompt_tokens"]
    )
    assert s["prompt_tokens"] > 0
    assert fixed["recall"] == 1.0
    assert fixed["precision"] < 1.0


def test_the_bursty_variant_sends_every_sentence_as_a_message(tmp_path: Path) -> None:
    """``bursty``: the pools hold sentences, and a question's evidence is every part of its
    gold turn, on the same split as the file."""
    conversations = [_conversation(i) for i in range(10)]
    for c in conversations:  # the cat's turn in two sentences, both about the cat
        session: list[dict[str, str]] = c["conversation"]["session_1"]  # type: ignore[index]
        session[0]["text"] += " The cat sleeps all day."
    data = tmp_path / "two-sentences.json"
    data.write_text(json.dumps(conversations))
    relevant, recall = {}, {}
    for bursty in (False, True):
        out = tmp_path / f"bursty-{bursty}"
        cfg = _config(tmp_path, data=data, out=out, variants=("fusion",), bursty=bursty, k=4)
        run(cfg, Console(quiet=True))
        rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
        assert {r["sample_id"] for r in rows} == {"fx-8", "fx-9"}
        cat = [r for r in rows if r["question_index"] == 0]
        relevant[bursty] = {r["relevant_in_pool"] for r in cat}
        recall[bursty] = {r["recall_at"]["400"] for r in cat}
    assert relevant[False] != relevant[True]  # other memories: one per sentence
    assert recall == {False: {1.0}, True: {1.0}}  # evidence D1:1 is D1:1.1 and D1:1.2 there


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"variants": ("fusion", "oracle")}, "unknown variant 'oracle'"),
        ({"split": "holdout"}, "unknown split 'holdout'"),
        ({"questions": -1}, "questions must be positive"),
        ({"adapter": Path("/nonexistent.gguf"), "variants": ("pointwise-lora",)}, "is not a file"),
    ],
)
def test_bad_arguments_are_typed_errors(
    tmp_path: Path, overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):  # a split's: BenchInputError
        run(_config(tmp_path, **overrides), Console(quiet=True))


def test_the_cli_reports_a_bad_argument_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tiermem.cli import main

    data = _config(tmp_path).data
    argv = ["bench", "selector", "--data", str(data), "--out", str(tmp_path / "o")]
    assert main([*argv, "--variants", "fusion,oracle"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("error: ")
    assert "unknown variant 'oracle'" in out
    assert len(out.strip().splitlines()) == 1
    assert main([*argv, "-k", "0"]) == 2
    assert "-k must be positive" in capsys.readouterr().out
