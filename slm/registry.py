"""Build backends and roles from configuration. Each backend module is imported on use, so
an SDK that a deployment does not use never loads."""

from __future__ import annotations

from pathlib import Path

from tiermem.config import BackendConfig, RoleConfig, SLMConfig
from tiermem.errors import ConfigError
from tiermem.slm.base import SLMBackend
from tiermem.slm.meter import Meter
from tiermem.slm.roles.common import RoleRuntime

ONLINE = "online"  # the online roles: controller, selector, writer, generator
CONSOLIDATION = "consolidation"  # the offline job


def build_backend(config: BackendConfig, models_dir: Path, owner: str = ONLINE) -> SLMBackend:
    """The backend ``config.kind`` names (``none`` has no backend and is refused here).
    ``owner`` picks the in-process model context a ``llamacpp`` backend uses."""
    if config.kind == "llamacpp":
        from tiermem.slm.llamacpp import LlamaCppBackend
        from tiermem.slm.models import resolve_model

        return LlamaCppBackend(
            resolve_model(config.model, models_dir),
            n_ctx=config.n_ctx,
            n_threads=config.n_threads,
            pool=owner,
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

    def get(self, config: BackendConfig, owner: str = ONLINE) -> SLMBackend:
        """The backend for ``config``. An in-process model context answers one call at a time,
        so each owner gets its own and the online roles never wait behind a consolidation
        call; the other kinds are clients of a server (or the scripted fake), shared by all."""
        key = f"{owner if config.kind == 'llamacpp' else ''}\x1f{config.model_dump_json()}"
        if key not in self._built:
            self._built[key] = build_backend(config, self._models_dir, owner)
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
