"""``tiermem serve``'s settings at the edge: the ``[service]`` table and
``TIERMEM_SERVICE__<FIELD>``, apart from the memory's config; where the keys file is."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiermem.errors import ConfigError
from tiermem.service.server import resolve
from tiermem.settings import load_config

TOML = """data_dir = "{root}"
[embedder]
kind = "hash"
model = "hash-384"
[service]
max_k = 7
keys_file = "{root}/configured.json"
"""


def _config(tmp_path: Path, text: str = TOML) -> Path:
    path = tmp_path / "tiermem.toml"
    path.write_text(text.format(root=tmp_path))
    return path


def test_the_service_table_and_environment_configure_the_service_only(tmp_path: Path) -> None:
    config = _config(tmp_path)
    env = {"TIERMEM_SERVICE__MAX_IN_FLIGHT": "3"}
    settings = resolve(config, None, env)
    assert (settings.service.max_k, settings.service.max_in_flight) == (7, 3)
    assert settings.memory.embedder.kind == "hash"
    assert load_config(config, env) == settings.memory  # the memory never sees [service]


def test_the_keys_file_is_the_flag_then_the_environment_then_the_config(tmp_path: Path) -> None:
    config = _config(tmp_path)
    flag, env = tmp_path / "flag.json", {"TIERMEM_API_KEYS_FILE": str(tmp_path / "env.json")}
    assert resolve(config, flag, env).keys_file == flag
    assert resolve(config, None, env).keys_file == tmp_path / "env.json"
    assert resolve(config, None, {}).keys_file == tmp_path / "configured.json"
    bare = _config(tmp_path, 'data_dir = "{root}"\n')
    assert resolve(bare, None, {"TIERMEM_DATA_DIR": str(tmp_path)}).keys_file == (
        tmp_path / "api-keys.json"
    )


@pytest.mark.parametrize(
    "env", [{"TIERMEM_SERVICE__MAX_K": "0"}, {"TIERMEM_SERVICE__NO_SUCH_LIMIT": "1"}]
)
def test_a_bad_service_setting_is_a_config_error(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"\[service\]"):
        resolve(_config(tmp_path), None, env)
