"""``tiermem inspect DATA_DIR``: the inspector page over an embedded data directory, read-only,
on 127.0.0.1.

The directory is claimed as ``tiermem serve`` claims it (no service or consolidation beside
it: embedded Qdrant admits one process), its memory opened over a ``ReadOnlyStore`` with no
consolidation scheduled, and served by the service's own app with ``read_only``: every write
route answers 403, erasing included (the page says so; there is no flag to allow it: erase
through ``tiermem serve``'s page or ``Memory.forget_user``). The app is the one ``tiermem
serve`` runs, so the page, its routes and their checks are the same code in both places.

Ids are as stored: the directory's owner is the caller (``tenancy.OWNER``). Even on
loopback the page needs a key, so another account on the machine cannot read the memory: a
fresh one per run, held in memory only, and printed in the page's address after ``#`` (a
fragment never reaches the server or its logs; the page moves it to the tab's storage).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from tiermem.components import build_components
from tiermem.config import TiermemConfig
from tiermem.errors import ConfigError
from tiermem.memory import Memory
from tiermem.ownership import claim_data_dir
from tiermem.service.keys import OneKey, Tenant
from tiermem.service.launch import LOOPBACK
from tiermem.service.page import PAGE_PATH
from tiermem.service.readonly import ReadOnlyStore
from tiermem.service.tenancy import OWNER
from tiermem.settings import load_config

DEFAULT_PORT = 8765


def inspect_config(
    data_dir: Path, config_file: Path | None, embedder: str | None, environ: Mapping[str, str]
) -> TiermemConfig:
    """The configuration of the directory to inspect: ``config_file`` and the environment as
    ``tiermem serve`` reads them, ``data_dir`` over theirs, ``embedder`` over its kind, and
    no consolidation scheduled. A directory that is not there is an error, not created."""
    if not data_dir.expanduser().is_dir():
        raise ConfigError(f"no data directory at {data_dir}: nothing to inspect")
    config = load_config(config_file, {**environ, "TIERMEM_DATA_DIR": str(data_dir)})
    if embedder is not None:
        config = config.model_copy(
            update={"embedder": config.embedder.model_copy(update={"kind": embedder})}
        )
    quiet = config.ltm.consolidation.model_copy(update={"interval_minutes": 0.0})
    ltm = config.ltm.model_copy(update={"consolidation": quiet})
    return config.model_copy(update={"ltm": ltm})


def open_read_only(config: TiermemConfig) -> Memory:
    """``config``'s memory over a store that refuses every write."""
    components = build_components(config)
    return Memory(config, components=replace(components, store=ReadOnlyStore(components.store)))


def serve_inspector(
    config: TiermemConfig, port: int, announce: Callable[[str], None] | None = None
) -> None:
    """Serve the inspector on ``LOOPBACK:port`` until SIGTERM or SIGINT; ``announce`` gets
    the page's address, key included."""
    import uvicorn
    from tiermem.service.app import create_app
    from tiermem.service.protocol import JSONErrorsH11Protocol

    data_dir = config.data_dir
    claim = None if data_dir is None else claim_data_dir(data_dir)
    try:
        memory = open_read_only(config)
        try:
            key = OneKey(Tenant(OWNER))
            app = create_app(memory, key, close=memory.close, read_only=True)
            server = uvicorn.Config(
                app, host=LOOPBACK, port=port, http=JSONErrorsH11Protocol, log_level="warning"
            )
            address = f"http://{LOOPBACK}:{port}{PAGE_PATH}#key={key.key}"

            class Announcing(uvicorn.Server):
                """Says the address once the socket listens, not before: a browser (or a
                test) that follows the line at once must not meet a refused connection."""

                async def startup(self, sockets: list[Any] | None = None) -> None:
                    await super().startup(sockets=sockets)
                    if self.started and announce is not None:
                        announce(address)

            Announcing(server).run()
        finally:
            memory.close()
    finally:
        if claim is not None:
            claim.release()
