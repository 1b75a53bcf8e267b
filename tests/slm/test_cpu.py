"""The llama.cpp build choice: instruction sets from this CPU, AMX only when granted, a wheel
cache keyed by every flag, and a refusal (not a SIGILL) for a build this CPU cannot run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tiermem.slm import cpu

AVX2 = {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"}
AVX512 = AVX2 | {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw", "avx512_vnni"}
SAPPHIRE = AVX512 | {"avx512vbmi", "avx512_bf16", "amx_tile", "amx_int8"}


def test_a_cpu_with_amx_gets_no_amx_unless_the_kernel_grants_it() -> None:
    for granted, allow in ((False, False), (False, True), (True, False)):
        profile = cpu.profile_for(SAPPHIRE, amx_granted=granted, allow_amx=allow)
        assert profile.name == "avx512"
        assert "-DGGML_AMX_INT8=OFF" in profile.cmake_args
        assert "-DGGML_AMX_TILE=OFF" in profile.cmake_args
    amx = cpu.profile_for(SAPPHIRE, amx_granted=True, allow_amx=True)
    assert amx.name == "avx512-amx"
    assert "-DGGML_AMX_INT8=ON" in amx.cmake_args


def test_avx512_is_kept_with_the_extensions_the_cpu_has() -> None:
    profile = cpu.profile_for(AVX512, amx_granted=False)
    assert "-DGGML_AVX512=ON" in profile.cmake_args
    assert "-DGGML_AVX512_VNNI=ON" in profile.cmake_args
    assert "-DGGML_AVX512_VBMI=OFF" in profile.cmake_args  # this CPU has no VBMI
    assert "-DGGML_AVX512_BF16=OFF" in profile.cmake_args


def test_never_native_and_older_cpus_get_narrower_builds() -> None:
    for flags in (SAPPHIRE, AVX512, AVX2, {"sse4_2"}, set()):
        profile = cpu.profile_for(flags, amx_granted=True, allow_amx=True)
        assert "-DGGML_NATIVE=OFF" in profile.cmake_args
        assert not any("NATIVE=ON" in a for a in profile.cmake_args)
    assert cpu.profile_for(AVX2, amx_granted=False).name == "avx2"
    assert "-DGGML_AVX512=OFF" in cpu.profile_for(AVX2, amx_granted=False).cmake_args
    plain = cpu.profile_for({"sse4_2", "avx"}, amx_granted=False)  # AVX without AVX2
    assert plain.name == "x86-64"
    assert "-DGGML_AVX2=OFF" in plain.cmake_args


def test_the_cache_key_changes_with_any_flag_and_the_version() -> None:
    a = cpu.profile_for(AVX512, amx_granted=False)
    b = cpu.profile_for(AVX2, amx_granted=False)
    assert a.key("0.3.36") != b.key("0.3.36")
    assert a.key("0.3.36") != a.key("0.3.37")
    assert a.key("0.3.36") == cpu.profile_for(AVX512, amx_granted=False).key("0.3.36")


def test_a_wheel_left_in_the_old_version_only_cache_is_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tmp_path / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"
    stale.write_bytes(b"a natively built wheel")
    builds: list[dict[str, Any]] = []

    def fake_pip(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        builds.append({"argv": argv, "cmake": kwargs["env"]["CMAKE_ARGS"]})
        out = Path(argv[argv.index("-w") + 1])
        (out / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"built")
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(cpu.subprocess, "run", fake_pip)
    profile = cpu.profile_for(AVX2, amx_granted=False)
    wheel = cpu.ensure_wheel("0.3.36", tmp_path, profile)
    assert wheel != stale
    assert wheel.parent.name == profile.key("0.3.36")
    assert len(builds) == 1
    assert "--no-cache-dir" in builds[0]["argv"]  # pip's own cache is keyed by the sdist only
    assert builds[0]["cmake"] == " ".join(profile.cmake_args)
    assert (wheel.parent / "build.json").is_file()
    assert cpu.ensure_wheel("0.3.36", tmp_path, profile) == wheel  # built once, then cached
    assert len(builds) == 1
    other = cpu.ensure_wheel("0.3.36", tmp_path, cpu.profile_for(AVX512, amx_granted=False))
    assert other.parent != wheel.parent
    assert len(builds) == 2


def test_a_build_for_missing_instructions_is_named() -> None:
    compiled = cpu.compiled_features(
        "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | AMX_INT8 = 1 |"
    )
    allowed = cpu.unsafe_features(compiled, frozenset(SAPPHIRE), amx_granted=True, allow_amx=True)
    assert allowed == []
    refused = cpu.unsafe_features(compiled, frozenset(SAPPHIRE), amx_granted=False, allow_amx=True)
    assert refused == ["AMX_INT8 (not granted to this process by the kernel)"]
    # granted is not enough: AMX kernels crashed here in a process the kernel had granted AMX
    [granted_only] = cpu.unsafe_features(compiled, frozenset(SAPPHIRE), amx_granted=True)
    assert granted_only.startswith("AMX_INT8 (not allowed")
    assert cpu.unsafe_features(compiled, frozenset(AVX2), amx_granted=False) == [
        "AVX512",
        "AMX_INT8",
    ]


def test_amx_mnemonics_are_found_in_a_disassembly(tmp_path: Path) -> None:
    source = tmp_path / "tiles.c"
    source.write_text(
        "#include <immintrin.h>\nvoid f(void *p) { _tile_loadd(0, p, 64); _tile_release(); }\n"
        "void g(float *x) { x[0] += 1.0f; }\n"
    )
    with_tiles, plain = tmp_path / "libtiles.so", tmp_path / "libplain.so"
    base = ["gcc", "-O1", "-shared", "-fPIC", "-o"]
    subprocess.run([*base, str(with_tiles), str(source), "-mamx-tile"], check=True)
    source.write_text("void g(float *x) { x[0] += 1.0f; }\n")
    subprocess.run([*base, str(plain), str(source)], check=True)
    assert any("tileloadd" in hit for hit in cpu.amx_instructions(with_tiles))
    assert cpu.amx_instructions(plain) == []


def test_the_makefile_builds_through_the_keyed_cache() -> None:
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    assert "slm/cpu.py ensure-wheel" in makefile
    assert "--find-links" not in makefile  # a folder of wheels could hold a foreign one


def test_the_script_runs_before_tiermem_is_installed() -> None:
    script = Path(__file__).resolve().parents[2] / "slm" / "cpu.py"
    done = subprocess.run(
        [sys.executable, "-I", str(script), "profile"], capture_output=True, text=True, check=True
    )
    assert '"cmake_args"' in done.stdout


def test_loading_an_amx_build_is_refused_with_a_typed_error_unless_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import llama_cpp
    from tiermem.errors import SLMUnavailable
    from tiermem.slm import llamacpp

    info = b"CPU : AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | AMX_INT8 = 1 |"
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: info)
    monkeypatch.setattr(llamacpp, "_BUILD_CHECKED", set())
    monkeypatch.setattr(cpu, "cpu_flags", lambda: frozenset(SAPPHIRE))
    monkeypatch.setattr(cpu, "amx_granted", lambda: True)
    with pytest.raises(SLMUnavailable, match="AMX_INT8"):
        llamacpp.check_build()
    llamacpp.check_build(allow_amx=True)  # the user asked for it, and the kernel grants it
