"""One process owns the stores, and a crash loses nothing it acknowledged: ``tiermem serve``
killed with SIGKILL in the middle of writes, then started again on the same files, has every
write it answered; ``tiermem consolidate`` and a second service refuse its data directory."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tiermem.errors import ServiceUnavailableError
from tiermem.remote import RemoteMemory
from tiermem.service.launch import ServerProcess
from tiermem.types import AddResult, ScoreExplanation, SearchHit

from tests.service.conftest import Served, make_keys, write_config

pytestmark = pytest.mark.slow  # a service process per kill point

WRITERS = 4


@pytest.mark.parametrize("mtm", ["", '[mtm]\nkind = "qdrant"\n'], ids=["edge", "qdrant"])
def test_every_acknowledged_write_survives_kill_9(tmp_path: Path, mtm: str) -> None:
    keys = make_keys(tmp_path)
    config = write_config(tmp_path, extra=mtm)
    server = ServerProcess(config, keys.path, log_file=tmp_path / "serve.log")
    server.start()
    acknowledged: list[tuple[str, AddResult]] = []
    unexpected: list[BaseException] = []
    lock = threading.Lock()
    killed = threading.Event()

    def writer(index: int) -> None:
        user = f"writer-{index}"
        with RemoteMemory(server.url, keys.acme, timeout_s=30) as memory:
            for n in range(10_000):
                try:
                    result = memory.add(f"Writer {index} stored fact number {n}.", user_id=user)
                except ServiceUnavailableError:
                    if killed.is_set():
                        return  # the write in flight when the server died: not acknowledged
                    raise
                except BaseException as exc:  # noqa: BLE001 - listed, then asserted empty
                    unexpected.append(exc)
                    return
                with lock:
                    acknowledged.append((user, result))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    while len(acknowledged) < 3 * WRITERS:  # mid-stream: several writes in, more in flight
        time.sleep(0.02)
    killed.set()
    server.kill()
    for thread in threads:
        thread.join(60)
    assert not unexpected, unexpected
    server.start()
    try:
        with RemoteMemory(server.url, keys.acme) as memory:
            for user, result in acknowledged:
                stored = {e.id: e.text for e in memory.get_all(user)}
                for written in result.entries:
                    assert stored.get(written.id) == written.text, (user, written.text)
                hits = [SearchHit(e, 0.0, ScoreExplanation({})) for e in result.entries]
                turns = memory.source_turns(hits, user)  # the journal has the turns too
                assert set(turns) == {t.turn_id for t in result.turns}, user
    finally:
        server.stop()
    assert len(acknowledged) >= 3 * WRITERS
    assert (tmp_path / "data" / ("qdrant" if mtm else "edge")).is_dir()  # the default: Edge
    print(f"\nkill -9: {len(acknowledged)} acknowledged writes, every one present after restart")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tiermem.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_consolidate_and_a_second_service_refuse_a_served_data_directory(
    served: Served,
) -> None:
    config = served.root / "tiermem.toml"
    pid = served.server.process.pid if served.server.process else None
    refused = _cli("consolidate", "--config", str(config), "--once")
    assert refused.returncode == 2
    assert f"owned by a running tiermem service (process {pid})" in refused.stdout
    second = _cli("serve", "--config", str(config), "--keys", str(served.keys.path), "--port", "9")
    assert second.returncode == 2
    assert "owned by a running tiermem service" in second.stdout


def test_keys_add_prints_the_key_once_and_keeps_its_hash(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    done = _cli("keys", "add", "acme", "--keys", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    key = done.stdout.strip()
    assert key.startswith("tmk_")
    assert len(key) > 40
    assert key not in path.read_text()
    assert "acme" in _cli("keys", "list", "--keys", str(path)).stdout
    bad = _cli("keys", "add", "Not:A:Tenant", "--keys", str(path))
    assert bad.returncode == 2


@pytest.mark.parametrize("content", [None, '{"format": "tiermem-keys-1", "keys": []}'])
def test_serve_refuses_to_start_without_any_key(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "keys.json"
    if content is not None:
        path.write_text(content)
    done = _cli("serve", "--config", str(write_config(tmp_path)), "--keys", str(path))
    assert done.returncode == 2
    assert "no API keys" in done.stdout
