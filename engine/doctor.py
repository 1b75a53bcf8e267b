"""``tiermem doctor``: the first command to run on a new machine.

Each check runs in a child process, so a model that kills its process (SIGILL from a llama.cpp
build that uses an instruction this CPU or its kernel does not allow, SIGSEGV, out of memory)
fails that one line, names the signal, and the next check still runs. The checks: which
extras are installed and what each enables, the llama.cpp build against this CPU (with the
``llamacpp`` extra), the configured embedder (``--config``, else the embedded default: it
embeds one short text, then a batch, and reports its name, dimension and latency, or the
typed error: an unreachable server, a dimension the model does not make),
and every installed GGUF model: a chat model loads and generates a few tokens (prefill and
decode tokens/s are printed), an embedding model (``nomic-embed``) embeds as the embedder check
does.

>>> describe_exit(-4)
'killed by SIGILL (illegal instruction: the build uses a CPU feature this process may not use)'
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tiermem.extras import EXTRAS, extra_installed

if TYPE_CHECKING:
    from tiermem.embedding.base import Embedder

_HINTS = {
    signal.SIGILL: "illegal instruction: the build uses a CPU feature this process may not use",
    signal.SIGSEGV: "segmentation fault",
    signal.SIGBUS: "bus error: a truncated or unreadable model file",
    signal.SIGKILL: "killed: out of memory, or by the time limit",
    signal.SIGABRT: "aborted",
}


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the report."""

    name: str
    ok: bool
    detail: str


def describe_exit(returncode: int) -> str:
    """A child's exit status in words; a negative status is the signal that killed it."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        sig = signal.Signals(-returncode)
    except ValueError:
        return f"killed by signal {-returncode}"
    hint = _HINTS.get(sig)
    return f"killed by {sig.name}" + (f" ({hint})" if hint else "")


def run_probe(name: str, argv: Sequence[str], timeout_s: float) -> Check:
    """Run one probe process; it prints one JSON object ``{"ok": bool, "detail": str}`` last."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Check(name, False, f"no answer within {timeout_s:.0f} s")
    if done.returncode < 0:
        return Check(name, False, describe_exit(done.returncode))
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    try:
        answer = json.loads(lines[-1])
        return Check(name, bool(answer["ok"]) and done.returncode == 0, str(answer["detail"]))
    except (IndexError, KeyError, TypeError, json.JSONDecodeError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return Check(name, False, f"{describe_exit(done.returncode)}: {tail}")


def _probe_argv(kind: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "tiermem.doctor", "--probe", kind, *args]


def run_checks(
    models_dir: Path,
    timeout_s: float = 600,
    *,
    allow_amx: bool = False,
    config: Path | None = None,
) -> list[Check]:
    """Every check, each in its own process. ``allow_amx``: accept (and try) a build with
    llama.cpp's AMX kernels, as ``BackendConfig.allow_amx`` would. ``config``: the TOML file
    whose embedder is probed (read with the environment, as the CLI reads it)."""
    from tiermem.slm.models import MODELS, installed

    amx = ("--allow-amx",) if allow_amx else ()
    embedder = (str(config),) if config is not None else ()
    checks = extra_checks()
    llamacpp = extra_installed("llamacpp")
    checks.append(
        run_probe("llama.cpp build", _probe_argv("build", *amx), timeout_s)
        if llamacpp
        else Check("llama.cpp build", True, "skipped: the llamacpp extra is not installed")
    )
    checks.append(run_probe("embedder", _probe_argv("embedder", *embedder), timeout_s))
    if not llamacpp:
        return checks
    found = installed(models_dir)
    for alias, path in found.items():
        if path is None:
            continue
        dim = MODELS[alias].embedding_dim
        argv = (
            _probe_argv("model", str(path), *amx)
            if dim is None
            else _probe_argv("embedding-model", str(path), str(dim))
        )
        checks.append(run_probe(alias, argv, timeout_s))
    if not any(found.values()):
        checks.append(
            Check("models", True, "none installed (tiermem models install qwen0.5b); skipped")
        )
    return checks


def extra_checks() -> list[Check]:
    """One line per extra: installed or not, and what it enables. A missing extra is not a
    failure: the model-free default needs none."""
    checks = []
    for extra, (_, enables) in EXTRAS.items():
        state = (
            "installed"
            if extra_installed(extra)
            else f"not installed (pip install 'tiermem[{extra}]')"
        )
        checks.append(Check(f"extra {extra}", True, f"{state}: {enables}"))
    return checks


# -- probes: each runs in its own child process ---------------------------------------------
def _probe_build(allow_amx: bool) -> tuple[bool, str]:
    import llama_cpp
    from tiermem.slm.cpu import amx_instructions, check_installed_build, loaded_libraries

    build = check_installed_build(llama_cpp.llama_print_system_info().decode(), allow_amx=allow_amx)
    compiled, granted, unsafe = build.compiled, build.amx_granted, build.unsafe
    wanted = ("AVX2", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8")
    summary = " ".join(f for f in wanted if f in compiled) or "baseline x86-64"
    if unsafe:
        return False, f"built for {', '.join(unsafe)}, which this CPU cannot run; run make install"
    tiles = [hit for lib in loaded_libraries() for hit in amx_instructions(lib, 1)]
    if tiles and not (granted and allow_amx):
        return False, f"AMX instructions in the CPU library, AMX not allowed: {tiles[0]}"
    amx = "AMX granted" if granted else "AMX not granted"
    return True, f"llama-cpp-python {llama_cpp.__version__}: {summary}; {amx} to this process"


def _probe_embedder(config_file: str | None = None) -> tuple[bool, str]:
    """The configured embedder."""
    import os

    from tiermem.embedding import build_embedder
    from tiermem.settings import load_config

    config = load_config(Path(config_file) if config_file else None, os.environ)
    return _time_embedder(build_embedder(config.embedder))


def _probe_embedding_model(path: str, dim: str) -> tuple[bool, str]:
    """An installed GGUF embedding model, as ``embedder.kind = "llamacpp"`` would load it."""
    from tiermem.config import LlamaCppEmbedderConfig
    from tiermem.embedding import build_embedder

    config = LlamaCppEmbedderConfig.model_validate({"kind": "llamacpp", "model": path, "dim": dim})
    return _time_embedder(build_embedder(config))


def _time_embedder(embedder: Embedder) -> tuple[bool, str]:
    """The first call (a model loads, a server wakes its model), one short text, then a batch
    of 64."""
    from tiermem.embedding.base import EmbedMode

    started = time.perf_counter()
    embedder.embed(["warm up"], EmbedMode.DOCUMENT)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    vectors = embedder.embed(["Where does Ana live?"], EmbedMode.QUERY)
    one_ms = (time.perf_counter() - started) * 1000
    texts = [f"My sister Ana moved to Lisbon in {1990 + i}." for i in range(64)]
    started = time.perf_counter()
    embedder.embed(texts, EmbedMode.DOCUMENT)
    rate = len(texts) / (time.perf_counter() - started)
    return True, (
        f"{embedder.name}, {vectors.shape[1]}-d: first call {first_s:.1f} s, one text "
        f"{one_ms:.0f} ms, {rate:.0f} texts/s"
    )


def _probe_model(path: str, allow_amx: bool) -> tuple[bool, str]:
    from tiermem.slm.llamacpp import measure_speed

    speed = measure_speed(Path(path), prefill=128, decode=32, allow_amx=allow_amx)
    return True, (
        f"{Path(path).name}: load {speed.load_s:.1f} s, prefill {speed.prefill_tok_s:.0f} tok/s,"
        f" decode {speed.decode_tok_s:.1f} tok/s"
    )


def _probe(kind: str, args: Sequence[str], allow_amx: bool) -> int:
    try:
        if kind == "model":
            ok, detail = _probe_model(args[0], allow_amx)
        elif kind == "embedding-model":
            ok, detail = _probe_embedding_model(args[0], args[1])
        elif kind == "build":
            ok, detail = _probe_build(allow_amx)
        else:
            ok, detail = _probe_embedder(args[0] if args else None)
    except Exception as exc:  # noqa: BLE001 - a probe reports any failure as its one line
        ok, detail = False, f"{type(exc).__name__}: {exc}"[:500]
    print(json.dumps({"ok": ok, "detail": detail}))
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tiermem.doctor")
    parser.add_argument(
        "--probe", required=True, choices=("build", "embedder", "embedding-model", "model")
    )
    parser.add_argument("args", nargs="*")
    parser.add_argument("--allow-amx", action="store_true")
    args = parser.parse_args(argv)
    return _probe(args.probe, args.args, args.allow_amx)


if __name__ == "__main__":
    sys.exit(main())
