"""Path mode survives a process restart: entries, vectors, source turns, audit trail."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tiermem import StoreError

from tests.conftest import MemoryFactory

WRITER = """
import json, sys
from datetime import UTC, datetime
from tiermem import Memory
from tiermem.settings import load_config
cfg = load_config(None, {"TIERMEM_DATA_DIR": sys.argv[1], "TIERMEM_MTM__KIND": sys.argv[2]})
cfg = cfg.model_copy(update={"embedder": cfg.embedder.model_copy(update={"kind": "hash"})})
with Memory(cfg) as m:
    r = m.add([{"role": "user", "speaker": "Ivo", "content": "My boat is called Sardinha.",
                "timestamp": datetime(2026, 5, 1, 10, tzinfo=UTC)}], user_id="ivo", session_id="s1")
    m.update(r.entries[0].id, "Ivo: my boat is called Sardinha II.", "ivo")
    print(json.dumps({"id": r.entries[0].id, "turn": r.turns[0].turn_id}))
"""

READER = """
import json, sys
from tiermem import Memory
from tiermem.settings import load_config
cfg = load_config(None, {"TIERMEM_DATA_DIR": sys.argv[1], "TIERMEM_MTM__KIND": sys.argv[2]})
cfg = cfg.model_copy(update={"embedder": cfg.embedder.model_copy(update={"kind": "hash"})})
with Memory(cfg) as m:
    hit = m.search("what is my boat called", "ivo", k=1)[0]
    turns = m.source_turns([hit], "ivo")
    print(json.dumps({"id": hit.entry.id, "text": hit.entry.text,
                      "history": [e.op for e in m.history(hit.entry.id, "ivo")],
                      "turns": {k: v.content for k, v in turns.items()},
                      "count": hit.entry.access_count}))
"""


def _run(script: str, data_dir: Path, kind: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", script, str(data_dir), kind],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["qdrant", "edge"])
def test_memory_survives_process_restart(tmp_path: Path, kind: str) -> None:
    """``[mtm] kind = "qdrant"`` (local mode, on disk) and ``"edge"`` (the embedded default),
    each with its files under the data directory, as the environment says it."""
    written = _run(WRITER, tmp_path, kind)
    first = _run(READER, tmp_path, kind)
    second = _run(READER, tmp_path, kind)
    assert (tmp_path / kind).is_dir()
    assert first["id"] == written["id"]
    assert first["text"] == "Ivo: my boat is called Sardinha II."
    assert first["history"] == ["ADD", "UPDATE"]
    assert first["turns"] == {written["turn"]: "My boat is called Sardinha."}
    assert (first["count"], second["count"]) == (1, 2)  # access statistics persist too


def test_second_process_on_the_same_path_gets_a_clear_error(make_memory: MemoryFactory) -> None:
    make_memory("path")
    with pytest.raises(StoreError, match="cannot open the MTM store"):
        make_memory("path")
