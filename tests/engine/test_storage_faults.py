"""A full or read-only disk gives typed errors only, and loses nothing acknowledged.

Fault injection that runs everywhere: the journal may not grow (SQLite's own
``max_page_count``, which answers SQLITE_FULL as a full disk does), and the embedded Qdrant's
storage refuses writes as a read-only file does. Where the tests run as root, a real tmpfs is
filled to the last block too.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from qdrant_client.local.persistence import CollectionPersistence
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.config import QdrantConfig
from tiermem.errors import (
    AuditError,
    JournalLockedError,
    JournalUnavailableError,
    StoreError,
    TiermemError,
)

from tests.conftest import MemoryFactory, chat, config_for, fill

USER = "bo"


def _journal_full(memory: Memory, full: bool = True) -> None:
    conn = memory.components.journal._conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages if full else 1073741823}")


def _acknowledged(memory: Memory, n: int) -> dict[str, str]:
    out = {}
    for i in range(n):
        result = memory.add(chat(("user", f"Stored fact number {i} about gardens.")), user_id=USER)
        out.update({e.id: e.text for e in result.entries})
    return out


def _every_call(memory: Memory, some_id: str) -> dict[str, Any]:
    """Each public write and read once; what each raised (or returned)."""
    big = "A long message about the garden. " * 300
    calls = {
        "add": lambda: memory.add(chat(("user", big)), user_id=USER),
        "update": lambda: memory.update(some_id, big, USER),
        "delete": lambda: memory.delete(some_id, USER),
        "search": lambda: memory.search("garden", USER),
        "context": lambda: memory.context("garden", USER, 300),
        "get_all": lambda: memory.get_all(USER),
        "history": lambda: memory.history(some_id, USER),
    }
    seen: dict[str, Any] = {}
    for name, call in calls.items():
        try:
            seen[name] = call()
        except TiermemError as exc:
            seen[name] = exc
    return seen


def test_a_full_journal_gives_typed_errors_and_keeps_every_acknowledged_write(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory("path")
    kept = _acknowledged(memory, 20)
    _journal_full(memory)
    for _ in range(2):  # and again: never SQLite's "cannot rollback"
        seen = _every_call(memory, next(iter(kept)))
        assert isinstance(seen["add"], JournalUnavailableError)
        assert isinstance(seen["update"], JournalUnavailableError)
        errors = {k: v for k, v in seen.items() if isinstance(v, Exception)}
        assert all(isinstance(e, AuditError | StoreError) for e in errors.values()), errors
    assert {e.id: e.text for e in memory.get_all(USER)} == kept
    _journal_full(memory, full=False)  # room again: writes succeed without a restart
    assert memory.add(chat(("user", "After the disk was freed.")), user_id=USER).entries
    memory.close()
    reopened = make_memory("path")
    stored = {e.id: e.text for e in reopened.get_all(USER)}
    assert kept.items() <= stored.items()


def test_a_read_only_qdrant_directory_gives_store_errors(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = make_memory("path")
    kept = _acknowledged(memory, 5)

    def refuse(self: CollectionPersistence, *args: object) -> None:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(CollectionPersistence, "persist", refuse)
    monkeypatch.setattr(CollectionPersistence, "delete", refuse)
    seen = _every_call(memory, next(iter(kept)))
    for name in ("add", "update", "delete"):
        assert isinstance(seen[name], StoreError), (name, seen[name])
        assert "readonly" in str(seen[name])
    for name in ("search", "context", "get_all"):  # a read writes nothing: it answers
        assert not isinstance(seen[name], Exception), (name, seen[name])
    found = {h.id: h.entry.access_count for h in seen["search"]}
    assert found
    assert all(n == 1 for n in found.values())  # counted, not yet written
    with pytest.raises(StoreError):  # a write carries the counts: refused, typed, kept
        memory.add(chat(("user", "One more.")), user_id=USER)
    monkeypatch.undo()
    memory.close()  # the reads' counts are written with the last write, or at close
    reopened = make_memory("path")
    assert {e.id: e.text for e in reopened.get_all(USER) if e.id in kept} == kept
    stored = {e.id: e.access_count for e in reopened.get_all(USER)}
    # search counted once, context once for what it delivered
    assert all(stored[i] >= 1 for i in found), (found, stored)


# -- a real filesystem that fills up (root only: it mounts a tmpfs) ----------------------------


def _open_or_error(config: TiermemConfig, clock: ManualClock) -> TiermemError | None:
    try:
        Memory(config, clock=clock).close()
    except TiermemError as exc:
        return exc
    return None


def test_a_disk_that_fills_up_gives_typed_errors_only(small_disk: Path, clock: ManualClock) -> None:
    memory = Memory(config_for("path", small_disk), clock=clock)
    kept = _acknowledged(memory, 20)
    filler = fill(small_disk)
    raised: list[Exception] = []
    for _ in range(2):
        seen = _every_call(memory, next(iter(kept)))
        raised += [v for v in seen.values() if isinstance(v, Exception)]
        reads = {n: seen[n] for n in ("search", "context", "get_all")}
        assert not any(isinstance(v, Exception) for v in reads.values()), reads  # write nothing
    assert raised, "a full disk refused nothing"
    assert all(isinstance(e, AuditError | StoreError) for e in raised), raised
    assert {e.id: e.text for e in memory.get_all(USER)}.items() >= kept.items()
    memory.close()
    opened = _open_or_error(config_for("path", small_disk), clock)  # on a full disk: typed too
    assert opened is None or isinstance(opened, AuditError | StoreError), opened
    filler.unlink()
    reopened = Memory(config_for("path", small_disk), clock=clock)
    try:
        assert {e.id: e.text for e in reopened.get_all(USER)}.items() >= kept.items()
        assert reopened.add(chat(("user", "Room again.")), user_id=USER).entries
    finally:
        reopened.close()


@pytest.mark.parametrize(("location", "store"), [("path", "qdrant"), ("edge", "edge")])
def test_every_file_of_the_data_directory_is_its_owners_alone(
    make_memory: MemoryFactory, tmp_path: Path, location: str, store: str
) -> None:
    memory = make_memory(location)
    _acknowledged(memory, 3)
    memory.add(chat(("user", "Another user's words.")), user_id="cy")
    memory.forget_user("cy")  # a drop rewrites Qdrant's meta.json
    memory.close()
    where = tmp_path / store
    files = [where, *where.rglob("*"), tmp_path / "journal.sqlite3"]
    loose = [
        (str(p.relative_to(tmp_path)), oct(p.stat().st_mode & 0o777))
        for p in files
        if p.stat().st_mode & 0o077
    ]
    assert loose == []


def test_two_memories_cannot_share_one_journal(tmp_path: Path, clock: ManualClock) -> None:
    config = config_for("path", tmp_path).model_copy(
        update={"mtm": QdrantConfig(location="memory")}
    )
    with Memory(config, clock=clock), pytest.raises(JournalLockedError):
        Memory(config, clock=clock)  # its vector store in memory: only the journal is shared


def test_opening_on_a_disk_with_no_block_left_is_typed_and_holds_nothing(
    small_disk: Path, clock: ManualClock
) -> None:
    config = config_for("path", small_disk).model_copy(
        update={"mtm": QdrantConfig(location="memory")}
    )
    Memory(config, clock=clock).close()  # the journal and its lock file exist
    filler = fill(small_disk)
    opened = _open_or_error(config, clock)
    assert opened is None or isinstance(opened, AuditError | StoreError), opened
    filler.unlink()
    assert _open_or_error(config, clock) is None  # the failed open left no lock behind
    assert not [p for p in _open_files() if p.startswith(str(small_disk))]


def _open_files() -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return found
