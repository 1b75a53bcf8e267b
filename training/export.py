"""The trained adapter as llama.cpp and Ollama serve it.

llama.cpp's own converters do the work: ``convert_lora_to_gguf.py`` (a peft adapter to a GGUF
LoRA) and ``convert_hf_to_gguf.py`` (a Hugging Face model to a GGUF), taken from the sdist of
the llama-cpp-python version tiermem is built with, so the GGUF they write is one that build
reads. The sdist is fetched once with pip (``make install`` does it) into
``~/.cache/tiermem/sdist``, and only the converters, their ``conversion`` package and
``gguf-py`` are unpacked.

>>> print(modelfile("llama3.2:1b-instruct-q4_K_M", Path("selector.gguf")), end="")
# The pointwise selector: a LoRA adapter on its base. FROM must be the base the adapter
# was trained on (same architecture and size), or Ollama refuses or misapplies it.
FROM llama3.2:1b-instruct-q4_K_M
ADAPTER selector.gguf
PARAMETER temperature 0
PARAMETER num_predict 1
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from tiermem.training import ConversionError

LLAMA_CPP_VERSION = "0.3.36"  # the Makefile's LLAMA_CPP_VERSION
DEFAULT_SDIST_CACHE = Path("~/.cache/tiermem/sdist")
OLLAMA_BASE = "llama3.2:1b-instruct-q4_K_M"  # the 4090 deployment's selector base
_WANTED = ("convert_hf_to_gguf.py", "convert_lora_to_gguf.py", "conversion/", "gguf-py/")


def converters(
    cache: Path = DEFAULT_SDIST_CACHE, version: str = LLAMA_CPP_VERSION, *, fetch: bool = True
) -> Path:
    """The llama.cpp folder holding the converters, unpacked from the sdist on first use
    (downloaded by pip when ``fetch`` and it is not in ``cache`` yet)."""
    cache = cache.expanduser()
    root = cache / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    if (root / "convert_lora_to_gguf.py").is_file() and (root / "gguf-py").is_dir():
        return root
    archive = cache / f"llama_cpp_python-{version}.tar.gz"
    if not archive.is_file():
        if not fetch:
            raise ConversionError("llama.cpp converters", f"{archive} is missing")
        cache.mkdir(parents=True, exist_ok=True)
        _run(
            "pip download",
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"llama-cpp-python=={version}", "-d", str(cache)],
        )  # fmt: skip
    prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
    with tarfile.open(archive) as tar:
        members = [
            m
            for m in tar.getmembers()
            if m.name.startswith(prefix) and m.name[len(prefix) :].startswith(_WANTED)
        ]
        if not members:
            raise ConversionError("llama.cpp converters", f"{archive} holds no converter")
        tar.extractall(cache, members=members, filter="data")
    return root


def lora_to_gguf(adapter: Path, base_hf: Path, out: Path, outtype: str = "f16") -> Path:
    """A peft adapter folder as a GGUF LoRA; ``base_hf`` is the Hugging Face folder it was
    trained on (its config is all the converter reads)."""
    script = converters() / "convert_lora_to_gguf.py"
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(
        "convert_lora_to_gguf.py",
        [sys.executable, str(script), "--base", str(base_hf), "--outfile", str(out),
         "--outtype", outtype, str(adapter)],
    )  # fmt: skip
    return out


def hf_to_gguf(model: Path, out: Path, outtype: str = "f32") -> Path:
    """A Hugging Face model folder as a GGUF model."""
    script = converters() / "convert_hf_to_gguf.py"
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(
        "convert_hf_to_gguf.py",
        [sys.executable, str(script), "--outfile", str(out), "--outtype", outtype, str(model)],
    )
    return out


def modelfile(base: str, adapter: Path | str) -> str:
    """An Ollama Modelfile serving the selector's ``adapter`` on ``base`` (an Ollama tag or a
    GGUF path), without sampling; the selector reads the next-token log-probabilities, so one
    token."""
    return (
        "# The pointwise selector: a LoRA adapter on its base. FROM must be the base the adapter\n"
        "# was trained on (same architecture and size), or Ollama refuses or misapplies it.\n"
        f"FROM {base}\n"
        f"ADAPTER {adapter}\n"
        "PARAMETER temperature 0\n"
        "PARAMETER num_predict 1\n"
    )


def _run(tool: str, command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ConversionError(tool, " / ".join(tail) or f"exit status {done.returncode}")


__all__ = [
    "DEFAULT_SDIST_CACHE",
    "LLAMA_CPP_VERSION",
    "OLLAMA_BASE",
    "converters",
    "hf_to_gguf",
    "lora_to_gguf",
    "modelfile",
]
