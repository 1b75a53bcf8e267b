"""``tiermem doctor`` runs each check in a child: a crash fails that line, names the signal,
and the report goes on; anything failed makes the exit status non-zero."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tiermem import doctor
from tiermem.cli import main
from tiermem.embedding.hashing import HashEmbedder

from tests.fakes.ollama_server import serving


def test_a_probe_killed_by_a_signal_is_named() -> None:
    crash = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"]
    check = doctor.run_probe("qwen0.5b", crash, timeout_s=60)
    assert not check.ok
    assert "SIGILL" in check.detail
    assert "illegal instruction" in check.detail


def test_a_probe_that_answers_or_hangs() -> None:
    fine = [sys.executable, "-c", 'print(\'{"ok": true, "detail": "12 tok/s"}\')']
    assert doctor.run_probe("m", fine, 60) == doctor.Check("m", True, "12 tok/s")
    bad = [sys.executable, "-c", "raise SystemExit('no such model')"]
    assert not doctor.run_probe("m", bad, 60).ok
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    assert "no answer within" in doctor.run_probe("m", slow, 1).detail


def test_a_failed_check_fails_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    installed = tmp_path / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"  # found, so probed
    installed.write_bytes(b"GGUF")
    monkeypatch.setattr(
        doctor,
        "run_probe",
        lambda name, argv, timeout_s: doctor.Check(name, name != "qwen0.5b", "x"),
    )
    assert main(["doctor", "--cache", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL qwen0.5b" in out
    assert "1 check(s) failed" in out


def test_the_embedder_probe_reports_the_configured_embedder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tiermem.toml"
    with serving(embedder=HashEmbedder(768)) as server:
        config.write_text(f'[embedder]\nkind = "ollama"\nhost = "{server.url}"\nretries = 0\n')
        ok, detail = doctor._probe_embedder(str(config))
        sent = [text for r in server.requests for text in r["input"]]
    assert ok
    assert detail.startswith("ollama:nomic-embed-text, 768-d: first call ")
    assert " ms, " in detail
    assert detail.endswith(" texts/s")
    assert "search_query: Where does Ana live?" in sent  # one short text, as a query
    assert doctor._probe("embedder", [str(config)], allow_amx=False) == 1  # the server is gone
    answer = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert answer["ok"] is False
    assert answer["detail"].startswith("EmbedderUnavailableError: ollama:nomic-embed-text at ")


@pytest.fixture
def probed(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Each probe's command line, by check name; every check answers ok."""
    seen: dict[str, list[str]] = {}

    def record(name: str, argv: list[str], timeout_s: float) -> doctor.Check:
        seen[name] = argv
        return doctor.Check(name, True, "x")

    monkeypatch.setattr(doctor, "run_probe", record)
    return seen


def test_doctor_probes_the_embedder_its_config_names(
    probed: dict[str, list[str]], tmp_path: Path
) -> None:
    config = tmp_path / "tiermem.toml"
    config.write_text('[embedder]\nkind = "hash"\n')
    assert main(["doctor", "--cache", str(tmp_path), "--config", str(config)]) == 0
    assert probed["embedder"][-3:] == ["--probe", "embedder", str(config)]


def test_an_installed_embedding_model_is_probed_as_an_embedder(
    probed: dict[str, list[str]], tmp_path: Path
) -> None:
    for name in ("nomic-embed-text-v1.5.f16.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"):
        (tmp_path / name).write_bytes(b"GGUF")
    assert main(["doctor", "--cache", str(tmp_path)]) == 0
    nomic = str(tmp_path / "nomic-embed-text-v1.5.f16.gguf")
    assert probed["nomic-embed"][-4:] == ["--probe", "embedding-model", nomic, "768"]
    assert probed["qwen0.5b"][-3:-1] == ["--probe", "model"]  # a chat model generates


def test_the_embedding_model_probe_reports_a_file_it_cannot_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "nomic-embed-text-v1.5.f16.gguf"
    broken.write_bytes(b"GGUF")
    assert doctor._probe("embedding-model", [str(broken), "768"], allow_amx=False) == 1
    answer = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert answer["ok"] is False
    assert answer["detail"].startswith("EmbedderError: ")


def test_the_extras_are_listed_with_how_to_install_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(doctor, "extra_installed", lambda extra: extra != "llamacpp")
    monkeypatch.setattr(
        doctor, "run_probe", lambda name, argv, timeout_s: doctor.Check(name, True, "x")
    )
    assert main(["doctor", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "extra llamacpp" in ln)
    assert "not installed (pip install 'tiermem[llamacpp]')" in line
    assert "llama.cpp build  skipped: the llamacpp extra is not installed" in out
    assert "extra service    installed" in out
