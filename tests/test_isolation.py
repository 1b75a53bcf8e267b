"""A real-model test that kills its process fails alone, with the signal named; the run goes
on to the next test."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_a_fatal_signal_fails_one_test_and_names_the_signal(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the plugin, for the session and its children
    pytester.makeini(
        "[pytest]\nmarkers =\n    real_model: loads a real model\naddopts = -p tests.isolation\n"
    )
    pytester.makepyfile(
        test_crash="""
        import os, signal
        import pytest

        @pytest.mark.real_model
        def test_dies_like_an_amx_build():
            os.kill(os.getpid(), signal.SIGILL)

        @pytest.mark.real_model
        def test_passes_in_its_child():
            assert os.environ["TIERMEM_ISOLATED_CHILD"] == "1"

        @pytest.mark.real_model
        def test_skips():
            pytest.skip("no model here")

        def test_runs_in_process():
            assert "TIERMEM_ISOLATED_CHILD" not in os.environ
        """
    )
    result = pytester.runpytest_subprocess("-rA", f"--rootdir={pytester.path}")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*killed by SIGILL*"])
