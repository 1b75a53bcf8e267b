"""SLM backends live in a registry, as embedders do: production registers llamacpp, ollama and
openai; a test registers its fake the same way and the real pool and roles call it; a kind
nothing registered is a typed error that names the kinds there are."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.cli import main
from tiermem.config import (
    BackendConfig,
    GeneratorConfig,
    LTMConfig,
    NoModelConfig,
    OllamaConfig,
    RoleConfig,
    SLMConfig,
)
from tiermem.errors import ConfigError, UnknownProviderError
from tiermem.settings import load_config
from tiermem.slm.base import SLMBackend
from tiermem.slm.ollama_backend import OllamaBackend
from tiermem.slm.registry import (
    backend_kinds,
    build_backend,
    register_backend,
    registered_backend,
    unregister_backend,
)
from tiermem.slm.scripted import ScriptedBackend

from tests.conftest import chat
from tests.fakes.scripted import ScriptedModels
from tests.slm.conftest import Script

PRODUCTION_KINDS = ["llamacpp", "none", "ollama", "openai"]
URL = "http://127.0.0.1:8000/v1"


def _rule(section: dict[str, Any]) -> dict[str, Any] | None:
    """What the config takes for the real kinds: the fields it ends with, or None where it
    refuses. It took more while one flat class served every kind: a ``base_url`` on any kind
    and a model under ``none``, both ignored; each kind's own class now refuses a field it
    does not have."""
    kind, model, url = section.get("kind", "none"), section.get("model"), section.get("base_url")
    if url is not None and kind != "openai":
        return None
    if kind == "none":
        return {"kind": kind, "model": "", "base_url": None} if not model else None
    if not model:
        defaults = {"llamacpp": "qwen0.5b", "ollama": "llama3.2:1b-instruct-q4_K_M"}
        if kind not in defaults:
            return None
        model = defaults[kind]
    if kind == "openai" and not url:
        return None
    return {"kind": kind, "model": model, "base_url": url}


CASES = [
    {
        k: v
        for k, v in {"kind": kind, "model": model, "base_url": url}.items()
        if v is not None and v != "<absent>"
    }
    for kind, model, url in itertools.product(
        ["none", "llamacpp", "ollama", "openai", "<absent>"],
        ["<absent>", "", "qwen1.5b"],
        [None, URL],
    )
]


def _toml(section: dict[str, Any]) -> str:
    return "[slm.backend]\n" + "".join(f'{k} = "{v}"\n' for k, v in section.items())


@pytest.mark.parametrize("section", CASES, ids=_toml)
def test_config_loading_takes_each_real_kind_in_its_own_class(
    section: dict[str, Any], tmp_path: Path
) -> None:
    toml = tmp_path / "tiermem.toml"
    toml.write_text(_toml(section))
    expected = _rule(section)
    if expected is None:
        with pytest.raises(ConfigError):
            load_config(toml, {})
        return
    backend = load_config(toml, {}).slm.backend
    url = getattr(backend, "base_url", None)
    assert {"kind": backend.kind, "model": backend.model, "base_url": url} == expected
    assert (
        type(backend).__name__
        == {
            "none": "NoModelConfig",
            "llamacpp": "LlamaCppConfig",
            "ollama": "OllamaConfig",
            "openai": "OpenAIConfig",
        }[backend.kind]
    )


def test_scripted_is_no_production_kind() -> None:
    assert backend_kinds() == PRODUCTION_KINDS
    with pytest.raises(ValidationError, match="model"):
        BackendConfig(kind="scripted")  # it had a default model while it was a production kind
    config = TiermemConfig.for_tests().model_copy(
        update={"slm": SLMConfig(backend=BackendConfig(kind="scripted", model="scripted"))}
    )
    with pytest.raises(UnknownProviderError):
        Memory(config)


@pytest.mark.parametrize("kind", ["", "Ollama", "llama cpp", "../x"])
def test_a_kind_of_the_wrong_shape_is_refused_by_the_config(kind: str) -> None:
    with pytest.raises(ValidationError, match="kind"):
        BackendConfig(kind=kind, model="m")


def test_an_unknown_kind_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(UnknownProviderError) as raised:
        build_backend(BackendConfig(kind="olama", model="m"), tmp_path)
    assert (raised.value.name, raised.value.known) == ("olama", PRODUCTION_KINDS)
    assert str(raised.value) == (
        "unknown slm backend provider 'olama'; known: llamacpp, none, ollama, openai"
    )
    with pytest.raises(ConfigError, match="'none' has no model to call"):
        build_backend(NoModelConfig(), tmp_path)


def test_a_memory_refuses_an_unknown_kind_even_on_a_role_that_is_off() -> None:
    off = RoleConfig(enabled=False, backend=BackendConfig(kind="olama", model="m"))
    config = TiermemConfig.for_tests().model_copy(update={"slm": SLMConfig(writer=off)})
    with pytest.raises(UnknownProviderError, match="known: llamacpp, none, ollama, openai"):
        Memory(config)
    consolidation = LTMConfig().consolidation.model_copy(
        update={"backend": BackendConfig(kind="olama", model="m")}
    )
    ltm_off = LTMConfig(consolidation=consolidation)
    with pytest.raises(UnknownProviderError, match="'olama'"):
        Memory(TiermemConfig.for_tests().model_copy(update={"ltm": ltm_off}))


def test_tiermem_config_reports_an_unknown_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "typo.toml"
    toml.write_text('[slm.backend]\nkind = "olama"\nmodel = "llama3.2"\n')
    assert main(["config", "--config", str(toml)]) == 2
    out = capsys.readouterr().out
    assert "unknown slm backend provider 'olama'; known: llamacpp, none, ollama, openai" in out


def test_the_roles_call_the_backend_registered_for_their_kind(clock: ManualClock) -> None:
    script = Script()
    script.queue("generator", {"answer": "In Lisbon."})
    fake = ScriptedBackend(default=script)
    built: list[tuple[str, str]] = []

    def factory(config: BackendConfig, models_dir: Path, owner: str) -> SLMBackend:
        built.append((config.model, owner))
        return fake

    config = TiermemConfig.for_tests().model_copy(
        update={
            "slm": SLMConfig(
                backend=BackendConfig(kind="fake", model="tiny"), selector_mode="listwise"
            ),
            "generator": GeneratorConfig(kind="model"),
        }
    )
    with registered_backend("fake", factory):
        assert "fake" in backend_kinds()
        with Memory(config, clock=clock) as memory:
            memory.add(chat(("user", "My sister Ines lives in Lisbon.")), "maya")
            answer = memory.answer("Where does Ines live?", "maya")
    assert answer.text == "In Lisbon."
    assert [r.task for r in fake.requests] == ["writer", "controller", "selector", "generator"]
    assert built == [("tiny", "online")]  # one backend, shared by every role
    assert "fake" not in backend_kinds()  # registered for the block only
    with pytest.raises(UnknownProviderError):
        Memory(config)


def test_a_registration_for_a_block_restores_what_was_there(tmp_path: Path) -> None:
    fake = ScriptedBackend()
    with registered_backend("ollama", lambda config, models_dir, owner: fake):
        assert build_backend(OllamaConfig(), tmp_path) is fake
    assert isinstance(build_backend(OllamaConfig(), tmp_path), OllamaBackend)
    register_backend("made-up", lambda config, models_dir, owner: fake)
    try:
        assert build_backend(BackendConfig(kind="made-up", model="m"), tmp_path) is fake
    finally:
        unregister_backend("made-up")
    assert backend_kinds() == PRODUCTION_KINDS


def test_none_cannot_be_registered() -> None:
    with pytest.raises(ConfigError, match="means no model"):
        register_backend("none", lambda config, models_dir, owner: ScriptedBackend())
    assert backend_kinds() == PRODUCTION_KINDS


def test_the_scripted_fixture_builds_one_fake_per_model_name(
    scripted_models: ScriptedModels, tmp_path: Path
) -> None:
    first = build_backend(BackendConfig(kind="scripted", model="a"), tmp_path)
    again = build_backend(BackendConfig(kind="scripted", model="a"), tmp_path, "consolidation")
    other = build_backend(BackendConfig(kind="scripted", model="b"), tmp_path)
    assert first is again is scripted_models["a"]
    assert other is scripted_models["b"] is not first


def test_a_backend_sdk_loads_only_when_its_kind_is_built() -> None:
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from tiermem import Memory, TiermemConfig
        from tiermem.config import OllamaConfig
        from tiermem.slm.registry import build_backend
        sdks = ("ollama", "openai", "llama_cpp")
        Memory(TiermemConfig.for_tests()).close()
        print(sorted(m for m in sdks if m in sys.modules))
        build_backend(OllamaConfig(), Path("."))
        print(sorted(m for m in sdks if m in sys.modules))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.splitlines() == ["[]", "['ollama']"]


def test_each_real_kind_is_configured_by_its_own_class(tmp_path: Path) -> None:
    """The registry names each kind's configuration class; the flat class cannot stand in
    for one, and a factory refuses a configuration of another kind."""
    from tiermem.config import LlamaCppConfig, OpenAIConfig
    from tiermem.slm.registry import BACKENDS

    assert [BACKENDS.get(k).config for k in ("llamacpp", "ollama", "openai")] == [
        LlamaCppConfig,
        OllamaConfig,
        OpenAIConfig,
    ]
    with pytest.raises(ValidationError, match="'llamacpp' is configured by LlamaCppConfig"):
        BackendConfig(kind="llamacpp", model="qwen0.5b")
    wrong = OllamaConfig().model_copy(update={"kind": "openai"})  # past validation
    with pytest.raises(ConfigError, match="'openai' is configured by OpenAIConfig, not Olla"):
        build_backend(wrong, tmp_path)


def test_an_override_that_changes_the_kind_starts_from_that_kinds_defaults() -> None:
    """The consolidation's default is llamacpp; a file naming an OpenAI server gets none of
    llamacpp's fields, and a change within one kind keeps the rest."""
    from tiermem.config import OpenAIConfig, merge_overrides

    served = {"kind": "openai", "model": "big", "base_url": URL}
    config = merge_overrides(TiermemConfig(), {"ltm": {"consolidation": {"backend": served}}})
    assert config.ltm.consolidation.backend == OpenAIConfig(model="big", base_url=URL)
    threads = {"ltm": {"consolidation": {"backend": {"n_ctx": 8192}}}}
    kept = merge_overrides(TiermemConfig(), threads).ltm.consolidation.backend
    assert (kept.model, getattr(kept, "n_threads", None), getattr(kept, "n_ctx", None)) == (
        "qwen1.5b",
        1,
        8192,
    )
