"""The command line: the demo answers from memory and shows the source turns."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tiermem.cli import main


def test_demo_shows_answers_with_their_source_turns(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["demo", "--embedder", "hash", "--no-slm", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # 4 of Maya's turns are small talk ("Thanks!", echoes of her words): turns, not memories
    assert "maya: 4 sessions ingested, 16 new memories" in out
    assert "4 turns already known or skipped" in out
    assert "leo: 3 sessions ingested, 12 new memories" in out
    assert out.count("asks:") == 8
    assert "missing from the journal" not in out
    sources = re.findall(r"source (t_[0-9a-f]+) · (maya|leo)-s\d", out)
    assert len(sources) == 8 * 3
    # Leo's question about Lisbon is answered from Leo's memories only.
    leo_lisbon = out.split("leo asks: Where am I staying in Lisbon?")[1]
    assert "Casa Alfama" not in leo_lisbon
    assert "maya-s" not in leo_lisbon
    # A second run on the same directory writes nothing new: ingestion is idempotent.
    assert main(["demo", "--embedder", "hash", "--no-slm", "--data-dir", str(tmp_path)]) == 0
    again = capsys.readouterr().out
    assert "0 new memories, 0 merged, 0 superseded, 20 turns already known" in again


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
    from tiermem.config import BackendConfig

    assert BackendConfig(kind="llamacpp").model == "qwen0.5b"
    assert BackendConfig(kind="ollama").model == "llama3.2:1b-instruct-q4_K_M"
    assert BackendConfig(kind="ollama", model="qwen2.5:0.5b").model == "qwen2.5:0.5b"
    with pytest.raises(ValidationError, match="needs a model name"):
        BackendConfig(kind="openai", base_url="http://127.0.0.1:8000/v1")
    with pytest.raises(ValidationError, match="needs base_url"):
        BackendConfig(kind="openai", model="m")
