"""Configuration at the edge: a TOML file and environment variables, for the CLI and the
service. The library itself never reads either.

TOML mirrors ``TiermemConfig``::

    data_dir = "/var/lib/tiermem"
    [mtm]
    location = "url"
    url = "http://localhost:6333"

Environment: ``TIERMEM_DATA_DIR`` picks the data directory; ``TIERMEM_<SECTION>__<FIELD>``
overrides one field (``TIERMEM_MTM__URL=http://qdrant:6333``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from tiermem.config import DEFAULT_DATA_DIR, TiermemConfig, merge_overrides
from tiermem.errors import ConfigError

_PREFIX = "TIERMEM_"


def load_config(path: Path | None, environ: Mapping[str, str]) -> TiermemConfig:
    """The embedded default under the data directory, then the file, then the environment."""
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
            section_overrides[field] = value
    return merge_overrides(config, overrides)
