"""The cross-encoder selector: trained for a few steps on the selector's own training set (the
ten-conversation fixture), then served through ``selector_mode = "cross-encoder"`` on the
model-free default and through ``tiermem bench selector``. The fast tests start from a tiny
random BERT with MiniLM's vocabulary; one real-model test starts from the installed MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from tiermem.cli import main as cli_main
from tiermem.config import EmbedderConfig, SLMConfig, TiermemConfig
from tiermem.errors import ConfigError
from tiermem.memory import Memory
from tiermem.roles.plan import Candidate
from tiermem.slm.roles.cross_encoder import (
    INPUT_VERSION,
    RECORD,
    CrossEncoderSelector,
    read_record,
    serving_precision,
)
from tiermem.slm.roles.pointwise import PointwiseSettings
from tiermem.training import TrainingInputError
from tiermem.training.cross_encoder import (
    CrossEncoderTrainConfig,
    installed_minilm,
    train_cross_encoder,
)
from tiermem.training.dataset import DatasetConfig, Example, read_examples, write_dataset
from tiermem.training.evaluate import SelectorEvalConfig
from tiermem.training.evaluate import run as evaluate
from tiermem.training.settings import CrossEncoderSettings
from tiermem.types import MemoryEntry, MemoryKind

from tests.conftest import T0
from tests.training.test_dataset import _conversation

HASH = EmbedderConfig(kind="hash")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixture file, its train and tune datasets, and a tiny BERT to start from."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root = tmp_path_factory.mktemp("cross-encoder")
    data = root / "ten.json"
    data.write_text(json.dumps([_conversation(i) for i in range(10)]))
    paths = {"data": data}
    for split in ("train", "tune"):
        config = DatasetConfig(data=data, split=split, k=2, embedder=HASH)
        write_dataset(config, root / f"{split}.jsonl")
        paths[split] = root / f"{split}.jsonl"
    tiny = root / "tiny-bert"
    tokenizer = BertTokenizerFast(vocab_file=str(installed_minilm() / "vocab.txt"))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(tiny)
    tokenizer.save_pretrained(tiny)
    paths["tiny"] = tiny
    return paths


def _candidate(text: str, rank: int) -> Candidate:
    entry = MemoryEntry(f"m{rank}", "ana", text, MemoryKind.TURN, T0, T0)
    return Candidate(entry, 1 / (rank + 1))


def _train(work: dict[str, Path], out: Path, **settings: object) -> Path:
    chosen = {"epochs": 8, "batch_size": 4, "learning_rate": 2e-3, "max_length": 64, **settings}
    config = CrossEncoderTrainConfig(
        datasets=(work["train"],),
        out=out,
        tune=(work["tune"],),
        base=work["tiny"],
        settings=CrossEncoderSettings(device="cpu", **chosen),  # type: ignore[arg-type]
    )
    result = train_cross_encoder(config)
    assert result.steps == len(result.losses) > 0
    return result.out


@pytest.fixture(scope="module")
def trained(work: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(work, tmp_path_factory.mktemp("model") / "ce")


def test_the_datasets_record_the_pair_the_cross_encoder_reads(work: dict[str, Path]) -> None:
    examples = read_examples(work["train"])
    assert examples
    assert all(e.pair is not None for e in examples)
    first = examples[0]
    assert first.pair is not None
    assert first.pair[1] in first.messages[-1].content  # the candidate the prompt shows
    assert first.pair[1].startswith("[3 June 2024]")  # rendered with its date


def test_training_lowers_the_loss_and_writes_a_calibrated_model(
    work: dict[str, Path], trained: Path
) -> None:
    record = json.loads((trained / RECORD).read_text())
    assert record["input_version"] == INPUT_VERSION
    assert record["loss_last_20"] < record["loss_first_20"]
    assert record["calibration"] is not None
    assert 0 < record["threshold"] < 1
    assert record["datasets"] == [str(work["train"])]
    assert read_record(trained).threshold == record["threshold"]


def test_it_serves_through_the_model_free_default(work: dict[str, Path], trained: Path) -> None:
    """No small model is configured, and the cross-encoder still selects: the hits carry its
    probability, and the kept candidates are those reaching its calibrated threshold."""
    slm = SLMConfig(selector_mode="cross-encoder", cross_encoder=trained)
    config = TiermemConfig(embedder=HASH, slm=slm)
    with Memory(config) as memory:
        selector = memory.components.selector
        assert isinstance(selector, CrossEncoderSelector)
        memory.add(
            [
                {"role": "user", "content": "I adopted a cat called Tofu."},
                {"role": "user", "content": "Our neighbour keeps bees on the roof."},
                {"role": "user", "content": "I play the oboe in an orchestra."},
            ],
            "ana",
        )
        hits = memory.search("What is the name of Ana's cat?", "ana", k=2)
    assert hits
    assert all("relevance" in h.explanation.components for h in hits)
    assert all(0.0 <= h.explanation.components["relevance"] <= 1.0 for h in hits)
    assert len(hits) <= 2


def test_a_model_cut_to_fewer_layers_trains_records_and_serves_them(
    work: dict[str, Path], tmp_path: Path
) -> None:
    """``layers`` keeps the base's first layers: the record and the saved config say how many,
    and the served model has that many (a CPU pays for each)."""
    out = _train(work, tmp_path / "one-layer", layers=1, epochs=2)
    assert json.loads((out / RECORD).read_text())["layers"] == 1
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 1
    selector = CrossEncoderSelector(PointwiseSettings(cross_encoder=out))
    served = selector._loaded().model  # the served transformer
    assert len(served.base_model.encoder.layer) == 1
    with pytest.raises(TrainingInputError, match="has 2 layers"):
        _train(work, tmp_path / "too-many", layers=3)
    with pytest.raises(TrainingInputError, match="at least 1"):
        CrossEncoderSettings(layers=0).check()


def test_it_runs_in_the_precision_asked_and_bfloat16_scores_close_to_float32(trained: Path) -> None:
    """``cross_encoder_precision``: float32 and bfloat16 are held as asked (``auto`` resolves
    by the CPU's flags); bfloat16 scores the pool close to float32.
    An unknown precision is a ``ConfigError`` before anything loads."""
    import torch

    pool = [
        _candidate(t, r)
        for r, t in enumerate(
            [
                "I adopted a cat called Tofu.",
                "Our neighbour keeps bees.",
                "I play the oboe.",
                "Tofu sleeps on the piano.",
            ]
        )
    ]
    scores = {}
    for precision in ("float32", "bfloat16"):
        settings = PointwiseSettings(cross_encoder=trained, cross_encoder_precision=precision)
        selector = CrossEncoderSelector(settings)
        assert selector.precision == precision
        dtype = next(selector._loaded().model.parameters()).dtype
        assert dtype == {"float32": torch.float32, "bfloat16": torch.bfloat16}[precision]
        scores[precision] = selector.probabilities("What is my cat called?", pool)
    pairs = zip(scores["float32"], scores["bfloat16"], strict=True)
    assert max(abs(a - b) for a, b in pairs) < 0.05
    auto = CrossEncoderSelector(PointwiseSettings(cross_encoder=trained))
    assert auto.precision == serving_precision("auto", "cpu")
    from threadpoolctl import threadpool_info

    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert all(pool["num_threads"] == 1 for pool in blas)  # none left to spin beside it
    with pytest.raises(ConfigError, match="unknown cross-encoder precision"):
        CrossEncoderSelector(
            PointwiseSettings(cross_encoder=trained, cross_encoder_precision="fp8")
        )
    with pytest.raises(ValueError, match="cross_encoder_precision"):
        SLMConfig(cross_encoder_precision="fp8")  # type: ignore[arg-type]


def test_a_missing_or_stale_model_is_a_clear_error(trained: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no cross-encoder model"):
        read_record(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match=RECORD):
        read_record(tmp_path)
    stale = tmp_path / "stale"
    stale.mkdir()
    record = json.loads((trained / RECORD).read_text())
    (stale / RECORD).write_text(json.dumps({**record, "input_version": "pair-v0"}))
    with pytest.raises(ConfigError, match="retrain"):
        Memory(
            TiermemConfig(
                embedder=HASH, slm=SLMConfig(selector_mode="cross-encoder", cross_encoder=stale)
            )
        )
    with pytest.raises(ValueError, match=r"needs slm\.cross_encoder"):
        SLMConfig(selector_mode="cross-encoder")


def test_bad_training_input_is_a_typed_error(work: dict[str, Path], tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"  # written before pairs were recorded
    lines = work["train"].read_text().splitlines()
    old.write_text("\n".join(json.dumps({**json.loads(x), "pair": None}) for x in lines) + "\n")
    with pytest.raises(TrainingInputError, match="rebuild it"):
        train_cross_encoder(CrossEncoderTrainConfig(datasets=(old,), base=work["tiny"]))
    cut = DatasetConfig(data=work["data"], split="tune", k=2, negatives=0, embedder=HASH)
    write_dataset(cut, tmp_path / "cut.jsonl")  # no negatives: part of each pool
    config = CrossEncoderTrainConfig(
        datasets=(work["train"],), tune=(tmp_path / "cut.jsonl",), base=work["tiny"]
    )
    with pytest.raises(TrainingInputError, match="part of a pool"):
        train_cross_encoder(config)
    assert Example.from_json(old.read_text().splitlines()[0]).pair is None


def test_bench_selector_runs_it_beside_rank_fusion_on_the_same_pools(
    work: dict[str, Path], trained: Path, tmp_path: Path
) -> None:
    config = SelectorEvalConfig(
        data=work["data"],
        out=tmp_path / "out",
        k=2,
        budgets=(40, 400),
        embedder=HASH,
        variants=("fusion", "cross-encoder"),
        cross_encoder=trained,
        cross_encoder_precision="bfloat16",
    )
    result = evaluate(config, Console(quiet=True))
    assert result["precision"] == {"cross-encoder": "bfloat16"}  # what it ran in, reported
    rows = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    variants = {r["variant"] for r in rows}
    assert variants == {"fusion", "cross-encoder", "cross-encoder@k"}
    pools = {}
    for r in rows:
        pools.setdefault((r["sample_id"], r["question_index"]), set()).add(r["pool"])
    assert all(len(p) == 1 for p in pools.values())  # one pool per question for every variant
    summary = result["summary"]["cross-encoder"]
    assert summary["latency_p95_s"] >= summary["latency_p50_s"] > 0
    assert summary["questions"] == 6  # test split: conversations 8 and 9, 3 questions each


def test_the_cli_trains_it_from_several_datasets(
    work: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli-ce"
    both = f"{work['train']},{work['tune']}"
    argv = ["train", "selector", "--arch", "cross-encoder", "--dataset", both]
    argv += ["--tune", str(work["tune"]), "--base", str(work["tiny"]), "--out", str(out)]
    argv += ["--epochs", "1", "--max-length", "64", "--device", "cpu"]
    assert cli_main(argv) == 0
    said = capsys.readouterr().out
    assert "threshold" in said
    assert str(out) in said.replace("\n", "")
    record = json.loads((out / RECORD).read_text())
    assert record["datasets"] == [str(work["train"]), str(work["tune"])]
    missing = ["train", "selector", "--arch", "cross-encoder", "--dataset", "nope.jsonl"]
    assert cli_main(missing) != 0
    assert "nope.jsonl does not exist" in capsys.readouterr().out
    bench = ["bench", "selector", "--data", str(work["data"]), "--out", str(tmp_path / "b")]
    bench += ["--variants", "fusion,cross-encoder", "--cross-encoder", str(out), "-k", "2"]
    assert cli_main([*bench, "--cross-encoder-precision", "bfloat16"]) == 0
    assert "cross-encoder ran in bfloat16" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # argparse names the choices
        cli_main([*bench, "--cross-encoder-precision", "fp8"])
    assert "choose from 'auto', 'float32', 'bfloat16'" in capsys.readouterr().err


@pytest.mark.real_model
def test_the_installed_minilm_trains_and_serves(work: dict[str, Path], tmp_path: Path) -> None:
    """From the embedder's own weights, with a fresh head: a few steps, then the selector."""
    config = CrossEncoderTrainConfig(
        datasets=(work["train"],),
        out=tmp_path / "minilm-ce",
        tune=(work["tune"],),
        settings=CrossEncoderSettings(batch_size=8, max_length=64, max_examples=32, device="cpu"),
    )
    result = train_cross_encoder(config)
    assert result.steps == 4
    assert json.loads((result.out / RECORD).read_text())["base"] == str(installed_minilm())
    slm = SLMConfig(selector_mode="cross-encoder", cross_encoder=result.out)
    with Memory(TiermemConfig(embedder=HASH, slm=slm)) as memory:
        memory.add([{"role": "user", "content": "I adopted a cat called Tofu."}], "ana")
        hits = memory.search("What is my cat called?", "ana", k=1)
    assert hits[0].entry.text.endswith("Tofu.")
    assert "relevance" in hits[0].explanation.components
