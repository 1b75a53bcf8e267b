"""The model backends' configurations, one class per built-in kind, and ``Backend``, their
union discriminated on ``kind`` (a kind registered at run time is configured by
``BackendConfig`` itself)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import Discriminator, Field, Tag, TypeAdapter, model_validator
from tiermem.config.section import Section, validated


class BackendConfig(Section):
    """How to reach a model: the fields every backend kind has. ``kind`` names a backend in
    ``tiermem.slm.registry``; each built-in kind has its own class below (``Backend`` is their
    union, discriminated on ``kind``), so a field that a kind does not have is refused by name.
    A kind registered at run time (a test's fake) is configured by this class itself, and
    must name its model. ``none`` (``NoModelConfig``) means no model: the model-free stages
    run instead."""

    kind: str = Field(pattern=r"^[a-z][a-z0-9_.-]{0,63}$")
    model: str = Field(min_length=1)
    request_timeout_s: float = Field(default=120.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _empty_model_is_the_default(cls, data: Any) -> Any:
        """An empty ``model`` means the kind's default (``merge_overrides`` leaves one when
        only the kind changes)."""
        if isinstance(data, dict) and data.get("model") == "":
            return {k: v for k, v in data.items() if k != "model"}
        return data

    @model_validator(mode="after")
    def _builtin_kinds_have_their_class(self) -> BackendConfig:
        if type(self) is BackendConfig and self.kind in BUILTIN_BACKENDS:
            own = BUILTIN_BACKENDS[self.kind].__name__
            raise ValueError(f"slm backend kind {self.kind!r} is configured by {own}")
        return self


class NoModelConfig(BackendConfig):
    """No model: every role runs its model-free stage."""

    kind: Literal["none"] = "none"
    model: Literal[""] = ""


class LlamaCppConfig(BackendConfig):
    """A GGUF model in process through llama-cpp-python. ``model`` is an alias (``smollm2``,
    ``qwen0.5b``, ``qwen1.5b``) or a GGUF path."""

    kind: Literal["llamacpp"] = "llamacpp"
    model: str = Field(default="qwen0.5b", min_length=1)
    n_ctx: int = Field(default=4096, ge=512)
    n_threads: int | None = Field(default=None, gt=0)
    # Load a build with llama.cpp's AMX kernels. Off: they died with SIGILL on this project's
    # machines even where the kernel grants AMX; turn on only where
    # `tiermem doctor --allow-amx` passes.
    allow_amx: bool = False
    # A GGUF LoRA adapter applied on load (`tiermem train selector` exports one). An Ollama
    # model takes its adapter in its Modelfile (ADAPTER), a vLLM server in --lora-modules
    # (then `model` names the adapter): neither kind has this field.
    lora_path: Path | None = None
    lora_scale: float = Field(default=1.0, ge=0)


class OllamaConfig(BackendConfig):
    """A model an Ollama server serves; ``model`` is its tag."""

    kind: Literal["ollama"] = "ollama"
    model: str = Field(default="llama3.2:1b-instruct-q4_K_M", min_length=1)
    host: str = "http://127.0.0.1:11434"
    keep_alive: str = "30m"


class OpenAIConfig(BackendConfig):
    """Any OpenAI-compatible server (vLLM, llama-server, a hosted API): it has no default
    model or address, so both are named."""

    kind: Literal["openai"] = "openai"
    model: str = Field(min_length=1)
    base_url: str = Field(min_length=1)
    api_key: str | None = None
    response_format: Literal["json_schema", "json_object_schema"] = "json_schema"


BUILTIN_BACKENDS: Final[Mapping[str, type[BackendConfig]]] = {
    "none": NoModelConfig,
    "llamacpp": LlamaCppConfig,
    "ollama": OllamaConfig,
    "openai": OpenAIConfig,
}
_RUNTIME_KIND = "registered"  # the union's tag for a kind registered at run time


def _backend_tag(data: Any) -> str:
    kind = data.get("kind", "none") if isinstance(data, dict) else getattr(data, "kind", None)
    return kind if isinstance(kind, str) and kind in BUILTIN_BACKENDS else _RUNTIME_KIND


Backend = Annotated[
    Annotated[NoModelConfig, Tag("none")]
    | Annotated[LlamaCppConfig, Tag("llamacpp")]
    | Annotated[OllamaConfig, Tag("ollama")]
    | Annotated[OpenAIConfig, Tag("openai")]
    | Annotated[BackendConfig, Tag(_RUNTIME_KIND)],
    Discriminator(_backend_tag),
]
"""A backend's configuration, by ``kind`` (a missing kind is ``none``)."""
_BACKEND: TypeAdapter[BackendConfig] = TypeAdapter(Backend)


def backend_config(**fields: Any) -> BackendConfig:
    """The configuration of backend ``fields["kind"]``, in its own class.

    >>> backend_config(kind="ollama").model
    'llama3.2:1b-instruct-q4_K_M'
    >>> backend_config(kind="ollama", lora_path="a.gguf")
    Traceback (most recent call last):
    tiermem.errors.ConfigError: ...lora_path...Extra inputs are not permitted...
    """
    return validated(_BACKEND, fields)


__all__ = [
    "BUILTIN_BACKENDS",
    "Backend",
    "BackendConfig",
    "LlamaCppConfig",
    "NoModelConfig",
    "OllamaConfig",
    "OpenAIConfig",
    "backend_config",
]
