"""Closing a memory while calls are in flight: a write in flight finishes and is kept (close
waits for it), and every call that races the close gets a ``TiermemError`` (``ClosedError``
once the journal is closed), never a raw ``sqlite3`` error. ``source_turns`` refuses a closed
memory and anything that is not a list of hits."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tiermem import ClosedError, ManualClock, Memory, TiermemConfig, TiermemError
from tiermem.components import build_components
from tiermem.errors import InvalidInputError
from tiermem.journal import Journal
from tiermem.roles.extract import EntryExtractor, Extraction
from tiermem.types import AuditEvent, MemoryEntry, Turn

from tests.conftest import ON_DISK, chat, config_for


class GatedExtractor:
    """The real extractor, after the test lets it go: holds a write inside the write lock."""

    def __init__(self, inner: EntryExtractor) -> None:
        self._inner = inner
        self.entered = threading.Event()
        self.release = threading.Event()

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def wants_existing(self) -> bool:
        return self._inner.wants_existing

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry]
    ) -> Extraction:
        self.entered.set()
        assert self.release.wait(10)
        return self._inner.extract(turns, context, existing)


@pytest.mark.parametrize("location", ON_DISK)
def test_close_waits_for_a_write_in_flight_and_keeps_it(
    tmp_path: Path, clock: ManualClock, location: str
) -> None:
    config = config_for(location, tmp_path)
    components = build_components(config, clock)
    gate = GatedExtractor(components.extractor)
    memory = Memory(config, components=replace(components, extractor=gate))
    outcome: list[object] = []

    def write() -> None:
        try:
            outcome.append(memory.add(chat(("user", "I keep bees on the roof.")), "ana"))
        except BaseException as exc:  # noqa: BLE001 - asserted below
            outcome.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    assert gate.entered.wait(10)
    closer = threading.Thread(target=memory.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # close waits for the write holding the lock
    with pytest.raises(ClosedError):  # while new calls are refused already
        memory.get_all("ana")
    gate.release.set()
    writer.join(10)
    closer.join(10)
    assert not closer.is_alive()
    [result] = outcome
    assert not isinstance(result, BaseException), repr(result)
    with Memory(config, clock=clock) as reopened:  # the acknowledged write was kept whole
        [entry] = reopened.get_all("ana")
        assert entry.text == "Ana: I keep bees on the roof."
        assert [e.op.value for e in reopened.history(entry.id, "ana")] == ["ADD"]


class ClosingJournal(Journal):
    """A journal whose reads find the memory closed by another thread just as they start:
    the moment after the caller's open check passed."""

    close_memory: Callable[[], None] = staticmethod(lambda: None)

    def history(self, user_id: str, memory_id: str) -> list[AuditEvent]:
        self.close_memory()
        return super().history(user_id, memory_id)

    def turns(self, user_id: str, turn_ids: Sequence[str]) -> dict[str, Turn]:
        self.close_memory()
        return super().turns(user_id, turn_ids)


@pytest.mark.parametrize("call", ["history", "source_turns"])
def test_a_journal_read_racing_close_raises_closed_error(
    tmp_path: Path, clock: ManualClock, call: str
) -> None:
    config = config_for("path", tmp_path)
    built = build_components(config, clock)
    built.journal.close()  # one journal holds the file at a time
    journal = ClosingJournal(tmp_path / "journal.sqlite3")
    memory = Memory(config, components=replace(built, journal=journal))
    added = memory.add(chat(("user", "I keep bees on the roof.")), "ana")
    hits = memory.search("bees", "ana")
    journal.close_memory = memory.close
    read: Callable[[], object] = (
        (lambda: memory.history(added.entries[0].id, "ana"))
        if call == "history"
        else (lambda: memory.source_turns(hits, "ana"))
    )
    with pytest.raises(ClosedError):
        read()


def test_calls_racing_close_raise_only_typed_errors() -> None:
    memory = Memory(TiermemConfig.for_tests())
    started = threading.Semaphore(0)
    untyped: Counter[str] = Counter()
    refused: list[str] = []

    def worker(n: int) -> None:
        i = 0
        while True:
            i += 1
            try:
                memory.add(f"fact number {i} about zebras from worker {n}", user_id="u")
                memory.search("zebra", user_id="u")
            except ClosedError:
                refused.append(f"worker {n}")
                return
            except TiermemError:  # a store closed under a read: typed, and allowed
                pass
            except Exception as exc:  # noqa: BLE001 - the defect this test is about
                untyped[f"{type(exc).__module__}.{type(exc).__name__}: {exc}"] += 1
            started.release()

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for w in workers:
        w.start()
    for _ in range(12):  # a few calls of each worker in flight, then close under them
        assert started.acquire(timeout=10)
    memory.close()
    for w in workers:
        w.join(10)
    assert dict(untyped) == {}
    assert sorted(refused) == ["worker 0", "worker 1", "worker 2"]


def test_source_turns_refuses_a_closed_memory() -> None:
    memory = Memory(TiermemConfig.for_tests())
    memory.add("I keep bees on the roof.", user_id="ana")
    hits = memory.search("bees", "ana")
    assert len(memory.source_turns(hits, "ana")) == 1
    memory.close()
    with pytest.raises(ClosedError):
        memory.source_turns(hits, "ana")


@pytest.mark.parametrize("hits", [None, 5, "bees", {"id": "x"}, [None], ["bees"]])
def test_source_turns_refuses_what_is_not_a_list_of_hits(hits: Any) -> None:
    with Memory(TiermemConfig.for_tests()) as memory:
        memory.add("I keep bees on the roof.", user_id="ana")
        with pytest.raises(InvalidInputError, match="SearchHit"):
            memory.source_turns(hits, "ana")


def test_source_turns_takes_any_iterable_of_hits() -> None:
    with Memory(TiermemConfig.for_tests()) as memory:
        memory.add("I keep bees on the roof.", user_id="ana")
        hits = memory.search("bees", "ana")
        by_list = memory.source_turns(hits, "ana")
        by_generator = memory.source_turns((h for h in hits), "ana")
        assert by_list == by_generator
        assert [t.content for t in by_list.values()] == ["I keep bees on the roof."]


# A script's memory on disk under ./data, with the model-free hash embedder.
_OPEN_MEMORY = (
    "from tiermem import Memory, TiermemConfig\n"
    "from tiermem.config import EmbedderConfig\n"
    "config = TiermemConfig.for_data_dir('data').model_copy(\n"
    "    update={'embedder': EmbedderConfig(kind='hash', model='hash-384')})\n"
    "memory = Memory(config)\n"
)


def _python(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_a_memory_left_open_is_closed_at_exit_without_a_traceback(tmp_path: Path) -> None:
    """A script that never closes its memory: tiermem closes it while the interpreter can
    still run the stores' close (qdrant-client's own finaliser at teardown printed
    ``ImportError: sys.meta_path is None``). The script's handler, registered before tiermem
    was imported, runs after tiermem's and sees the memory closed."""
    script = (
        "import atexit\n"
        "atexit.register(lambda: print('closed at exit:', memory._closed))\n"
        + _OPEN_MEMORY
        + "memory.add('I moved my flight to 9 October.', user_id='maya')\n"
    )
    done = _python(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "closed at exit: True" in done.stdout
    assert "Traceback" not in done.stderr
    # closed cleanly: the next process opens the same directory and finds the turn
    again = _python(_OPEN_MEMORY + "print(len(memory.get_all('maya')))\nmemory.close()\n", tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == "1"


def test_a_forked_child_leaves_its_parents_memory_open_at_exit(tmp_path: Path) -> None:
    """A child of ``os.fork()`` (a preloading web server's worker) that exits normally runs
    the exit handlers too: it must not close, save over or unlock the parent's stores."""
    script = (
        "import os, sys\n" + _OPEN_MEMORY + "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "lock = open('data/journal.sqlite3.lock').read().strip()\n"
        "print('lock names the parent', lock == str(os.getpid()))\n"
        "memory.add('I moved my flight to 9 October.', user_id='maya')\n"
        "print('entries', len(memory.get_all('maya')))\n"
        "memory.close()\n"
    )
    done = _python(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "lock names the parent True" in done.stdout  # the child did not clear it
    assert "entries 1" in done.stdout
