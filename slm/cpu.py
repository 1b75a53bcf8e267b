"""Which llama.cpp build this CPU gets, and whether the one installed is safe to load here.

llama.cpp's default build (``GGML_NATIVE``) compiles for the build machine's CPU. On a CPU that
advertises AMX but whose process never asked the kernel for the AMX tile state, the first
tile instruction dies with SIGILL, and so does the whole Python process. So tiermem never
builds natively: it picks the instruction sets from what this CPU has, builds AMX kernels only
when asked (``--allow-amx``) and the kernel grants AMX to the process (Linux
``arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)``), and keys the cached wheel by the exact build
flags, so a wheel built with other flags (or on another CPU) is rebuilt, never reused.

Standard library only: the Makefile runs this file before tiermem is installed::

    python slm/cpu.py ensure-wheel --version 0.3.36 --cache ~/.cache/tiermem/wheels

>>> p = profile_for({"avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vl",
...                  "avx512dq", "avx512cd", "amx_tile", "amx_int8"}, amx_granted=False)
>>> p.name, "-DGGML_AMX_INT8=ON" in p.cmake_args
('avx512', False)
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

# ggml's AVX-512 build compiles with -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw.
_AVX512 = frozenset({"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"})
_AVX2 = frozenset({"avx", "avx2", "fma", "f16c", "bmi2"})
_AMX = frozenset({"amx_tile", "amx_int8"})
# Tile instructions; none may sit in the CPU library a process loads unless it was granted AMX.
AMX_MNEMONICS = ("ldtilecfg", "sttilecfg", "tileloadd", "tilestored", "tilezero", "tdpb", "tdpf")
# Every build: no multimodal library (tiermem does not use it; it adds minutes to the build).
_COMMON = ("-DLLAVA_BUILD=OFF", "-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=OFF")


@dataclass(frozen=True, slots=True)
class BuildProfile:
    """A named set of instruction sets and the CMake arguments that build exactly those."""

    name: str
    features: tuple[str, ...]
    cmake_args: tuple[str, ...]

    def key(self, version: str) -> str:
        """The wheel cache key: the package version and every build flag."""
        text = json.dumps([version, self.name, self.cmake_args])
        return f"{version}-{self.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The instruction-set flags the kernel reports for the first CPU (empty off Linux)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.MULTILINE)
    return frozenset(match.group(1).split()) if match else frozenset()


def computes_bfloat16(flags: frozenset[str] | set[str] | None = None) -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX-512 BF16 or AMX). Elsewhere torch
    emulates it, and bfloat16 is slower than float32.

    >>> computes_bfloat16({"avx2", "fma"}), computes_bfloat16({"avx512f", "avx512_bf16"})
    (False, True)
    """
    return bool({"avx512_bf16", "amx_bf16"} & (cpu_flags() if flags is None else flags))


def amx_granted() -> bool:
    """Ask the kernel for the AMX tile-data state for this process; True if it is granted.

    The grant is per process and idempotent, and it is what a tile instruction needs: without
    it the first one raises SIGILL even on a CPU that has AMX."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    arch_prctl, req_xcomp_perm, xfeature_xtiledata = 158, 0x1023, 18
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.syscall(arch_prctl, req_xcomp_perm, xfeature_xtiledata)) == 0
    except (OSError, AttributeError):
        return False


def profile_for(
    flags: frozenset[str] | set[str], *, amx_granted: bool, allow_amx: bool = False
) -> BuildProfile:
    """The fastest build this CPU runs safely.

    AVX-512 (with VBMI, VNNI and BF16 where present) when the CPU has it, else AVX2, else a
    plain x86-64 build. AMX only when ``allow_amx`` and the kernel granted it. Measured on this
    project's machines (Sapphire Rapids under KVM), llama.cpp's AMX kernels died with SIGILL
    at their first ``tileloadd`` even after the kernel granted AMX, and the native build with
    SIGSEGV, so AMX stays off unless a user asks for it and ``tiermem doctor`` passes."""
    off = ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]
    if flags >= _AVX2:
        features = ["sse4_2", *sorted(_AVX2)]
        args = [
            "-DGGML_SSE42=ON",
            "-DGGML_AVX=ON",
            "-DGGML_AVX2=ON",
            "-DGGML_FMA=ON",
            "-DGGML_F16C=ON",
            "-DGGML_BMI2=ON",
        ]
        name = "avx2"
        if flags >= _AVX512:
            name = "avx512"
            features += sorted(_AVX512)
            args.append("-DGGML_AVX512=ON")
            for flag, option in (
                ("avx512vbmi", "GGML_AVX512_VBMI"),
                ("avx512_vnni", "GGML_AVX512_VNNI"),
                ("avx512_bf16", "GGML_AVX512_BF16"),
            ):
                on = flag in flags
                args.append(f"-D{option}={'ON' if on else 'OFF'}")
                if on:
                    features.append(flag)
            if allow_amx and amx_granted and flags >= _AMX and "avx512_vnni" in flags:
                name = "avx512-amx"
                features += sorted(_AMX)
                off = ["-DGGML_AMX_TILE=ON", "-DGGML_AMX_INT8=ON", "-DGGML_AMX_BF16=OFF"]
        else:
            args.append("-DGGML_AVX512=OFF")
    else:
        name, features = "x86-64", []
        args = [
            f"-DGGML_{o}=OFF" for o in ("SSE42", "AVX", "AVX2", "FMA", "F16C", "BMI2", "AVX512")
        ]
    return BuildProfile(name, tuple(features), (*_COMMON, *args, *off))


# llama_print_system_info() names -> /proc/cpuinfo flags (what a compiled feature needs).
_SYSTEM_INFO_FLAGS = {
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX_VNNI": "avx_vnni",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}


def compiled_features(system_info: str) -> frozenset[str]:
    """The instruction sets a llama.cpp build was compiled for, from its system-info line.

    >>> sorted(compiled_features("CPU : SSE3 = 1 | AVX = 1 | AVX512 = 1 | AMX_INT8 = 0 |"))
    ['AVX', 'AVX512', 'SSE3']
    """
    return frozenset(re.findall(r"\b([A-Z0-9_]+) = 1\b", system_info))


def unsafe_features(
    compiled: frozenset[str], flags: frozenset[str], *, amx_granted: bool, allow_amx: bool = False
) -> list[str]:
    """The compiled features this CPU lacks, and AMX unless it is both allowed and granted.
    Any of them means SIGILL (or worse) at the first matrix product.

    A grant is not enough: on this project's machines (Sapphire Rapids under KVM) llama.cpp's
    AMX kernels died at their first ``tileloadd`` in a process the kernel had granted AMX. So
    an AMX build loads only when the caller allows it (``BackendConfig.allow_amx``, after
    ``tiermem doctor --allow-amx`` passed on that machine).

    >>> unsafe_features(frozenset({"AVX2", "AVX512"}), frozenset({"avx2"}), amx_granted=False)
    ['AVX512']
    """
    missing = [
        name for name, flag in _SYSTEM_INFO_FLAGS.items() if name in compiled and flag not in flags
    ]
    if "AMX_INT8" in compiled and "AMX_INT8" not in missing:
        if not amx_granted:
            missing.append("AMX_INT8 (not granted to this process by the kernel)")
        elif not allow_amx:
            missing.append("AMX_INT8 (not allowed: its kernels crashed here even when granted)")
    return missing


@dataclass(frozen=True, slots=True)
class BuildCheck:
    """An installed llama.cpp build against this CPU and process."""

    compiled: frozenset[str]
    amx_granted: bool
    unsafe: tuple[str, ...]  # empty: safe to load here


def check_installed_build(system_info: str, *, allow_amx: bool = False) -> BuildCheck:
    """``system_info`` is ``llama_print_system_info()`` of the installed build. Asking for AMX
    here is also what lets an allowed AMX build use its tiles."""
    compiled = compiled_features(system_info)
    flags = cpu_flags()
    granted = amx_granted()
    unsafe = unsafe_features(compiled, flags, amx_granted=granted, allow_amx=allow_amx)
    return BuildCheck(compiled, granted, tuple(unsafe) if flags else ())


def loaded_libraries(
    pattern: str = "libggml-cpu", maps: Path = Path("/proc/self/maps")
) -> list[Path]:
    """The shared libraries whose file name starts with ``pattern`` mapped into this process."""
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return []
    found = {line.split(None, 5)[5] for line in lines if len(line.split(None, 5)) == 6}
    return sorted(Path(p) for p in found if Path(p).name.startswith(pattern))


def amx_instructions(library: Path, limit: int = 5) -> list[str]:
    """Up to ``limit`` AMX tile instructions in ``library``'s code, by disassembly (objdump)."""
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pattern = re.compile(r"\t(" + "|".join(AMX_MNEMONICS) + r")[a-z0-9]*\s")
    hits = [line.strip() for line in listing.splitlines() if pattern.search(line)]
    return hits[:limit]


def this_machine(*, allow_amx: bool = False) -> BuildProfile:
    return profile_for(cpu_flags(), amx_granted=amx_granted(), allow_amx=allow_amx)


def ensure_wheel(version: str, cache: Path, profile: BuildProfile) -> Path:
    """The cached llama-cpp-python wheel built with ``profile``; built from the sdist first if
    missing. pip's own wheel cache is bypassed: it is keyed by the sdist, not by the flags."""
    target = cache.expanduser() / profile.key(version)
    found = sorted(target.glob("llama_cpp_python-*.whl"))
    if found:
        return found[-1]
    target.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    env = {**os.environ, "CMAKE_ARGS": " ".join(profile.cmake_args), "FORCE_CMAKE": "1"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-cache-dir",
            "--no-binary",
            "llama-cpp-python",
            "--no-deps",
            "-w",
            str(target),
            f"llama-cpp-python=={version}",
        ],
        check=True,
        env=env,
        stdout=sys.stderr,  # stdout carries only the wheel's path, for the Makefile
    )
    info = {**asdict(profile), "version": version, "build_s": round(time.monotonic() - started)}
    (target / "build.json").write_text(json.dumps(info, indent=2) + "\n")
    return sorted(target.glob("llama_cpp_python-*.whl"))[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python slm/cpu.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("profile", help="print this machine's build profile as JSON")
    wheel = commands.add_parser("ensure-wheel", help="build (once) and print the wheel's path")
    wheel.add_argument("--version", required=True)
    wheel.add_argument("--cache", type=Path, required=True)
    for command in commands.choices.values():
        command.add_argument(
            "--allow-amx", action="store_true", help="build AMX kernels if the kernel grants AMX"
        )
    args = parser.parse_args(argv)
    profile = this_machine(allow_amx=args.allow_amx)
    if args.command == "profile":
        print(json.dumps({**asdict(profile), "amx_granted": amx_granted()}, indent=2))
    else:
        print(ensure_wheel(args.version, args.cache, profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
