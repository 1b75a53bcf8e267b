"""Build backends and roles from configuration. Each backend module is imported on use, so
an SDK that a deployment does not use never loads."""

from __future__ import annotations

from pathlib import Path

from tiermem.config import BackendConfig, RoleConfig, SLMConfig
from tiermem.errors import ConfigError
from tiermem.slm.base import SLMBackend
from tiermem.slm.meter import Meter
from tiermem.slm.roles.common import RoleRuntime


def build_backend(config: BackendConfig, models_dir: Path) -> SLMBackend:
    """The backend ``config.kind`` names (``none`` has no backend and is refused here)."""
    if config.kind == "llamacpp":
        from tiermem.slm.llamacpp import LlamaCppBackend
        from tiermem.slm.models import resolve_model

        return LlamaCppBackend(
            resolve_model(config.model, models_dir), n_ctx=config.n_ctx, n_threads=config.n_threads
        )
    if config.kind == "ollama":
        from tiermem.slm.ollama_backend import OllamaBackend

        return OllamaBackend(
            config.model,
            host=config.host,
            keep_alive=config.keep_alive,
            timeout_s=config.request_timeout_s,
        )
    if config.kind == "openai":
        from tiermem.slm.openai_backend import OpenAIBackend

        return OpenAIBackend(
            config.model,
            base_url=config.base_url,
            api_key=config.api_key,
            timeout_s=config.request_timeout_s,
            response_format=config.response_format,
        )
    if config.kind == "scripted":
        from tiermem.slm.scripted import ScriptedBackend

        return ScriptedBackend()
    raise ConfigError(f"backend kind {config.kind!r} has no model to call")


class BackendPool:
    """One backend per distinct configuration, shared by the roles that name it."""

    def __init__(self, models_dir: Path) -> None:
        self._models_dir = models_dir.expanduser()
        self._built: dict[str, SLMBackend] = {}

    def get(self, config: BackendConfig) -> SLMBackend:
        key = config.model_dump_json()
        if key not in self._built:
            self._built[key] = build_backend(config, self._models_dir)
        return self._built[key]

    def close(self) -> None:
        for backend in self._built.values():
            backend.close()


def role_runtime(
    slm: SLMConfig, role: RoleConfig, pool: BackendPool, meter: Meter
) -> RoleRuntime | None:
    """The runtime of a role, or ``None`` when the role is off or no model is configured."""
    backend = role.backend or slm.backend
    if not role.enabled or backend.kind == "none":
        return None
    return RoleRuntime(pool.get(backend), meter, role.timeout_s, role.temperature, role.max_tokens)
