"""Model provisioning: GGUF header parsing, assembly from parts, hash checks, clear errors."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from tiermem.errors import ConfigError, ModelNotInstalledError
from tiermem.slm import models


def _gguf(architecture: str, name: str) -> bytes:
    def string(value: str) -> bytes:
        raw = value.encode()
        return struct.pack("<Q", len(raw)) + raw

    kvs = [
        string("general.architecture") + struct.pack("<I", 8) + string(architecture),
        string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2) + string("a") + string("b"),
        string("some.count") + struct.pack("<IQ", 10, 7),
        string("general.name") + struct.pack("<I", 8) + string(name),
    ]
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs) + b"\0" * 64


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, bytes]:
    blob = _gguf("qwen2", "Tiny Test Model")
    parts = [tmp_path / "part01.bin", tmp_path / "part02.bin"]
    parts[0].write_bytes(blob[:40])
    parts[1].write_bytes(blob[40:])
    spec = models.ModelSpec(
        "tiny",
        "test",
        ("tiny-part1", "tiny-part2"),
        "tiny.gguf",
        models.hashlib.sha256(blob).hexdigest(),
        "qwen2",
        lambda: parts,
    )
    monkeypatch.setitem(models.MODELS, "tiny", spec)
    return tmp_path / "cache", blob


def test_gguf_metadata_reads_header_and_skips_arrays(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(_gguf("llama", "Smol"))
    meta = models.gguf_metadata(path)
    assert meta == {"gguf.version": 3, "general.architecture": "llama", "general.name": "Smol"}


def test_install_assembles_parts_verifies_and_is_idempotent(fake_model: tuple[Path, bytes]) -> None:
    cache, blob = fake_model
    path = models.install("tiny", cache, pip_install=False)
    assert path.read_bytes() == blob
    assert models.resolve_model("tiny", cache) == path
    assert models.install("tiny", cache, pip_install=False) == path
    assert models.installed(cache)["tiny"] == path


def test_a_corrupt_part_is_refused_and_leaves_nothing(fake_model: tuple[Path, bytes]) -> None:
    cache, _ = fake_model
    part = models.MODELS["tiny"].locate_parts()[1]
    part.write_bytes(part.read_bytes()[:-1] + b"x")
    with pytest.raises(ConfigError, match="sha256"):
        models.install("tiny", cache, pip_install=False)
    assert list(cache.iterdir()) == []


def test_wrong_architecture_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(_gguf("llama", "x"))
    spec = models.ModelSpec("m", "", (), "m.gguf", "", "qwen2", lambda: [path])
    with pytest.raises(ConfigError, match="architecture 'llama'"):
        models.verify(spec, path)
    (tmp_path / "not.gguf").write_bytes(b"nope")
    with pytest.raises(ConfigError, match="not a GGUF"):
        models.gguf_metadata(tmp_path / "not.gguf")


def test_resolving_an_uninstalled_or_unknown_model_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ModelNotInstalledError, match=r"tiermem models install qwen1\.5b"):
        models.resolve_model("qwen1.5b", tmp_path)
    with pytest.raises(ConfigError, match="neither a known alias"):
        models.resolve_model("gpt-17", tmp_path)
    with pytest.raises(ConfigError, match="unknown model"):
        models.install("gpt-17", tmp_path)
