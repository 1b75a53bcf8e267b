"""The llama.cpp build this process loads is one this CPU may run: no AMX tile instruction in
the CPU library unless the kernel granted AMX to the process, and nothing compiled for an
instruction set the CPU lacks. ``tiermem doctor`` says so, one line a check."""

from __future__ import annotations

import pytest
from tiermem.cli import main
from tiermem.slm import cpu
from tiermem.slm.llamacpp import check_build, load_llama
from tiermem.slm.models import resolve_model

pytestmark = pytest.mark.real_model


def test_the_loaded_cpu_library_holds_no_amx_unless_granted() -> None:
    check_build()
    llama, _ = load_llama(resolve_model("smollm2"), 512, 1)  # maps the CPU backend
    libraries = cpu.loaded_libraries()
    assert libraries, "a libggml-cpu library is mapped into this process"
    import llama_cpp

    compiled = cpu.compiled_features(llama_cpp.llama_print_system_info().decode())
    granted = cpu.amx_granted()
    for library in libraries:  # what make install builds: AMX only on request (--allow-amx)
        tiles = cpu.amx_instructions(library)
        assert tiles == [], f"{library} holds AMX tile instructions (granted: {granted}): {tiles}"
    assert "AMX_INT8" not in compiled
    assert cpu.unsafe_features(compiled, cpu.cpu_flags(), amx_granted=granted) == []
    assert llama.tokenize(b"hello")


def test_doctor_reports_every_check_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--timeout", "300"]) == 0
    out = capsys.readouterr().out
    for name in ("llama.cpp build", "embedder", "smollm2"):
        line = next(ln for ln in out.splitlines() if name in ln)
        assert line.startswith("ok"), line
    assert "decode" in out
    assert "tok/s" in out
