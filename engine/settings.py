"""Configuration at the edge: a TOML file and environment variables, for the CLI and the
service. The library itself never reads either.

TOML mirrors ``TiermemConfig``::

    data_dir = "/var/lib/tiermem"
    [mtm]
    location = "url"
    url = "http://localhost:6333"

The embedded default keeps Qdrant Edge shards under the data directory, ``<data_dir>/edge``
(or local mode's ``<data_dir>/qdrant``, where a data directory holds only that). An ``[mtm]``
section with no ``kind`` that sets Qdrant's own settings (``location``, ``url``, ``api_key``,
``timeout_s``), or whose ``path`` holds local mode's files, is Qdrant's; a store with no
``path`` keeps its files under the data directory.

Environment: ``TIERMEM_DATA_DIR`` picks the data directory; ``TIERMEM_<SECTION>__<FIELD>``
overrides one field (``TIERMEM_MTM__URL=http://qdrant:6333``).

The ``[service]`` section (and ``TIERMEM_SERVICE__<FIELD>``) configures ``tiermem serve``,
not the memory: ``load_config`` leaves it out, ``load_edge_config`` returns it apart.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

from tiermem.config import (
    DEFAULT_DATA_DIR,
    EdgeStoreConfig,
    QdrantConfig,
    TiermemConfig,
    merge_overrides,
)
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
    overrides = _read(path)
    data_dir = environ.get(f"{_PREFIX}DATA_DIR") or overrides.pop("data_dir", None)
    config = TiermemConfig.for_data_dir(Path(str(data_dir)) if data_dir else DEFAULT_DATA_DIR)
    for key, section, field, value in _environment_fields(environ):
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
    _store_under_data_dir(overrides, config.data_dir)
    return merge_overrides(config, overrides), service


def names_store(path: Path | None, environ: Mapping[str, str]) -> bool:
    """Whether the file or the environment sets anything of ``[mtm]``; if neither does, the
    memory opens its data directory's embedded store (``tiermem.config.embedded_mtm``)."""
    if any(section == "mtm" for _, section, _, _ in _environment_fields(environ)):
        return True
    return "mtm" in _read(path)


def _environment_fields(environ: Mapping[str, str]) -> Iterator[tuple[str, str, str, str]]:
    """Each ``TIERMEM_<SECTION>__<FIELD>`` variable: its name, section, field and value."""
    for key, value in environ.items():
        if key.startswith(_PREFIX) and "__" in key:
            section, _, field = key[len(_PREFIX) :].lower().partition("__")
            yield key, section, field, value


def _read(path: Path | None) -> dict[str, object]:
    if path is None:
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc


# Settings only qdrant-client's store has: an ``[mtm]`` section that sets one and names no
# kind means Qdrant, as it did when Qdrant was the embedded default (a server's ``url``).
_QDRANT_ONLY = frozenset(QdrantConfig.model_fields) - frozenset(EdgeStoreConfig.model_fields)


def _local_mode_files(mtm: dict[str, object]) -> bool:
    """Whether ``[mtm] path`` names a directory that qdrant-client's local mode wrote (its
    ``meta.json``): a configuration from when that was the default, still meaning it."""
    path = mtm.get("path")
    return isinstance(path, str) and (Path(path).expanduser() / "meta.json").is_file()


def _store_under_data_dir(overrides: dict[str, object], data_dir: Path | None) -> None:
    """An ``[mtm]`` section that names Qdrant's own settings without a kind is Qdrant's, and a
    store kind with no ``path`` lives under the data directory, as the embedded default does:
    ``edge`` in ``<data_dir>/edge``, ``qdrant`` on disk in ``<data_dir>/qdrant``."""
    mtm = overrides.get("mtm")
    if not isinstance(mtm, dict):
        return
    if "kind" not in mtm and (not _QDRANT_ONLY.isdisjoint(mtm) or _local_mode_files(mtm)):
        mtm["kind"] = "qdrant"
    if data_dir is None or "path" in mtm:
        return
    if mtm.get("kind") == "edge":
        mtm["path"] = str(data_dir / "edge")
    elif mtm.get("kind") == "qdrant" and mtm.get("location", "path") == "path":
        mtm["path"] = str(data_dir / "qdrant")
