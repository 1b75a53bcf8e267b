"""Configuration at the edge: a TOML file and environment variables, for the CLI and the
service. The library itself never reads either.

TOML mirrors ``TiermemConfig``::

    data_dir = "/var/lib/tiermem"
    [mtm]
    location = "url"
    url = "http://localhost:6333"

``[mtm] kind = "edge"`` (Qdrant Edge shards, the ``edge`` extra) keeps its shards under the
data directory, ``<data_dir>/edge``, unless it names a ``path``.

Environment: ``TIERMEM_DATA_DIR`` picks the data directory; ``TIERMEM_<SECTION>__<FIELD>``
overrides one field (``TIERMEM_MTM__URL=http://qdrant:6333``).

The ``[service]`` section (and ``TIERMEM_SERVICE__<FIELD>``) configures ``tiermem serve``,
not the memory: ``load_config`` leaves it out, ``load_edge_config`` returns it apart.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from tiermem.config import DEFAULT_DATA_DIR, TiermemConfig, merge_overrides
from tiermem.errors import ConfigError

_PREFIX = "TIERMEM_"


SERVICE_SECTION = "service"
_KIND_NAMES = ("kind", "provider")  # the embedder reads its kind under either name


def load_config(path: Path | None, environ: Mapping[str, str]) -> TiermemConfig:
    """The embedded default under the data directory, then the file, then the environment."""
    return load_edge_config(path, environ)[0]


def load_edge_config(
    path: Path | None, environ: Mapping[str, str]
) -> tuple[TiermemConfig, dict[str, object]]:
    """``load_config``'s memory config, and the raw ``[service]`` section beside it (the file's
    table with the environment's ``TIERMEM_SERVICE__<FIELD>`` over it; empty if neither)."""
    overrides: dict[str, object] = {}
    if path is not None:
        try:
            overrides = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from exc
    data_dir = environ.get(f"{_PREFIX}DATA_DIR") or overrides.pop("data_dir", None)
    config = TiermemConfig.for_data_dir(Path(str(data_dir)) if data_dir else DEFAULT_DATA_DIR)
    for key, value in environ.items():
        if key.startswith(_PREFIX) and "__" in key:
            section, _, field = key[len(_PREFIX) :].lower().partition("__")
            section_overrides = overrides.setdefault(section, {})
            if not isinstance(section_overrides, dict):
                raise ConfigError(f"{key} names {section!r}, which is not a section")
            if field in _KIND_NAMES:  # one field by either name: the environment's wins
                for name in _KIND_NAMES:
                    section_overrides.pop(name, None)
            section_overrides[field] = value
    service = overrides.pop(SERVICE_SECTION, {})
    if not isinstance(service, dict):
        raise ConfigError(f"[{SERVICE_SECTION}] must be a table, got {service!r}")
    _edge_under_data_dir(overrides, config.data_dir)
    return merge_overrides(config, overrides), service


def _edge_under_data_dir(overrides: dict[str, object], data_dir: Path | None) -> None:
    """``[mtm] kind = "edge"`` with no ``path``: its shards go under the data directory
    (``<data_dir>/edge``), as the embedded default's Qdrant files do."""
    mtm = overrides.get("mtm")
    edge = isinstance(mtm, dict) and mtm.get("kind") == "edge" and "path" not in mtm
    if edge and data_dir is not None and isinstance(mtm, dict):
        mtm["path"] = str(data_dir / "edge")
