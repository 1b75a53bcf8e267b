"""``tiermem serve``: read the config at the edge, own the data directory, open the memory,
serve it with uvicorn, and on SIGTERM or SIGINT shut down in order: stop accepting, let the
requests in flight finish (``service.shutdown_grace_s``), close the memory (which waits for a
write in flight), release the directory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError
from tiermem.config import DEFAULT_DATA_DIR, TiermemConfig
from tiermem.errors import ConfigError
from tiermem.memory import Memory
from tiermem.ownership import claim_data_dir
from tiermem.service.config import ServiceConfig
from tiermem.service.keys import KeyRing
from tiermem.settings import load_edge_config

logger = logging.getLogger(__name__)

KEYS_ENV = "TIERMEM_API_KEYS_FILE"
DEFAULT_KEYS_NAME = "api-keys.json"


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """Everything ``tiermem serve`` was told, resolved."""

    memory: TiermemConfig
    service: ServiceConfig
    keys_file: Path


def keys_file_for(
    given: Path | None, environ: Mapping[str, str], configured: Path | None = None
) -> Path:
    """``--keys``, else ``$TIERMEM_API_KEYS_FILE``, else ``[service] keys_file``, else
    ``api-keys.json`` in the data directory (``$TIERMEM_DATA_DIR`` or the default).

    >>> keys_file_for(None, {"TIERMEM_DATA_DIR": "/srv/tm"})
    PosixPath('/srv/tm/api-keys.json')
    """
    if given is not None:
        return given
    if environ.get(KEYS_ENV):
        return Path(environ[KEYS_ENV])
    if configured is not None:
        return configured
    data_dir = Path(environ.get("TIERMEM_DATA_DIR") or DEFAULT_DATA_DIR)
    return data_dir.expanduser() / DEFAULT_KEYS_NAME


def resolve(
    config_file: Path | None, keys_file: Path | None, environ: Mapping[str, str]
) -> ServeSettings:
    memory, section = load_edge_config(config_file, environ)
    try:
        service = ServiceConfig.model_validate(section)
    except ValidationError as exc:
        raise ConfigError(f"[service]: {exc}") from exc
    keys = keys_file_for(keys_file, environ, service.keys_file)
    return ServeSettings(memory, service, keys.expanduser())


def serve(
    settings: ServeSettings,
    host: str,
    port: int,
    *,
    access_log: bool = False,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT. Refuses to start (``DataDirLockedError``) on a data
    directory that another service or a ``tiermem consolidate`` owns, and (``ConfigError``)
    without any API key."""
    import uvicorn
    from tiermem.service.app import create_app
    from tiermem.service.protocol import JSONErrorsH11Protocol

    keys = KeyRing(settings.keys_file)
    data_dir = settings.memory.data_dir
    claim = None if data_dir is None else claim_data_dir(data_dir)
    try:
        memory = Memory(settings.memory)
        try:
            # closed by the app's shutdown: uvicorn re-raises SIGTERM once it returns, so
            # nothing after Server.run() is sure to run
            app = create_app(memory, keys, settings.service, close=memory.close)
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                http=JSONErrorsH11Protocol,
                access_log=access_log,  # off: query strings hold user ids
                log_level="info" if access_log else "warning",
                timeout_graceful_shutdown=max(1, round(settings.service.shutdown_grace_s)),
            )
            if announce is not None:
                announce(f"http://{host}:{port}")
            uvicorn.Server(config).run()
        finally:
            memory.close()  # idempotent: when the server never started
    finally:
        if claim is not None:
            claim.release()
