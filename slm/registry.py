"""Build backends and roles from configuration.

Backends live in a ``tiermem.registry.Registry`` (``BACKENDS``): kind -> factory, as embedders,
stores and selectors do. Each factory imports its backend module on use, so an SDK that a
deployment does not use never loads. Production registers ``llamacpp`` (an in-process model:
one context per owner), ``ollama`` and ``openai``; tests register their fakes here too
(``registered_backend``), so the real pool and roles run against them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel
from tiermem.config import (
    BackendConfig,
    LlamaCppConfig,
    OllamaConfig,
    OpenAIConfig,
    RoleConfig,
    SLMConfig,
)
from tiermem.errors import ConfigError, UnknownProviderError
from tiermem.registry import Registry
from tiermem.slm.base import CONSOLIDATION as CONSOLIDATION  # re-exported: owners
from tiermem.slm.base import ONLINE, SLMBackend
from tiermem.slm.meter import Meter
from tiermem.slm.roles.common import RoleRuntime

# (config, models directory, owner) -> backend. ``owner`` is who the backend serves (ONLINE or
# CONSOLIDATION): an in-process model gives each owner its own context.
BackendFactory = Callable[[BackendConfig, Path, str], SLMBackend]
C = TypeVar("C", bound=BackendConfig)


def _configured_by(
    config_class: type[C], build: Callable[[C, Path, str], SLMBackend]
) -> BackendFactory:
    """A factory that builds from ``config_class`` and refuses any other configuration."""

    def factory(config: BackendConfig, models_dir: Path, owner: str) -> SLMBackend:
        if not isinstance(config, config_class):
            raise ConfigError(
                f"slm backend kind {config.kind!r} is configured by {config_class.__name__},"
                f" not {type(config).__name__}"
            )
        return build(config, models_dir, owner)

    return factory


def _llamacpp(config: LlamaCppConfig, models_dir: Path, owner: str) -> SLMBackend:
    from tiermem.slm.llamacpp import LlamaCppBackend
    from tiermem.slm.models import resolve_model

    return LlamaCppBackend(
        resolve_model(config.model, models_dir),
        n_ctx=config.n_ctx,
        n_threads=config.n_threads,
        pool=owner,
        allow_amx=config.allow_amx,
        lora_path=config.lora_path.expanduser() if config.lora_path is not None else None,
        lora_scale=config.lora_scale,
    )


def _ollama(config: OllamaConfig, models_dir: Path, owner: str) -> SLMBackend:
    from tiermem.slm.ollama_backend import OllamaBackend

    return OllamaBackend(
        config.model,
        host=config.host,
        keep_alive=config.keep_alive,
        timeout_s=config.request_timeout_s,
    )


def _openai(config: OpenAIConfig, models_dir: Path, owner: str) -> SLMBackend:
    from tiermem.slm.openai_backend import OpenAIBackend

    return OpenAIBackend(
        config.model,
        base_url=config.base_url,
        api_key=config.api_key,
        timeout_s=config.request_timeout_s,
        response_format=config.response_format,
    )


NO_MODEL = "none"  # the kind that means "no backend": the model-free stages run
CONTEXT_PER_OWNER = "context-per-owner"  # capability: an in-process model, one call at a time
SCORES_TOKENS = "scores-tokens"  # capability: next-token log-probabilities (pointwise selector)
BACKENDS: Registry[BackendFactory] = Registry("slm backend", reserved={NO_MODEL: "no model"})


def _builtin(
    kind: str, config_class: type[C], build: Callable[[C, Path, str], SLMBackend], *caps: str
) -> None:
    BACKENDS.register(
        kind, _configured_by(config_class, build), capabilities=caps, config=config_class
    )


_builtin("llamacpp", LlamaCppConfig, _llamacpp, CONTEXT_PER_OWNER, SCORES_TOKENS)
_builtin("ollama", OllamaConfig, _ollama, SCORES_TOKENS)
_builtin("openai", OpenAIConfig, _openai, SCORES_TOKENS)


def backend_kinds() -> list[str]:
    """The kinds a ``BackendConfig`` can name now, ``none`` included."""
    return sorted([NO_MODEL, *BACKENDS.names()])


def register_backend(
    name: str, factory: BackendFactory, *, capabilities: Iterable[str] = (), replace: bool = False
) -> None:
    """Make ``name`` usable as ``BackendConfig.kind`` (tests register their fakes this way).
    ``none`` is not a backend and cannot be registered."""
    BACKENDS.register(name, factory, capabilities=capabilities, replace=replace)


def unregister_backend(name: str) -> None:
    """Forget ``name``; a configuration naming it is refused again."""
    BACKENDS.unregister(name)


def registered_backend(
    name: str, factory: BackendFactory, *, capabilities: Iterable[str] = ()
) -> AbstractContextManager[None]:
    """``name`` builds with ``factory`` inside the block; what it built before comes back
    after (nothing, for a new name)."""
    return BACKENDS.registered(name, factory, capabilities=capabilities)


def build_backend(config: BackendConfig, models_dir: Path, owner: str = ONLINE) -> SLMBackend:
    """The backend ``config.kind`` names. ``none`` has no backend and is refused here, as is
    a kind nothing registered (``UnknownProviderError``, naming the known kinds). ``owner``
    picks the in-process model context a ``llamacpp`` backend uses."""
    if config.kind == NO_MODEL:
        raise ConfigError(f"backend kind {NO_MODEL!r} has no model to call")
    if config.kind not in BACKENDS:
        raise UnknownProviderError("slm backend", config.kind, backend_kinds())
    return BACKENDS.factory(config.kind)(config, models_dir, owner)


def check_backend_kinds(config: BaseModel) -> None:
    """Refuse a configuration with a backend kind nothing registered, wherever it sits (a
    role's own backend, the consolidation's), even one that a disabled role would never
    build. The config file loader cannot check this alone: kinds are registered at run time."""
    for name in type(config).model_fields:
        value = getattr(config, name)
        if isinstance(value, BackendConfig):
            if value.kind != NO_MODEL and value.kind not in BACKENDS:
                raise UnknownProviderError("slm backend", value.kind, backend_kinds())
        elif isinstance(value, BaseModel):
            check_backend_kinds(value)


class BackendPool:
    """One backend per distinct configuration, shared by the roles that name it."""

    def __init__(self, models_dir: Path) -> None:
        self._models_dir = models_dir.expanduser()
        self._built: dict[str, SLMBackend] = {}

    def get(self, config: BackendConfig, owner: str = ONLINE) -> SLMBackend:
        """The backend for ``config``. An in-process model context answers one call at a time,
        so each owner gets its own and the online roles never wait behind a consolidation
        call; the other kinds are clients of a server (or a test's fake), shared by all."""
        per_owner = config.kind in BACKENDS and BACKENDS.can(config.kind, CONTEXT_PER_OWNER)
        key = f"{owner if per_owner else ''}\x1f{config.model_dump_json()}"
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
    if not role.enabled or backend.kind == NO_MODEL:
        return None
    return RoleRuntime(pool.get(backend), meter, role.timeout_s, role.temperature, role.max_tokens)
