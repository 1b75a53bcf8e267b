"""Shared fixtures. Every memory here runs the real code path with the deterministic hash
embedder and an in-process Qdrant (through qdrant-client, or Qdrant Edge shards) or the
reference store, no model, no server."""

from __future__ import annotations

import errno
import os
import random
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.config import JournalConfig, QdrantConfig, ReferenceStoreConfig
from tiermem.config.stores import EdgeStoreConfig
from tiermem.slm.registry import SCORES_TOKENS, registered_backend

from tests.fakes.scripted import KIND, ScriptedModels

# Real-model tests run in a child process each: a model that dies with SIGILL fails one test.
pytest_plugins = ["pytester", "tests.isolation"]

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

MemoryFactory = Callable[..., Memory]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def scripted_models() -> Iterator[ScriptedModels]:
    """Backend kind ``scripted``, registered for this test only: a config naming it gets the
    fake of its model name, which the test scripts by that name."""
    models = ScriptedModels()
    with registered_backend(KIND, models.build, capabilities={SCORES_TOKENS}):
        yield models


ON_DISK = ("path", "edge")
"""The locations whose MTM lives in files under the data directory: Qdrant through
qdrant-client (``path``) and Qdrant Edge shards (``edge``)."""


def config_for(location: str, tmp_path: Path) -> TiermemConfig:
    """A test config whose MTM is Qdrant in memory, Qdrant on disk (``path``), Qdrant Edge
    shards on disk (``edge``), or the reference store. On disk, the journal is too."""
    base = TiermemConfig.for_tests()
    if location in ON_DISK:
        mtm = (
            QdrantConfig(location="path", path=tmp_path / "qdrant")
            if location == "path"
            else EdgeStoreConfig(path=tmp_path / "edge")
        )
        return base.model_copy(
            update={
                "mtm": mtm,
                "journal": JournalConfig(path=tmp_path / "journal.sqlite3"),
                "data_dir": tmp_path,
            }
        )
    if location == "reference":
        return base.model_copy(update={"mtm": ReferenceStoreConfig()})
    return base.model_copy(update={"mtm": QdrantConfig(location="memory")})


@pytest.fixture
def make_memory(tmp_path: Path, clock: ManualClock) -> Iterator[MemoryFactory]:
    opened: list[Memory] = []

    def make(location: str = "memory", **kwargs: object) -> Memory:
        memory = Memory(config_for(location, tmp_path), clock=clock, **kwargs)  # type: ignore[arg-type]
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()


@pytest.fixture(params=["memory", "edge", "reference"])
def memory(request: pytest.FixtureRequest, make_memory: MemoryFactory) -> Memory:
    """A fresh memory on Qdrant (in memory), then on Qdrant Edge shards, then on the reference
    store."""
    return make_memory(request.param)


def chat(
    *pairs: tuple[str, str], start: datetime = T0, speaker: str = "Ana"
) -> list[dict[str, object]]:
    """Messages a minute apart; user turns spoken by ``speaker``."""
    return [
        {
            "role": role,
            "content": content,
            "speaker": speaker if role == "user" else "Assistant",
            "timestamp": start + timedelta(minutes=i),
        }
        for i, (role, content) in enumerate(pairs)
    ]


MANY_PAGES_SECRET = "Zyxwvutsrq-7731"


def many_pages(memory: Memory, victim: str, bystander: str, seed: int = 1) -> dict[str, str]:
    """A journal of many pages, two users' rows interleaved on them: 150 exchanges of
    ``victim`` (speaker "Mira", each holding ``MANY_PAGES_SECRET``), of random length, some
    updated, and about 75 of ``bystander`` between them. Returns the bystander's entries (id
    -> text). With seed 1, SQLite's secure_delete alone left bytes of the victim after an
    erasure (issue #19)."""
    rnd = random.Random(seed)
    for i in range(150):
        when = T0 + timedelta(minutes=i)
        n = rnd.randint(1, 60)
        words = " ".join(
            rnd.choice(["garden", "tulips", "rain", "soil", "compost"]) for _ in range(n)
        )
        pairs = [("user", f"Note {i}: {MANY_PAGES_SECRET} {words}")]
        if rnd.random() < 0.5:
            pairs.append(("assistant", "Noted. " + "ok " * rnd.randint(0, 30)))
        result = memory.add(
            chat(*pairs, start=when, speaker="Mira"), user_id=victim, session_id=f"s{i // 20}"
        )
        if rnd.random() < 0.5:
            said = chat(("user", f"Otto {i} " + "jazz " * rnd.randint(0, 40)), start=when)
            memory.add(said, user_id=bystander, session_id=f"o{i // 20}")
        if result.entries and rnd.random() < 0.1:
            memory.update(result.entries[0].id, f"Mira's note {MANY_PAGES_SECRET} {i}", victim)
    return {e.id: e.text for e in memory.get_all(bystander)}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted afterwards; skipped where mounting is not allowed."""
    with tmpfs(tmp_path / "disk", "2m") as where:
        yield where


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount(8)'s ``size=``) at ``where``, unmounted afterwards; the
    test is skipped where mounting is not allowed."""
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode(errors='replace')}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the filesystem has no block left; returns it (remove it to free)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="No space left") as full:
            _write_forever(fd)
    finally:
        os.close(fd)
    assert full.value.errno == errno.ENOSPC
    return filler


def _write_forever(fd: int) -> None:
    while True:
        os.write(fd, bytes(4096))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first: the real-model tests, then the other slow ones, then the rest, each in
    collection order. Under ``make test``'s two workers (``--dist worksteal``) the longest
    start at once, and the other worker takes the short ones, stealing what is left, instead
    of a long test starting last and running alone at the end."""

    def tier(item: pytest.Item) -> int:
        if item.get_closest_marker("real_model"):
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=tier)  # stable: collection order within a tier
