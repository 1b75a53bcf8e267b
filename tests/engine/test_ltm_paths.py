"""An ``ltm.path`` that cannot hold the knowledge graph (a file where its directory should be,
a directory where its file should be) is a typed error naming the path, raised on open."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiermem import Memory
from tiermem.components import build_ltm
from tiermem.config import LTMConfig
from tiermem.errors import ConfigError, LTMError
from tiermem.ltm.persist import DirectoryLock
from tiermem.ltm.store import GRAPH_FILE

from tests.fakes.scripted import ScriptedModels
from tests.offline.conftest import ltm_config


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "not-a-directory"
    path.write_text("x")
    return path


@pytest.mark.parametrize("with_secret", [True, False], ids=["secret-in-config", "secret-file"])
def test_memory_refuses_an_ltm_path_that_is_a_file(
    tmp_path: Path, a_file: Path, scripted_models: ScriptedModels, with_secret: bool
) -> None:
    config = ltm_config(tmp_path)
    ltm = config.ltm.model_copy(
        update={"path": a_file, **({} if with_secret else {"secret": None})}
    )
    with pytest.raises(ConfigError, match=str(a_file)):
        Memory(config.model_copy(update={"ltm": ltm}))


def test_the_directory_lock_names_a_path_that_cannot_be_a_directory(a_file: Path) -> None:
    with pytest.raises(ConfigError, match=f"{a_file}.*ltm.path"):
        DirectoryLock.acquire(a_file / "graph")


def test_a_directory_in_place_of_the_graph_file_is_an_ltm_error(tmp_path: Path) -> None:
    (tmp_path / GRAPH_FILE).mkdir()
    with pytest.raises(LTMError, match=f"{tmp_path / GRAPH_FILE}.*cannot be read"):
        build_ltm(LTMConfig(path=tmp_path), dim=8)
    DirectoryLock.acquire(tmp_path).release()  # refusing to open released the directory
