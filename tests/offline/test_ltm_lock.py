"""One writer per knowledge graph: a running memory with LTM on holds its LTM directory, and a
second one (another service, or ``tiermem consolidate`` on the same data directory) refuses to
start instead of overwriting the graph the first one saves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.cli import main
from tiermem.config import JournalConfig, QdrantConfig
from tiermem.errors import LTMError, LTMLockedError
from tiermem.ltm import LongTermMemory, Provenance

from tests.conftest import chat
from tests.offline.conftest import ltm_config

DIM = 8
T0 = datetime(2026, 3, 2, tzinfo=UTC)
PROV = Provenance(b"k" * 32)


def _shared_mtm(tmp_path: Path) -> TiermemConfig:
    """Two processes sharing one MTM (a Qdrant server in production; here each has its own
    in-process store) and one LTM directory."""
    config = ltm_config(tmp_path)
    return config.model_copy(update={"mtm": QdrantConfig(location="memory")})


@pytest.mark.usefixtures("scripted_models")  # the consolidation model ltm_config names
def test_a_second_memory_on_the_same_ltm_refuses_to_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = _shared_mtm(tmp_path)
    first = Memory(config, clock=clock)
    # a journal of its own: one shared with the first is refused before the graph is reached
    journal = JournalConfig(path=tmp_path / "second-journal.sqlite3")
    second = config.model_copy(update={"journal": journal})
    try:
        with pytest.raises(LTMLockedError) as refused:
            Memory(second, clock=clock)
        assert refused.value.path == tmp_path / "ltm"
        assert refused.value.pid == os.getpid()
        assert str(tmp_path / "ltm") in str(refused.value)
        assert f"process {os.getpid()}" in str(refused.value)
        first.add(chat(("user", "I still work.")), "ana")  # the holder is untouched
    finally:
        first.close()
    with Memory(config, clock=clock) as again:  # closing released it
        assert again.get_all("ana") == []


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process serving a memory with LTM on from ``tmp_path / "data"`` (embedded
    store, journal and graph), as a running service would; it exits when its stdin closes."""
    data = tmp_path / "data"
    model = tmp_path / "never-loaded.gguf"
    model.write_bytes(b"GGUF")
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from tiermem import Memory
        from tiermem.offline_cli import cli_config
        config = cli_config(None, Path({str(data)!r}), {str(model)!r}, once=True)
        with Memory(config):
            print("ready", flush=True)
            sys.stdin.read()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    yield child
    if child.poll() is None:
        child.communicate(timeout=10)


def test_consolidate_refuses_a_data_directory_a_running_process_holds(
    holder: subprocess.Popen[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    model = tmp_path / "never-loaded.gguf"
    args = ["consolidate", "--once", "--data-dir", str(data), "--model", str(model)]
    assert main(args) == 2
    out = "".join(capsys.readouterr().out.split())  # rich wraps long paths
    assert str(data / "ltm") in out
    assert f"process{holder.pid}" in out


def test_a_killed_holder_leaves_no_stale_lock(
    holder: subprocess.Popen[str], tmp_path: Path
) -> None:
    ltm_dir = tmp_path / "data" / "ltm"
    with pytest.raises(LTMLockedError):
        LongTermMemory(ltm_dir, 384, PROV)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    ltm = LongTermMemory(ltm_dir, 384, PROV)  # the kernel dropped the lock with the process
    ltm.close()


def test_two_opens_in_one_process_conflict_and_close_releases(tmp_path: Path) -> None:
    """flock locks belong to an open file description: a second open in the same process
    is a second holder, refused like any other."""
    ltm = LongTermMemory(tmp_path, DIM, PROV)
    with pytest.raises(LTMLockedError):
        LongTermMemory(tmp_path, DIM, PROV)
    ltm.close()
    ltm.close()  # idempotent
    LongTermMemory(tmp_path, DIM, PROV).close()


def test_a_read_only_view_needs_no_lock_and_cannot_save(tmp_path: Path) -> None:
    """``tiermem ltm`` inspects the graph beside a running service."""
    ltm = LongTermMemory(tmp_path, DIM, PROV)
    view = LongTermMemory(tmp_path, DIM, PROV, read_only=True)
    assert view.node_count == 0
    with pytest.raises(LTMError, match="read-only"):
        view.save()
    ltm.close()


def test_a_closed_graph_never_writes_without_its_lock(tmp_path: Path) -> None:
    ltm = LongTermMemory(tmp_path, DIM, PROV)
    ltm.close()
    other = LongTermMemory(tmp_path, DIM, PROV)  # the next writer
    other.save()
    saved = (tmp_path / "graph.json").read_bytes()
    for write in (lambda: ltm.decay_now(T0), ltm.save, lambda: ltm.forget_user("a", [], T0)):
        with pytest.raises(LTMError, match="closed"):
            write()
    assert (tmp_path / "graph.json").read_bytes() == saved
    other.close()
