"""A service whose disk fills up answers 503 with the journal's or the store's code, never 500;
``/readyz`` fails while writes cannot succeed and passes again once they can; every write it
acknowledged is there afterwards, and nothing reaches the log as a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tiermem import Memory, TiermemConfig
from tiermem.errors import JournalUnavailableError, StoreError
from tiermem.journal import Journal
from tiermem.remote import RemoteMemory
from tiermem.service.launch import ServerProcess

from tests.conftest import fill, tmpfs
from tests.service.conftest import in_thread, make_keys, write_config


@pytest.fixture
def edge_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs the embedded default (Edge) opens shards on: about 90 MiB per shard on tmpfs,
    and Edge keeps 128 MiB free."""
    with tmpfs(tmp_path / "disk", "400m") as where:
        yield where


def test_a_full_disk_is_503_and_not_ready_until_it_has_room(
    edge_disk: Path, tmp_path: Path
) -> None:
    keys = make_keys(tmp_path)
    config = tmp_path / "conf"
    config.mkdir()
    conf = write_config(config).read_text().replace(str(config / "data"), str(edge_disk))
    (config / "tiermem.toml").write_text(conf)
    log = tmp_path / "serve.log"
    server = ServerProcess(config / "tiermem.toml", keys.path, log_file=log).start()
    try:
        with RemoteMemory(server.url, keys.acme, timeout_s=30) as memory:
            kept = {}
            for i in range(20):
                result = memory.add(f"Stored fact number {i} about gardens.", user_id="bo")
                kept.update({e.id: e.text for e in result.entries})
            assert httpx.get(f"{server.url}/readyz").status_code == 200
            filler = fill(edge_disk)
            ready = httpx.get(f"{server.url}/readyz")
            assert ready.status_code == 503, ready.text
            statuses = []
            for i in range(5):
                response = httpx.post(
                    f"{server.url}/v1/memories",
                    json={
                        "messages": [{"role": "user", "content": f"Full disk {i}. " * 200}],
                        "user_id": "bo",
                    },
                    headers={"Authorization": f"Bearer {keys.acme}"},
                    timeout=30,
                )
                statuses.append((response.status_code, response.json()["error"]["code"]))
            print(f"\nfull disk: {statuses}")
            assert {s for s, _ in statuses} == {503}, statuses
            assert {c for _, c in statuses} <= {"journal_unavailable", "store_error"}, statuses
            with pytest.raises((JournalUnavailableError, StoreError)):
                memory.add("One more while full.", user_id="bo")
            filler.unlink()
            assert httpx.get(f"{server.url}/readyz").status_code == 200
            assert memory.add("Room again.", user_id="bo").entries
            stored = {e.id: e.text for e in memory.get_all("bo")}
            assert kept.items() <= stored.items()
    finally:
        server.stop()
    logged = log.read_text()
    assert "Traceback" not in logged
    assert "internal_error" not in logged


def test_readyz_fails_while_an_unfinished_erasure_blocks_every_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erasure whose journal step cannot run (its deletes do not fit on the disk) stays
    pending, and every later write of any user tries it first and fails: not ready, though
    a small write would fit. Once it can finish, /readyz finishes it and is ready again."""
    keys = make_keys(tmp_path)
    config = TiermemConfig.for_tests()
    real = Journal.forget_user

    def no_room(self: Journal, user_id: str) -> object:
        raise JournalUnavailableError("journal write failed: database or disk is full")

    with Memory(config) as memory, in_thread(memory, keys) as url:
        memory.add("My locker code is 7731.", user_id="acme:victim")
        monkeypatch.setattr(Journal, "forget_user", no_room)
        with pytest.raises(JournalUnavailableError):
            memory.forget_user("acme:victim")
        with RemoteMemory(url, keys.beta) as beta, pytest.raises(JournalUnavailableError):
            beta.add("A newcomer's first words.", user_id="newcomer")
        ready = httpx.get(f"{url}/readyz")
        assert (ready.status_code, ready.json()["reason"]) == (503, "JournalUnavailableError")
        with RemoteMemory(url, keys.beta) as beta, pytest.raises(JournalUnavailableError):
            beta.check_writable()  # the client re-raises the service's typed error
        monkeypatch.setattr(Journal, "forget_user", real)
        assert httpx.get(f"{url}/readyz").status_code == 200  # and it finished the erasure
        assert memory.components.journal.unfinished() == []
        assert memory.get_all("acme:victim") == []
