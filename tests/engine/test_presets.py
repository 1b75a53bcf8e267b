"""The defaults follow the measurements: ``from_defaults`` is model-free, ``model=`` turns on
only the roles measured to win on it, ``roles=`` names others and a losing one warns once."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from tiermem import Memory, TiermemConfig
from tiermem.config import LlamaCppConfig, NoModelConfig
from tiermem.errors import ConfigError
from tiermem.presets import (
    ROLES,
    VERDICTS,
    MeasuredToLoseWarning,
    defaults_config,
    measured_winners,
    running_roles,
    verdict,
)


def test_the_default_is_model_free_with_fusion(tmp_path: Path) -> None:
    config = defaults_config(tmp_path)
    assert config.slm.backend == NoModelConfig()
    assert config.slm.selector_mode == "fusion"
    assert config.generator.kind == "extractive"
    assert running_roles(config) == ()
    assert TiermemConfig().slm.selector_mode == "fusion"  # the service's and MCP's default too


def test_a_model_turns_on_only_the_roles_measured_to_win_on_it(tmp_path: Path) -> None:
    assert measured_winners("qwen0.5b") == ()  # every role on it was measured to lose
    config = defaults_config(tmp_path, model="qwen0.5b")
    assert config.slm.backend == LlamaCppConfig(model="qwen0.5b")
    assert running_roles(config) == ()
    assert config.generator.kind == "extractive"


def test_named_roles_run_and_the_others_stay_model_free(tmp_path: Path) -> None:
    config = defaults_config(tmp_path, model="qwen0.5b", roles=("selector",))
    assert running_roles(config) == (("selector", "qwen0.5b"),)
    assert config.slm.selector_mode == "pointwise"  # fusion calls no model
    alone = defaults_config(tmp_path, model="qwen0.5b", roles="selector")  # one name: one role
    assert running_roles(alone) == (("selector", "qwen0.5b"),)
    every = defaults_config(tmp_path, model="qwen0.5b", roles=ROLES)
    assert [role for role, _ in running_roles(every)] == list(ROLES)
    assert every.generator.kind == "model"


def test_a_gguf_path_is_judged_by_the_model_it_holds() -> None:
    path = "/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    found = verdict("writer", path)
    assert found is not None
    assert found.model == "qwen0.5b"
    assert verdict("writer", "/models/llama-3.2-1b.gguf") is None  # never measured


def test_bad_roles_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown role"):
        defaults_config(tmp_path, model="qwen0.5b", roles=("planner",))
    with pytest.raises(ConfigError, match="need a model"):
        defaults_config(tmp_path, roles=("selector",))


def _build(config: TiermemConfig) -> list[warnings.WarningMessage]:
    """Build ``config``'s roles in memory (the test stores, no files) and return the
    ``MeasuredToLoseWarning``s it raised."""
    tests = TiermemConfig.for_tests()
    config = config.model_copy(
        update={"embedder": tests.embedder, "mtm": tests.mtm, "journal": tests.journal}
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Memory(config).close()  # models load lazily: nothing is read from the GGUF here
    return [w for w in caught if issubclass(w.category, MeasuredToLoseWarning)]


def test_a_role_measured_to_lose_warns_once_naming_the_measurement(tmp_path: Path) -> None:
    gguf = tmp_path / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"  # qwen0.5b's file, never loaded
    gguf.write_bytes(b"GGUF")
    model = str(gguf)
    caught = _build(defaults_config(tmp_path, model=model, roles=("writer", "generator")))
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "writer on qwen0.5b" in message
    assert "53.8 %" in message  # the measurement, with its number
    assert "generator on qwen0.5b" in message
    assert "tiermem bench" in message  # and how to reproduce it
    assert caught[0].filename == __file__  # it points at the caller's line, not tiermem's
    assert _build(defaults_config(tmp_path, model=model)) == []  # nothing asked, no noise
    assert _build(defaults_config(tmp_path)) == []


def test_every_verdict_names_a_known_role_and_a_command() -> None:
    for v in VERDICTS:
        assert v.role in ROLES
        assert v.command.startswith("tiermem ")
        assert any(ch.isdigit() for ch in v.measurement)
