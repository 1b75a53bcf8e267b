"""The command line: the demo answers from memory and shows the source turns."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tiermem.cli import main


def test_demo_shows_each_context_with_its_provenance_and_checks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["demo", "--embedder", "hash", "--data-dir", str(tmp_path)])
    out = capsys.readouterr().out
    # 4 of Maya's turns are small talk ("Thanks!", echoes of her words): turns, not memories.
    # New memories: one per other turn, and one per exchange of two such turns, or of a
    # question and the small talk that answers it ("Anything else to plan?" / "Thanks!"):
    # 16 + 12; and the sentences of the 3 turns with two or more of 4+ words: 6.
    assert "maya: 4 sessions ingested, 34 new memories, 4 turns already known" in out
    # 12 turns, 9 exchanges, the 2 sentences of one turn
    assert "leo: 3 sessions ingested, 23 new memories" in out
    questions = out.split(" asks: ")[1:]
    assert len(questions) == 8
    assert "missing from the journal" not in out
    for block in questions:
        assert "check ok" in block or "check FAIL" in block
        if "Memory holds nothing about that." not in block:
            # every delivered turn, with its session and time, the search's hits marked
            turns = re.findall(
                r"^    t_[0-9a-f]+ · (?:maya|leo)-s\d · .+ \d\d:\d\d · ", block, re.M
            )
            assert turns
            assert " · hit" in block
    # Leo never mentioned Lisbon: memory holds nothing on it, and Maya's is not his.
    leo_lisbon = out.split("leo asks: Where am I staying in Lisbon?")[1]
    assert "0 context tokens · check ok: refused" in leo_lisbon
    assert "Casa Alfama" not in leo_lisbon
    # the exit status is the checks' (the hash embedder has no sense of meaning: some fail)
    assert code == (1 if "check FAIL" in out else 0)
    assert "model calls: 0" in out
    # A second run on the same directory writes nothing new: ingestion is idempotent.
    main(["demo", "--embedder", "hash", "--data-dir", str(tmp_path)])
    again = capsys.readouterr().out
    assert "0 new memories, 20 turns already known" in again


def test_the_demo_checks_fail_a_stale_or_missing_newest_statement() -> None:
    from tiermem.bench.demo import check_answer, check_value
    from tiermem.bench.demo_data import DemoQuestion
    from tiermem.generator import NOTHING_IN_MEMORY

    flight = DemoQuestion("When is my flight?", "to 9 October", "on 10 October")
    assert check_answer(flight, "booked on 10 October. moved it to 9 October.").ok
    assert check_answer(flight, "moved it to 9 October.").ok  # the older one not delivered
    assert not check_answer(flight, "booked on 10 October.").ok  # the newest is missing
    stale_last = "booked on 10 October. moved it to 9 October. booked on 10 October."
    assert not check_answer(flight, stale_last).ok  # the stale value reads last
    assert not check_answer(flight, NOTHING_IN_MEMORY).ok
    lisbon = DemoQuestion("Where am I staying in Lisbon?", refused=True)
    assert check_answer(lisbon, NOTHING_IN_MEMORY).ok
    assert not check_answer(lisbon, "Casa Alfama, room 4").ok
    # a model's written answer is judged by the value it gives
    written = DemoQuestion("When?", value=("9 October",), stale="10 October")
    assert check_value(written, "On 9 October.").ok
    assert check_value(written, "It was 10 October; now 9 October.").ok
    assert not check_value(written, "10 October").ok
    assert not check_value(written, "9 October? No: 10 October.").ok  # stale, stated last
    assert check_value(lisbon, NOTHING_IN_MEMORY).ok


def test_config_reads_toml_and_environment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "tiermem.toml"
    toml.write_text(
        '[mtm]\nlocation = "url"\nurl = "http://localhost:6333"\n[stm]\nmax_tokens = 512\n'
    )
    monkeypatch.setenv("TIERMEM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TIERMEM_STM__MAX_TURNS", "9")
    assert main(["config", "--config", str(toml)]) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["mtm"]["location"] == "url"
    assert config["stm"] == {"max_tokens": 512, "max_turns": 9}
    assert config["data_dir"] == str(tmp_path / "data")


def test_bad_config_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text('[mtm]\nlocation = "url"\n')
    assert main(["config", "--config", str(toml)]) == 2
    assert "mtm.location='url' needs mtm.url" in capsys.readouterr().out


def test_backend_model_defaults_follow_the_backend_kind() -> None:
    from pydantic import ValidationError
    from tiermem.config import LlamaCppConfig, OllamaConfig, OpenAIConfig

    assert LlamaCppConfig().model == "qwen0.5b"
    assert OllamaConfig().model == "llama3.2:1b-instruct-q4_K_M"
    assert OllamaConfig(model="qwen2.5:0.5b").model == "qwen2.5:0.5b"
    with pytest.raises(ValidationError, match="model\n  Field required"):
        OpenAIConfig(base_url="http://127.0.0.1:8000/v1")
    with pytest.raises(ValidationError, match="base_url\n  Field required"):
        OpenAIConfig(model="m")


def _locomo_file(tmp_path: Path) -> Path:
    from tests.engine.test_bench_locomo import FIXTURE

    data = tmp_path / "fx.json"
    data.write_text(json.dumps(FIXTURE))
    return data


def test_bench_locomo_takes_sample_ids_and_budgets(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tiermem.bench import locomo, suite

    # suite is imported before the patch, or it would keep the spy as its RunConfig for good
    assert suite.RunConfig is locomo.RunConfig
    seen = {}
    real_config = locomo.RunConfig

    def spy(**kwargs: object) -> object:
        cfg = real_config(**kwargs)  # type: ignore[arg-type]
        cfg.embedder = cfg.embedder.model_copy(update={"kind": "hash"})
        seen["cfg"] = cfg
        return cfg

    monkeypatch.setattr(locomo, "RunConfig", spy)
    argv = ["bench", "locomo", "--data", str(_locomo_file(tmp_path)), "--out", str(tmp_path / "o")]
    code = main([*argv, "--conversations", "fx-1", "--budget", "30,600", "--systems", "bm25"])
    assert code == 0, capsys.readouterr().out
    assert seen["cfg"].budgets == (30, 600)  # type: ignore[attr-defined]
    assert seen["cfg"].roles == ("controller", "selector", "writer")  # type: ignore[attr-defined]
    records = (tmp_path / "o" / "records.jsonl").read_text().splitlines()
    assert len(records) == 2 * 5
    assert "Recall vs delivered tokens" in capsys.readouterr().out


def test_bench_locomo_embeds_with_the_configs_embedder_for_every_system(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    toml = tmp_path / "hash.toml"
    toml.write_text('[embedder]\nkind = "hash"\ndim = 48\n')
    cache = tmp_path / "cache"
    argv = ["bench", "locomo", "--data", str(_locomo_file(tmp_path)), "--out", str(tmp_path / "o")]
    argv += ["--systems", "tiermem,naive-rag", "--config", str(toml), "--embed-cache", str(cache)]
    assert main(argv) == 0, capsys.readouterr().out
    assert [p.name for p in cache.iterdir()] == ["hash-48-48.sqlite"]  # both systems' vectors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--conversations", "conv-30"], "no conversation 'conv-30' in the file; its ids: fx-1"),
        (["--conversations", "3"], "conversation index 3 is out of range"),
        (["--conversations", ","], "--conversations names nothing"),
        (["--budget", "300,abc"], "--budget takes positive token counts"),
        (["--budget", "0"], "--budget takes positive token counts"),
        (["--systems", "bm25,gpt"], "unknown system 'gpt'"),
        (["--max-questions", "0"], "max questions must be positive"),
        (["-k", "-2"], "k must be positive"),
        (["--roles", "controller,judge"], "--roles takes some of controller, selector, writer"),
    ],
)
def test_a_bad_bench_argument_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    argv = ["bench", "locomo", "--data", str(_locomo_file(tmp_path)), "--out", str(tmp_path / "o")]
    assert main([*argv, *args]) == 2
    out = capsys.readouterr().out
    assert message in out
    assert out.startswith("error: ")
    assert len(out.strip().splitlines()) == 1
    assert "Traceback" not in out


def test_a_data_file_that_is_missing_or_not_locomo_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list of samples"')
    for data, message in ((tmp_path / "none.json", "no data file at"), (bad, "is not a LoCoMo")):
        argv = ["bench", "locomo", "--data", str(data), "--out", str(tmp_path / "o")]
        assert main(argv) == 2
        out = capsys.readouterr().out
        assert message in out
        assert len(out.strip().splitlines()) == 1
